"""Value error caused by how time-limit truncation enters the value target, on MDPs with known values.

Three targets, all computed with :func:`ppo_bootstrap.gae.compute_gae` (returns = lambda-returns):

* ``exact``: the library's rule: on a timeout bootstrap with ``V(s_final)`` (``truncated=True``,
  ``next_values`` from :func:`assemble_next_values`).
* ``rsl_rl``: rsl_rl's approximation: on a timeout add ``gamma * V(s_t)`` to the reward and treat the
  step as done (the value of the state the step *started* in, not of the state it ended in).
* ``ignore``: the timeout is treated as a termination (target ``r``).

Tasks (never-ending Markov reward processes cut by a time limit of ``L`` steps; vectorized envs
whose episode clocks start staggered, uniform in ``[0, L)``):

* ``constant``: a ring of ``K`` states walked one step at a time, reward 1 everywhere, reset to
  state 0. ``V*(s) = 1 / (1 - gamma)``. Here ``V(s_t) = V(s_final)``, so rsl_rl's shortcut is exact.
* ``wave``: the same ring, reward ``1 + sin(2 pi s / K)``.
  ``V*(s) = sum_{k<K} gamma^k r(s + k) / (1 - gamma^K)``. Tabular value function.
* ``drift``: a scalar state drifting at constant speed, ``x' = x + v``, reward ``x``, reset
  ``x ~ U[0, 1]``. ``V*(x) = x / (1 - gamma) + gamma v / (1 - gamma)^2``; the value function is linear
  in ``[1, x]``, so it can represent ``V*`` exactly. Here ``V(s_t) - V(s_final) = -v / (1 - gamma)``.

Fitting: one fixed rollout per task (dynamics and rewards are deterministic, so all randomness is
in the seeded staggering/resets); starting from ``V = 0``, repeat {value targets from the current
``V``; least-squares fit of ``V`` to them} until the weights stop moving. Everything in float64.

Reported per task and target: mean |V - V*| over all visited states, and the signed error of ``V``
and of the targets over the last ``--near`` steps before a time limit, and at the timeout step.

Run: ``python benchmarks/value_bias.py``.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass

# cuBLAS needs this to honour torch.use_deterministic_algorithms on CUDA.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

from _common import assemble_next_values, compute_gae, format_table, machine_line, resolve_device  # noqa: E402

TARGETS = ("exact", "rsl_rl", "ignore")


@dataclass
class Rollout:
    states: torch.Tensor  # [T, N] (long ring index or float position)
    rewards: torch.Tensor  # [T, N]
    truncated: torch.Tensor  # [T, N] bool
    to_limit: torch.Tensor  # [T, N] steps left before the time limit (0 at the timeout step)
    last_states: torch.Tensor  # [N]
    final_states: torch.Tensor  # [K] state reached at each timeout, before the reset
    final_steps: torch.Tensor  # [K]
    final_env_ids: torch.Tensor  # [K]


class RingTask:
    """Deterministic walk around a ring of ``K`` states; reward ``r(s)``; reset to state 0."""

    def __init__(self, name: str, rewards: torch.Tensor, gamma: float):
        self.name = name
        self.r = rewards
        self.K = rewards.numel()
        self.gamma = gamma

    def initial(self, clocks: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        return clocks % self.K  # as if every env had run from a reset at state 0

    def reward(self, s):
        return self.r[s]

    def step(self, s):
        return (s + 1) % self.K

    def reset(self, n: int, g: torch.Generator, device) -> torch.Tensor:
        return torch.zeros(n, dtype=torch.long, device=device)

    def features(self, s):
        return torch.nn.functional.one_hot(s, self.K).to(torch.float64)

    def true_value(self, s):
        k = torch.arange(self.K, device=self.r.device)
        disc = self.gamma ** k.to(torch.float64)
        table = torch.stack([(disc * self.r[(i + k) % self.K]).sum() for i in range(self.K)])
        return table[s] / (1 - self.gamma**self.K)


class DriftTask:
    """``x' = x + v``, reward ``x``, reset ``x ~ U[0, 1]``; linear value function on ``[1, x]``."""

    name = "drift"

    def __init__(self, v: float, gamma: float):
        self.v = v
        self.gamma = gamma

    def initial(self, clocks, g):
        return torch.rand(clocks.shape, generator=g, dtype=torch.float64).to(clocks.device) + clocks * self.v

    def reward(self, x):
        return x

    def step(self, x):
        return x + self.v

    def reset(self, n, g, device):
        return torch.rand(n, generator=g, dtype=torch.float64).to(device)

    def features(self, x):
        return torch.stack([torch.ones_like(x), x], dim=-1)

    def true_value(self, x):
        return x / (1 - self.gamma) + self.gamma * self.v / (1 - self.gamma) ** 2


def simulate(task, T: int, N: int, L: int, seed: int, device) -> Rollout:
    g = torch.Generator().manual_seed(seed)
    clocks = torch.randint(0, L, (N,), generator=g).to(device)  # staggered episode starts
    s = task.initial(clocks, g)
    states, rewards, truncs, to_limit = [], [], [], []
    finals, f_steps, f_envs = [], [], []
    for t in range(T):
        states.append(s)
        rewards.append(task.reward(s).to(torch.float64))
        to_limit.append(L - 1 - clocks)
        nxt = task.step(s)
        clocks = clocks + 1
        trunc = clocks >= L
        ids = torch.nonzero(trunc).flatten()
        finals.append(nxt[ids])
        f_steps.append(torch.full_like(ids, t))
        f_envs.append(ids)
        s = torch.where(trunc, task.reset(N, g, device), nxt)
        clocks = torch.where(trunc, torch.zeros_like(clocks), clocks)
        truncs.append(trunc)
    return Rollout(
        states=torch.stack(states), rewards=torch.stack(rewards), truncated=torch.stack(truncs),
        to_limit=torch.stack(to_limit), last_states=s, final_states=torch.cat(finals),
        final_steps=torch.cat(f_steps), final_env_ids=torch.cat(f_envs),
    )


def value_targets(kind: str, ro: Rollout, values, last_values, final_values, gamma: float, lam: float):
    """Lambda-return targets under one truncation convention."""
    next_values = assemble_next_values(values, last_values, final_values, ro.final_steps, ro.final_env_ids)
    no = torch.zeros_like(ro.truncated)
    if kind == "exact":
        _, ret = compute_gae(ro.rewards, values, next_values, no, ro.truncated, gamma, lam)
    elif kind == "rsl_rl":
        rewards = ro.rewards + gamma * values * ro.truncated  # V(s_t), folded in at collection time
        _, ret = compute_gae(rewards, values, next_values, ro.truncated, no, gamma, lam)
    elif kind == "ignore":
        _, ret = compute_gae(ro.rewards, values, next_values, ro.truncated, no, gamma, lam)
    else:
        raise ValueError(kind)
    return ret


def fit(task, kind: str, ro: Rollout, gamma: float, lam: float, tol: float, max_iters: int):
    """Fitted lambda-return iteration: V <- least-squares fit of the targets computed from V."""
    T, N = ro.states.shape
    phi = task.features(ro.states.reshape(-1))  # [T*N, d]
    phi_last, phi_final = task.features(ro.last_states), task.features(ro.final_states)
    gram = phi.T @ phi
    w = torch.zeros(phi.shape[1], dtype=torch.float64, device=phi.device)
    for it in range(1, max_iters + 1):
        values = (phi @ w).reshape(T, N)
        ret = value_targets(kind, ro, values, phi_last @ w, phi_final @ w, gamma, lam)
        w_new = torch.linalg.solve(gram, phi.T @ ret.reshape(-1))
        delta = (w_new - w).abs().max().item()
        w = w_new
        if delta <= tol * max(1.0, w.abs().max().item()):
            break
    values = (phi @ w).reshape(T, N)
    ret = value_targets(kind, ro, values, phi_last @ w, phi_final @ w, gamma, lam)
    return values, ret, it


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lam", type=float, default=0.95)
    p.add_argument("--time-limit", type=int, default=64, help="episode length L in steps")
    p.add_argument("--ring", type=int, default=16, help="number of ring states K")
    p.add_argument("--speed", type=float, default=0.05, help="drift speed v")
    p.add_argument("--steps", type=int, default=128, help="rollout length T")
    p.add_argument("--envs", type=int, default=512, help="number of envs N")
    p.add_argument("--near", type=int, default=8, help="'near the time limit' = the last this-many steps")
    p.add_argument("--tol", type=float, default=1e-10)
    p.add_argument("--max-iters", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    a = p.parse_args()
    device = resolve_device(a.device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)

    K = a.ring
    ring = torch.arange(K, dtype=torch.float64, device=device)
    tasks = [
        RingTask("constant", torch.ones(K, dtype=torch.float64, device=device), a.gamma),
        RingTask("wave", 1 + torch.sin(2 * math.pi * ring / K), a.gamma),
        DriftTask(a.speed, a.gamma),
    ]
    print(machine_line(device))
    print(f"gamma={a.gamma} lam={a.lam} time limit L={a.time_limit} rollout T={a.steps} envs N={a.envs} "
          f"ring K={K} drift v={a.speed} seed={a.seed}; near = last {a.near} steps before the time limit")
    rows = []
    t0 = time.perf_counter()
    for task in tasks:
        ro = simulate(task, a.steps, a.envs, a.time_limit, a.seed, device)
        v_true = task.true_value(ro.states)
        near = ro.to_limit < a.near
        at_limit = ro.truncated
        for kind in TARGETS:
            values, ret, iters = fit(task, kind, ro, a.gamma, a.lam, a.tol, a.max_iters)
            v_err, g_err = values - v_true, ret - v_true
            rows.append([
                task.name, kind,
                f"{v_true.mean().item():.2f}",
                f"{v_err.abs().mean().item():.4f}",
                f"{v_err[near].mean().item():+.4f}",
                f"{g_err[near].mean().item():+.4f}",
                f"{g_err[at_limit].mean().item():+.4f}",
                f"{iters}",
            ])
    print(format_table(
        ["task", "target", "mean V*", "MAE V", "V bias near", "target bias near", "target bias @timeout", "iters"],
        rows, left=2,
    ))
    print("MAE V: mean |V - V*| over every visited state; bias = mean signed error (V or lambda-return target "
          "minus V*) over the steps within the last 'near' steps before a time limit / at the timeout step.")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
