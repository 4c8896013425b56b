"""Learner time per PPO iteration (value targets + update) on one synthetic G1-sized rollout.

Both learners get the same data and the same settings, and each iteration times exactly what its
library runs between the end of a rollout and the start of the next one:

* ``ppo_bootstrap``: ``PPO.compute_returns`` (last-value critic pass, ``V(s_final)`` critic pass over
  the rows that ended, GAE, global advantage normalisation) and ``PPO.update`` followed by the
  observation-normalizer update (the ``Runner`` does that right after ``update``).
* ``rsl-rl-lib``: ``PPO.compute_returns`` (last-value critic pass, GAE loop, global advantage
  normalisation; run under ``torch.inference_mode`` as ``OnPolicyRunner`` does) and ``PPO.update``
  (which ends with its own normalizer update). Built directly from its public classes, without its
  runner or an env: two ``rsl_rl.models.MLPModel`` (actor with a ``GaussianDistribution``, critic with
  one output), ``rsl_rl.storage.RolloutStorage("rl", ...)`` and ``rsl_rl.algorithms.PPO``.

Sizes: G1 29-DoF velocity tracking. Policy observation 96 = 3 base angular velocity + 3 projected
gravity + 3 velocity command + 29 joint positions + 29 joint velocities + 29 last actions. Critic
observation 121 = the 96 + 3 base linear velocity + 2 foot contacts + 20 privileged terms (friction,
added mass, push forces, ...). 29 actions. Actor and critic MLPs 512-256-128 ELU, observation
normalisation on, Gaussian policy with a learned state-independent std (init 1).

Hyper-parameters (both): 5 epochs x 4 mini-batches, clip 0.2, clipped value loss, value loss coef
1, entropy coef 0.008, Adam lr 1e-3 with the adaptive KL schedule (desired KL 0.01),
max_grad_norm 1, gamma 0.99, lambda 0.95, advantages normalised over the whole rollout.

The rollout: random observations (N(0, 1)); actions, action mean/std, log-probs and values from the
initial ppo_bootstrap policy (its weights are copied into the rsl_rl models, so both start from the
same network); rewards ~ N(0, 1); falls at ``--p-term`` and timeouts at ``--p-trunc`` of env steps
(some both). ppo_bootstrap gets the true final observations of the rows that ended (random, as the
env would report them); rsl_rl gets its own convention, ``gamma * V(s_t)`` folded into the reward on
a timeout and ``dones = terminated | truncated``. Both storages are refilled from the same tensors
before every iteration, outside the timed region.

Timing: warmup iterations, then the median of ``--repeats`` iterations per learner, interleaved
(one iteration of each in turn). On CUDA each phase is bracketed by ``torch.cuda.Event``s.

Run: ``python benchmarks/learner.py`` (CPU) or ``python benchmarks/learner.py --device cuda`` (``--tf32``:
TensorFloat-32 matmuls for both, as Isaac Lab's train scripts set them; ``--bf16-update``: one more
row, ppo_bootstrap with its update's hidden layers in bfloat16, ``PPOConfig.bf16_update``).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import torch
from torch import nn

from _common import add_rollout_args, format_table, machine_line, resolve_rollout_args

from ppo_bootstrap import PPO, ActorCritic, PolicyConfig, PPOConfig, RolloutStorage, StepResult  # noqa: E402
from ppo_bootstrap.storage import Transition  # noqa: E402

POLICY_DIM = 3 + 3 + 3 + 29 + 29 + 29  # 96
CRITIC_DIM = POLICY_DIM + 3 + 2 + 20  # 121
NUM_ACTIONS = 29
HIDDEN = (512, 256, 128)

HYPER = dict(
    num_learning_epochs=5,
    num_mini_batches=4,
    clip_param=0.2,
    gamma=0.99,
    lam=0.95,
    value_loss_coef=1.0,
    entropy_coef=0.008,
    learning_rate=1e-3,
    max_grad_norm=1.0,
    use_clipped_value_loss=True,
    schedule="adaptive",
    desired_kl=0.01,
)


def make_policy(device: torch.device) -> ActorCritic:
    cfg = PolicyConfig(actor_hidden=HIDDEN, critic_hidden=HIDDEN, activation="elu", init_noise_std=1.0,
                       obs_normalization=True)
    return ActorCritic(POLICY_DIM, CRITIC_DIM, NUM_ACTIONS, cfg).to(device)


@torch.no_grad()
def make_rollout(T: int, N: int, seed: int, device: torch.device, policy: ActorCritic,
                 p_term: float, p_trunc: float, gamma: float) -> SimpleNamespace:
    """One synthetic rollout ``[T, N]``; behaviour outputs from ``policy`` (its initial weights)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the policy's action samples

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)

    pol = randn(T + 1, N, POLICY_DIM)  # index T: the observation after the last step
    crit = torch.cat([pol, randn(T + 1, N, CRITIC_DIM - POLICY_DIM)], dim=-1)
    terminated = (torch.rand(T, N, generator=g) < p_term).to(device)
    truncated = (torch.rand(T, N, generator=g) < p_trunc).to(device)
    rewards = randn(T, N)
    actions = torch.empty(T, N, NUM_ACTIONS, device=device)
    mean, std = torch.empty_like(actions), torch.empty_like(actions)
    log_probs, values = torch.empty(T, N, device=device), torch.empty(T, N, device=device)
    for t in range(T):  # per step, as a rollout would produce them
        dist, _ = policy.act(pol[t], None)
        actions[t] = dist.sample()
        mean[t], std[t] = dist.mean, dist.stddev
        log_probs[t] = dist.log_prob(actions[t]).sum(-1)
        values[t] = policy.value(crit[t], None)[0]
    final_ids, final_obs = [], []
    for t in range(T):
        ids = torch.nonzero(terminated[t] | truncated[t]).flatten()
        k = ids.numel()
        fp = randn(k, POLICY_DIM)
        final_ids.append(ids)
        final_obs.append({"policy": fp, "critic": torch.cat([fp, randn(k, CRITIC_DIM - POLICY_DIM)], dim=-1)})
    # rsl_rl's convention: on a timeout add gamma * V(s_t) to the reward; every end is done.
    folded = rewards + gamma * values * truncated.float()
    return SimpleNamespace(
        T=T, N=N, pol=pol, crit=crit, terminated=terminated, truncated=truncated, rewards=rewards,
        actions=actions, mean=mean, std=std, log_probs=log_probs, values=values, final_ids=final_ids,
        final_obs=final_obs, folded=folded, dones=terminated | truncated,
    )


@dataclass
class Learner:
    """``fill`` (untimed), then ``returns`` and ``update`` (timed); ``stats`` after the last update."""

    name: str
    fill: Callable[[], None]
    returns: Callable[[], None]
    update: Callable[[], None]
    stats: Callable[[], str]


def build_ppo_bootstrap(d: SimpleNamespace, policy: ActorCritic, device: torch.device, seed: int,
                        bf16_update: bool = False) -> Learner:
    cfg = PPOConfig(**HYPER, normalize_advantage=True, timeout_bootstrap="exact", bf16_update=bf16_update)
    alg = PPO(policy, cfg, device)
    storage = alg.storage = RolloutStorage(d.T, d.N, {"policy": (POLICY_DIM,), "critic": (CRITIC_DIM,)}, NUM_ACTIONS, device)
    generator = torch.Generator().manual_seed(seed)
    last_obs = {"policy": d.pol[d.T], "critic": d.crit[d.T]}
    out = {}

    def fill():
        storage.start((None, None))
        for t in range(d.T):
            obs = {"policy": d.pol[t], "critic": d.crit[t]}
            storage.add(
                Transition(obs, d.actions[t], d.mean[t], d.std[t], d.log_probs[t], d.values[t]),
                StepResult(obs, d.rewards[t], d.terminated[t], d.truncated[t], d.final_obs[t], d.final_ids[t]),
            )

    def returns():
        alg.compute_returns(last_obs)

    def update():
        out.update(alg.update(generator))
        alg.update_normalizers()  # what Runner.learn does right after update()

    def stats():
        return (f"value loss {out['loss/value']:.4f}, surrogate {out['loss/surrogate']:.4f}, "
                f"entropy {out['loss/entropy']:.3f}, lr {out['policy/learning_rate']:.2e}")

    return Learner("ppo_bootstrap" + (" bf16" if bf16_update else ""), fill, returns, update, stats)


def _copy_weights(policy: ActorCritic, actor: nn.Module, critic: nn.Module) -> bool:
    """Copy the initial ppo_bootstrap weights into the rsl_rl models (Linear layers in order, std)."""
    try:
        with torch.no_grad():
            for ours, theirs in ((policy.actor, actor.mlp), (policy.critic, critic.mlp)):
                a = [m for m in ours.modules() if isinstance(m, nn.Linear)]
                b = [m for m in theirs.modules() if isinstance(m, nn.Linear)]
                if [m.weight.shape for m in a] != [m.weight.shape for m in b]:
                    return False
                for x, y in zip(a, b):
                    y.weight.copy_(x.weight)
                    y.bias.copy_(x.bias)
            actor.distribution.std_param.copy_(policy.std_param)
        return True
    except (AttributeError, RuntimeError):
        return False


def build_rsl_rl(d: SimpleNamespace, policy: ActorCritic, device: torch.device) -> tuple[Learner, str]:
    from rsl_rl.algorithms import PPO as RslPPO
    from rsl_rl.models import MLPModel
    from rsl_rl.modules.distribution import GaussianDistribution
    from rsl_rl.storage import RolloutStorage as RslStorage
    from tensordict import TensorDict

    def td(t: int) -> TensorDict:
        return TensorDict({"policy": d.pol[t], "critic": d.crit[t]}, batch_size=[d.N], device=device)

    obs0 = td(0)
    groups = {"actor": ["policy"], "critic": ["critic"]}
    actor = MLPModel(obs0, groups, "actor", NUM_ACTIONS, hidden_dims=list(HIDDEN), activation="elu",
                     obs_normalization=True,
                     distribution_cfg={"class_name": GaussianDistribution, "init_std": 1.0, "std_type": "scalar"})
    critic = MLPModel(obs0, groups, "critic", 1, hidden_dims=list(HIDDEN), activation="elu", obs_normalization=True)
    shared = _copy_weights(policy, actor, critic)
    storage = RslStorage("rl", d.N, d.T, obs0, [NUM_ACTIONS], device=str(device))
    alg = RslPPO(actor, critic, storage, **HYPER, optimizer="adam", normalize_advantage_per_mini_batch=False,
                 device=str(device))
    alg.train_mode()
    obs_t = [td(t) for t in range(d.T + 1)]
    out = {}

    def fill():
        storage.clear()
        for t in range(d.T):
            tr = RslStorage.Transition()
            tr.observations = obs_t[t]
            tr.actions = d.actions[t]
            tr.rewards = d.folded[t]
            tr.dones = d.dones[t]
            tr.values = d.values[t].unsqueeze(-1)
            tr.actions_log_prob = d.log_probs[t]
            tr.distribution_params = (d.mean[t], d.std[t])
            storage.add_transition(tr)

    def returns():
        with torch.inference_mode():  # as OnPolicyRunner.learn calls it
            alg.compute_returns(obs_t[d.T])

    def update():
        out.update(alg.update())

    def stats():
        return (f"value loss {out['value']:.4f}, surrogate {out['surrogate']:.4f}, "
                f"entropy {out['entropy']:.3f}, lr {alg.learning_rate:.2e}")

    how = "same initial weights" if shared else "initial weights NOT shared (layouts differ)"
    return Learner("rsl-rl-lib", fill, returns, update, stats), how


def time_interleaved(learners: list[Learner], device: torch.device, warmup: int, repeats: int):
    """Per learner: lists of (returns ms, update ms), one entry per timed iteration."""
    cuda = device.type == "cuda"
    times = {ln.name: [] for ln in learners}
    for it in range(warmup + repeats):
        for ln in learners:
            ln.fill()
            if cuda:
                torch.cuda.synchronize(device)
                e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
                e0.record()
                ln.returns()
                e1.record()
                ln.update()
                e2.record()
                e2.synchronize()
                ms = (e0.elapsed_time(e1), e1.elapsed_time(e2))
            else:
                t0 = time.perf_counter()
                ln.returns()
                t1 = time.perf_counter()
                ln.update()
                t2 = time.perf_counter()
                ms = ((t1 - t0) * 1e3, (t2 - t1) * 1e3)
            if it >= warmup:
                times[ln.name].append(ms)
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rollout_args(p, per="learner")
    p.add_argument("--p-term", type=float, default=0.002, help="fraction of env steps that end in a fall")
    p.add_argument("--tf32", action="store_true", help="TensorFloat-32 matmuls for both learners (GPU)")
    p.add_argument("--p-trunc", type=float, default=0.001, help="fraction of env steps that end in a timeout")
    p.add_argument("--bf16-update", action="store_true",
                   help="one more row: ppo_bootstrap with PPOConfig.bf16_update (hidden layers in bfloat16)")
    a = p.parse_args()
    device, repeats, warmup = resolve_rollout_args(a)
    if a.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    T, N = a.steps, a.num_envs
    if (T * N) % HYPER["num_mini_batches"]:
        raise SystemExit(f"{T} x {N} samples do not split into {HYPER['num_mini_batches']} mini-batches")

    print(machine_line(device))
    print(f"rollout {T} steps x {N} envs = {T * N} samples; obs policy {POLICY_DIM}, critic {CRITIC_DIM}, "
          f"actions {NUM_ACTIONS}; MLP {'-'.join(map(str, HIDDEN))} ELU; "
          f"{HYPER['num_learning_epochs']} epochs x {HYPER['num_mini_batches']} mini-batches; "
          f"p_term={a.p_term} p_trunc={a.p_trunc}; warmup={warmup} repeats={repeats}; tf32 {'on' if a.tf32 else 'off'}")

    torch.manual_seed(a.seed)
    policy = make_policy(device)
    d = make_rollout(T, N, a.seed, device, policy, a.p_term, a.p_trunc, HYPER["gamma"])
    ended = sum(int(i.numel()) for i in d.final_ids)
    print(f"ends in the rollout: {int(d.terminated.sum())} falls, {int(d.truncated.sum())} timeouts, "
          f"{ended} rows with a final observation")

    notes: dict[str, str] = {}
    learners = []
    try:
        import importlib.metadata as md

        rsl, how = build_rsl_rl(d, policy, device)
        learners.append(rsl)
        try:
            version = md.version("rsl-rl-lib")
        except md.PackageNotFoundError:
            version = "(version unknown)"
        notes["rsl-rl-lib"] = f"{version} ({how})"
    except ImportError as e:
        notes["rsl-rl-lib"] = f"not available ({e})"
    if a.bf16_update:  # the same start, its own copy of the policy
        learners.insert(0, build_ppo_bootstrap(d, copy.deepcopy(policy), device, a.seed, bf16_update=True))
    learners.insert(0, build_ppo_bootstrap(d, policy, device, a.seed))  # after the weight copy

    times = time_interleaved(learners, device, warmup, repeats)
    med = {}
    for name, ts in times.items():
        med[name] = (statistics.median(r + u for r, u in ts), statistics.median(r for r, _ in ts),
                     statistics.median(u for _, u in ts))
    base = med.get("rsl-rl-lib")
    rows = []
    for name, (total, ret, upd) in med.items():
        ratio = f"{total / base[0]:.2f}x" if base else "-"
        ratio_u = f"{upd / base[2]:.2f}x" if base else "-"
        rows.append([name, str(device), f"{total:.1f}", f"{ret:.1f}", f"{upd:.1f}", ratio, ratio_u])
    if base is None:
        rows.append(["rsl-rl-lib", str(device), "not available", "-", "-", "-", "-"])
    print(format_table(["impl", "device", "ms/iter (returns+update)", "ms returns", "ms update", "x rsl_rl (iter)",
                        "x rsl_rl (update)"], rows, left=2))
    print("x rsl_rl: time divided by rsl-rl-lib's time (lower is faster; the goal is <= 0.67x per iteration).")
    print("peers: " + ", ".join(f"{k} {v}" for k, v in notes.items()))
    for ln in learners:
        print(f"last iteration, {ln.name}: {ln.stats()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
