"""Cost of the exact terminal-observation bootstrap, in full training iterations.

Two ``Runner``s train on the same ``TimeLimitEnv`` (same seed, so the same envs end at the same
steps at first) and differ only in ``PPOConfig.timeout_bootstrap``:

* ``exact`` (the library's default): ``compute_returns`` runs one batched critic pass over the ``K``
  terminal rows of the rollout to get ``V(s_final)``.
* ``state_value`` ("off"): ``V(s_t)`` stands in for ``V(s_final)`` (rsl_rl's approximation), so that
  critic pass is skipped. The terminal rows are still stored, so this pair isolates the critic pass.

The env is sized like the G1 29-DoF velocity task: policy observation 96, critic observation 121
(``obs_dim=96``, ``privileged_dim=25``), 29 actions; the default policy (actor and critic MLPs
512-256-128 ELU, observation normalisation) and PPO settings (5 epochs x 4 mini-batches). Episodes
are cut at ``--episode-length`` steps with staggered clocks and end in a fall with probability
``--fall-probability`` per step, so a 24-step rollout of 4096 envs has a few hundred ends.
``RunnerConfig.validate_env_output=False`` (no per-step host sync for the contract check).

Each timed iteration is one ``Runner.learn(1)``; ``Runner._collect``, ``PPO.compute_returns`` and
``PPO.update`` are wrapped with timers for the breakdown (``other`` is the rest of ``learn``:
mostly the observation-normalizer update). Iterations of the two runners are interleaved; the
overhead is the median over repeats of the paired difference ``exact - off``, as a percentage of the
median ``off`` iteration.

The storage side (which ``off`` pays too, and the critic pass does not include) is measured apart:
filling a ``RolloutStorage`` for ``T`` steps and ``finish()`` with the rollout's real per-step
number of ends and final observations, against the same fill with no final observations.

Run: ``python benchmarks/bootstrap_cost.py`` (CPU) or ``python benchmarks/bootstrap_cost.py --device cuda``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from _common import add_rollout_args, format_table, machine_line, resolve_rollout_args

from ppo_bootstrap import PolicyConfig, PPOConfig, RolloutStorage, Runner, RunnerConfig, StepResult  # noqa: E402
from ppo_bootstrap.storage import Transition  # noqa: E402
from ppo_bootstrap.envs import TimeLimitEnv  # noqa: E402

POLICY_DIM = 96  # 3 ang vel + 3 gravity + 3 command + 29 joint pos + 29 joint vel + 29 last action
PRIVILEGED_DIM = 25  # 3 lin vel + 2 foot contacts + 20 privileged terms -> critic obs 121
NUM_ACTIONS = 29
MODES = ("exact", "state_value")


class Timers:
    """Wraps bound methods with host timers; on CUDA each wrapped call is synchronized on both sides."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.last: dict[str, float] = {}

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def wrap(self, obj: object, attr: str, key: str) -> None:
        fn = getattr(obj, attr)

        def timed(*args, **kwargs):
            self.sync()
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            self.sync()
            self.last[key] = self.last.get(key, 0.0) + (time.perf_counter() - t0) * 1e3
            return out

        setattr(obj, attr, timed)


def make_runner(mode: str, a: argparse.Namespace, device: torch.device) -> tuple[Runner, Timers]:
    env = TimeLimitEnv(
        num_envs=a.num_envs, episode_length=a.episode_length, obs_dim=POLICY_DIM, privileged_dim=PRIVILEGED_DIM,
        num_actions=NUM_ACTIONS, fall_probability=a.fall_probability, seed=a.seed, device=device,
    )
    cfg = RunnerConfig(
        num_steps_per_env=a.steps, save_interval=0, log_dir=None, seed=a.seed, validate_env_output=False,
        console=False, ppo=PPOConfig(timeout_bootstrap=mode), policy=PolicyConfig(),
    )
    runner = Runner(env, cfg, device)
    timers = Timers(device)
    timers.wrap(runner, "_collect", "collect")
    timers.wrap(runner.alg, "compute_returns", "returns")
    timers.wrap(runner.alg, "update", "update")
    if hasattr(runner.alg, "final_values"):  # V(s_final) (exact) or the V(s_t) gather (state_value)
        timers.wrap(runner.alg, "final_values", "final_values")
    return runner, timers


def run_iteration(runner: Runner, timers: Timers) -> dict[str, float]:
    timers.last = {}
    timers.sync()
    t0 = time.perf_counter()
    runner.learn(1)
    timers.sync()
    out = dict(timers.last)
    if hasattr(runner.alg, "final_values"):
        out.setdefault("final_values", 0.0)  # wrapped but not called this iteration
    out["iteration"] = (time.perf_counter() - t0) * 1e3
    out["other"] = out["iteration"] - out["collect"] - out["returns"] - out["update"]
    out["ends"] = float(runner.alg.storage.data["terminated"].logical_or(runner.alg.storage.data["truncated"]).sum())
    return out


def storage_side_cost(runner: Runner, device: torch.device, repeats: int, warmup: int) -> tuple[float, float, int]:
    """ms to fill + finish a RolloutStorage with the rollout's real per-step ends, and with none."""
    data = runner.alg.storage.data
    T, N = data.batch_size
    ends_per_step = data["terminated"].logical_or(data["truncated"]).sum(1).tolist()
    obs_shapes = {g: tuple(v.shape[2:]) for g, v in data["obs"].items()}
    num_actions = data["actions"].shape[-1]
    st = RolloutStorage(T, N, obs_shapes, num_actions, device)
    g = torch.Generator(device=device).manual_seed(0)
    step = {k: data[k][0].clone() for k in ("actions", "action_mean", "action_std", "log_probs", "values",
                                             "rewards", "terminated", "truncated")}
    obs = {grp: data["obs", grp][0].clone() for grp in obs_shapes}
    finals = []
    for k in ends_per_step:
        ids = torch.randperm(N, generator=g, device=device)[: int(k)].sort().values
        rows = {grp: torch.randn(int(k), *s, generator=g, device=device) for grp, s in obs_shapes.items()}
        finals.append((ids, rows))
    none_ids = torch.zeros(0, dtype=torch.long, device=device)
    none_obs = {grp: torch.zeros(0, *s, device=device) for grp, s in obs_shapes.items()}

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def fill(with_ends: bool) -> float:
        sync()
        t0 = time.perf_counter()
        st.start((None, None))
        for t in range(T):
            ids, fobs = finals[t] if with_ends else (none_ids, none_obs)
            st.add(
                Transition(obs, step["actions"], step["action_mean"], step["action_std"], step["log_probs"], step["values"]),
                StepResult(obs, step["rewards"], step["terminated"], step["truncated"], fobs, ids),
            )
        st.finish()
        sync()
        return (time.perf_counter() - t0) * 1e3

    with_t, without_t = [], []
    for i in range(warmup + repeats):
        a, b = fill(True), fill(False)
        if i >= warmup:
            with_t.append(a)
            without_t.append(b)
    return statistics.median(with_t), statistics.median(without_t), int(sum(ends_per_step))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rollout_args(p, per="mode")
    p.add_argument("--episode-length", type=int, default=1000, help="time limit in steps (staggered starts)")
    p.add_argument("--fall-probability", type=float, default=0.002, help="per-step probability of a fall")
    a = p.parse_args()
    device, repeats, warmup = resolve_rollout_args(a)

    print(machine_line(device))
    print(f"TimeLimitEnv {a.num_envs} envs x {a.steps} steps, obs policy {POLICY_DIM} / critic "
          f"{POLICY_DIM + PRIVILEGED_DIM}, {NUM_ACTIONS} actions, episode length {a.episode_length} (staggered), "
          f"fall probability {a.fall_probability}; default PolicyConfig / PPOConfig; validate_env_output=False; "
          f"warmup={warmup} repeats={repeats}")

    runners = {mode: make_runner(mode, a, device) for mode in MODES}
    times: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for i in range(warmup + repeats):
        for mode, (runner, timers) in runners.items():
            out = run_iteration(runner, timers)
            if i >= warmup:
                times[mode].append(out)

    def med(mode: str, key: str) -> float:
        return statistics.median(t.get(key, float("nan")) for t in times[mode])

    off = "state_value"
    base = med(off, "iteration")
    rows = []
    for mode in MODES:
        paired = statistics.median(e["iteration"] - o["iteration"] for e, o in zip(times[mode], times[off]))
        rows.append([
            mode if mode == "exact" else f"{mode} (off)", f"{med(mode, 'iteration'):.1f}",
            f"{med(mode, 'collect'):.1f}",
            f"{med(mode, 'returns'):.2f}", f"{med(mode, 'final_values'):.3f}", f"{med(mode, 'update'):.1f}",
            f"{med(mode, 'other'):.1f}", f"{100.0 * paired / base:+.2f}" if mode != off else "-",
        ])
    print(format_table(["mode", "iter ms", "collect ms", "returns ms", "final_values ms", "update ms", "other ms",
                        "overhead % vs off"], rows))

    exact_runner = runners["exact"][0]
    with_ends, no_ends, k = storage_side_cost(exact_runner, device, repeats=max(repeats, 5), warmup=max(warmup, 2))
    ends = statistics.median(t["ends"] for t in times["exact"])
    returns_diff = statistics.median(e["returns"] - o["returns"] for e, o in zip(times["exact"], times[off]))
    if hasattr(exact_runner.alg, "final_values"):
        critic = med("exact", "final_values") - med(off, "final_values")
    else:  # no separate method to time: fall back on the compute_returns difference
        critic = returns_diff
    storage = with_ends - no_ends
    comp = [
        ["V(s_final) critic pass: final_values() exact - off", f"{critic:.3f}", f"{100.0 * critic / base:.3f}"],
        ["  cross-check: compute_returns exact - off (paired median)", f"{returns_diff:.3f}",
         f"{100.0 * returns_diff / base:.3f}"],
        [f"storage: fill+finish with {k} terminal rows - with none", f"{storage:.3f}", f"{100.0 * storage / base:.3f}"],
        ["total: critic pass + storage", f"{critic + storage:.3f}", f"{100.0 * (critic + storage) / base:.3f}"],
    ]
    print()
    print(format_table(["component of the exact bootstrap", "ms/iter", "% of off iter"], comp))
    print(f"ends per rollout (median over timed iterations): {ends:.0f} of {a.num_envs * a.steps} env steps; "
          f"storage fill+finish {with_ends:.2f} ms with them, {no_ends:.2f} ms without.")
    print("overhead % vs off: median over repeats of the paired difference of whole iterations (exact - off), "
          "divided by the median off iteration; goal <= 2 %.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
