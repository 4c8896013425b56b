"""Time GAE implementations on the same rollout, after checking each against a float64 reference.

Implementations (all float32, rollout laid out ``[T, N]`` unless noted):

* ``ppo_bootstrap reference``: :func:`compute_gae_reference`, the plain per-step loop.
* ``ppo_bootstrap fast``: :func:`compute_gae`, what training uses.
* ``ppo_bootstrap fast+assemble``: the same plus :func:`assemble_next_values` (the scatter of
  ``V(s_final)`` into the shifted values), i.e. everything done after a rollout.
* ``rsl_rl-style loop``: a Python loop written here in the shape rsl_rl's storage uses (per step:
  pick next values, TD error with a not-done mask, advantage update with the same mask). Its
  convention folds the timeout bootstrap into the reward during the rollout and treats every
  end as done; we fold ``gamma * V(s_final)`` (outside the timed region, as rsl_rl does it per env
  step), which makes it compute exactly the quantity of the reference. This is the speed baseline.
* ``rsl-rl-lib PPO.compute_returns``: the installed library's method, run on a real
  ``RolloutStorage`` filled with the same folded data (advantage normalisation switched off so the
  raw advantages can be compared).
* ``torchrl vec_gae`` / ``torchrl gae``: TorchRL's ``vec_generalized_advantage_estimate`` and
  ``generalized_advantage_estimate`` with ``done = terminated | truncated``, ``terminated`` and
  ``next_state_value = next_values``: the same convention as ours, so they run on the full data.
  Timed in their native ``[N, T, 1]`` layout (the transposes are done outside the timed region).

Run: ``python benchmarks/gae.py`` (CPU) or ``python benchmarks/gae.py --device cuda``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from types import SimpleNamespace

import torch

from _common import (
    assemble_next_values,
    compute_gae,
    compute_gae_reference,
    format_table,
    machine_line,
    resolve_device,
)

from ppo_bootstrap import gae_triton  # noqa: E402  (after _common puts the repository on sys.path)

HBM_BYTES_PER_S = 4.3e12
# Minimum traffic of compute_gae per element: read rewards, values, next_values (3 x 4 B),
# terminated, truncated (2 x 1 B); write advantages, returns (2 x 4 B).
BYTES_PER_ELEMENT = 3 * 4 + 2 * 1 + 2 * 4


def make_rollout(T: int, N: int, gamma: float, seed: int, device: torch.device, p_term: float, p_trunc: float):
    """Random rewards/values with falls and timeouts at independent random steps (some both)."""
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(T, N, generator=g)
    values = torch.randn(T, N, generator=g)
    last_values = torch.randn(N, generator=g)
    terminated = torch.rand(T, N, generator=g) < p_term
    truncated = torch.rand(T, N, generator=g) < p_trunc
    steps, env_ids = torch.nonzero(terminated | truncated, as_tuple=True)
    final_values = torch.randn(steps.numel(), generator=g)
    d = SimpleNamespace(
        rewards=rewards, values=values, last_values=last_values, terminated=terminated,
        truncated=truncated, final_values=final_values, final_steps=steps, final_env_ids=env_ids,
    )
    for k, v in vars(d).items():
        setattr(d, k, v.to(device))
    d.next_values = assemble_next_values(d.values, d.last_values, d.final_values, d.final_steps, d.final_env_ids)
    d.dones = d.terminated | d.truncated
    # rsl_rl convention: timeout bootstrap folded into the reward during the rollout, every end is done.
    # Folding gamma * V(s_final) (not V(s_t)) makes it the exact target.
    timeout = d.truncated & ~d.terminated
    d.folded_rewards = d.rewards + gamma * torch.where(timeout, d.next_values, torch.zeros_like(d.next_values))
    return d


def rsl_rl_style_loop(rewards, values, last_values, dones, gamma, lam):
    """Backward loop over steps with not-done masks; rewards already carry the timeout bootstrap."""
    T = rewards.shape[0]
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(last_values)
    for t in range(T - 1, -1, -1):
        v_next = values[t + 1] if t + 1 < T else last_values
        alive = 1.0 - dones[t].float()
        td = rewards[t] + gamma * alive * v_next - values[t]
        running = td + gamma * lam * alive * running
        advantages[t] = running
    return advantages, advantages + values


def bench_interleaved(fns: dict[str, Callable[[], object]], device: torch.device, warmup: int, repeats: int):
    """Median ms per callable. Calls are interleaved round-robin so that load from other processes
    hits every implementation alike. On CUDA each call is bracketed by events and synchronized."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    for _ in range(repeats):
        for name, fn in fns.items():
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times[name].append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t0) * 1e3)
    return {name: statistics.median(ts) for name, ts in times.items()}


def build_impls(d, gamma: float, lam: float, device: torch.device) -> tuple[dict, dict]:
    """name -> (timed callable, callable returning (adv, ret) as [T, N]); and peer notes."""
    impls: dict[str, tuple[Callable, Callable]] = {}
    notes: dict[str, str] = {}
    args = (d.rewards, d.values, d.next_values, d.terminated, d.truncated, gamma, lam)

    def ref():
        return compute_gae_reference(*args)

    def fast():
        return compute_gae(*args)

    def fast_assemble():
        nv = assemble_next_values(d.values, d.last_values, d.final_values, d.final_steps, d.final_env_ids)
        return compute_gae(d.rewards, d.values, nv, d.terminated, d.truncated, gamma, lam)

    def rsl_style():
        return rsl_rl_style_loop(d.folded_rewards, d.values, d.last_values, d.dones, gamma, lam)

    impls["ppo_bootstrap reference"] = (ref, ref)
    impls["ppo_bootstrap fast"] = (fast, fast)
    impls["ppo_bootstrap fast+assemble"] = (fast_assemble, fast_assemble)
    impls["rsl_rl-style loop"] = (rsl_style, rsl_style)
    if device.type == "cuda" and gae_triton.available():
        def kernel_only():  # the fused kernel without compute_gae's argument checks and dispatch
            return gae_triton.compute_gae_triton(*args)

        impls["ppo_bootstrap kernel alone"] = (kernel_only, kernel_only)

    try:
        import importlib.metadata as md

        from rsl_rl.algorithms import PPO
        from rsl_rl.storage import RolloutStorage
        from tensordict import TensorDict

        T, N = d.rewards.shape
        obs = TensorDict({"policy": torch.zeros(N, 1, device=device)}, batch_size=[N], device=device)
        st = RolloutStorage("rl", N, T, obs, (1,), device=str(device))
        st.rewards.copy_(d.folded_rewards.unsqueeze(-1))
        st.values.copy_(d.values.unsqueeze(-1))
        st.dones.copy_(d.dones.unsqueeze(-1))
        last = d.last_values.unsqueeze(-1)

        class _Critic:  # the only critic calls compute_returns makes
            def get_hidden_state(self):
                return None

            def reset(self, dones=None, hidden_state=None):
                pass

            def __call__(self, _obs):
                return last

        owner = SimpleNamespace(
            storage=st, critic=_Critic(), gamma=gamma, lam=lam, normalize_advantage_per_mini_batch=True
        )

        def rsl_lib():
            PPO.compute_returns(owner, obs)

        def rsl_lib_out():
            rsl_lib()
            return st.advantages.squeeze(-1), st.returns.squeeze(-1)

        impls["rsl-rl-lib PPO.compute_returns"] = (rsl_lib, rsl_lib_out)
        notes["rsl-rl-lib"] = md.version("rsl-rl-lib")
    except ImportError as e:
        notes["rsl-rl-lib"] = f"not available ({e})"

    try:
        import importlib.metadata as md

        from torchrl.objectives.value.functional import (
            generalized_advantage_estimate,
            vec_generalized_advantage_estimate,
        )

        def native(x):  # [T, N] -> [N, T, 1]
            return x.transpose(0, 1).contiguous().unsqueeze(-1)

        tr = dict(
            state_value=native(d.values), next_state_value=native(d.next_values), reward=native(d.rewards),
            done=native(d.dones), terminated=native(d.terminated),
        )

        def back(out):
            return tuple(x.squeeze(-1).transpose(0, 1) for x in out)

        def trl_vec():
            return vec_generalized_advantage_estimate(gamma, lam, **tr)

        def trl_loop():
            return generalized_advantage_estimate(gamma, lam, **tr)

        impls["torchrl vec_gae"] = (trl_vec, lambda: back(trl_vec()))
        impls["torchrl gae"] = (trl_loop, lambda: back(trl_loop()))
        notes["torchrl"] = md.version("torchrl")
    except ImportError as e:
        notes["torchrl"] = f"not available ({e})"
    return impls, notes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=10, help="timed calls per implementation (median reported)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--sizes", default="24x4096,64x65536", help="comma-separated TxN")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lam", type=float, default=0.95)
    p.add_argument("--p-term", type=float, default=0.01, help="per-step fall probability")
    p.add_argument("--p-trunc", type=float, default=0.01, help="per-step timeout probability")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: on a small shared CPU, OpenMP barriers make 2+ threads noisy)")
    a = p.parse_args()
    device = resolve_device(a.device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in a.sizes.split(",")]

    print(machine_line(device))
    print(f"gamma={a.gamma} lam={a.lam} p_term={a.p_term} p_trunc={a.p_trunc} float32, "
          f"warmup={a.warmup} repeats={a.repeats}")
    rows, failed, notes = [], [], {}
    for T, N in sizes:
        d = make_rollout(T, N, a.gamma, a.seed, device, a.p_term, a.p_trunc)
        ref64 = compute_gae_reference(
            d.rewards.double(), d.values.double(), d.next_values.double(), d.terminated, d.truncated, a.gamma, a.lam
        )
        scale = max(1.0, ref64[0].abs().max().item(), ref64[1].abs().max().item())
        tol = 1e-5 * scale * T ** 0.5
        impls, notes = build_impls(d, a.gamma, a.lam, device)
        errs = {}
        for name, (_, produce) in impls.items():  # correctness first; a mismatching one is not timed
            adv, ret = produce()
            errs[name] = max((adv.double() - ref64[0]).abs().max().item(), (ret.double() - ref64[1]).abs().max().item())
            if errs[name] > tol:
                failed.append(f"{T}x{N} {name}: max abs err {errs[name]:.3e} > tol {tol:.1e}")
            del adv, ret
        timed = {name: fn for name, (fn, _) in impls.items() if errs[name] <= tol}
        medians = bench_interleaved(timed, device, a.warmup, a.repeats)
        base = medians.get("rsl_rl-style loop", float("nan"))
        for name, err in errs.items():
            ms, ok = medians.get(name, float("nan")), err <= tol
            rows.append([f"{T}x{N}", name, f"{ms:.3f}", f"{base / ms:.2f}x", f"{err:.2e}", "yes" if ok else "NO"])
        if device.type == "cuda":
            floor_ms = T * N * BYTES_PER_ELEMENT / HBM_BYTES_PER_S * 1e3
            rows.append([f"{T}x{N}", f"floor ({BYTES_PER_ELEMENT} B/elem @ 4.3 TB/s)", f"{floor_ms:.3f}",
                         f"{base / floor_ms:.2f}x", "-", "-"])
        del d, ref64, impls
    print(format_table(["size TxN", "impl", "median ms", "vs rsl_rl-style", "max abs err", "== ref"], rows, left=2))
    print("peers: " + ", ".join(f"{k} {v}" for k, v in notes.items()))
    print("max abs err: over advantages and returns vs compute_gae_reference in float64 on the same data "
          "(falls, timeouts and both).")
    print("rsl_rl rows get the timeout bootstrap folded into the reward with V(s_final), outside the timed "
          "region; torchrl rows are timed in their native [N, T, 1] layout.")
    if failed:
        print("MISMATCH (not timed):\n  " + "\n  ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
