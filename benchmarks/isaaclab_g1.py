"""The G1 on Isaac Lab 3 (kit-less, Newton / MuJoCo-Warp) trained through ppo_bootstrap, and beside rsl-rl-lib.

    python benchmarks/isaaclab_g1.py direct --num-envs 4096 --deadline-s 540 --out runs/isaac
    python benchmarks/isaaclab_g1.py flat --num-envs 4096 --iterations 1000 --deadline-s 560 --seed 0 --out runs/flat_s0   # again to go on
    python benchmarks/isaaclab_g1.py table runs/isaac                     # the tables of BENCHMARKS.md
    python benchmarks/isaaclab_g1.py table runs/flat_s0 runs/flat_s1      # and the goal's verdict over the seeds
    python benchmarks/isaaclab_g1.py table runs/flat_s0 runs/flat_s0_played   # its final policies judged apart, as played

Needs Isaac Lab 3.0 (Python 3.12) and ``ISAACSIM_ASSET_ROOT`` pointing at the asset root that
``python -m isaac_adapter.isaaclab.assets`` builds. One process builds one Isaac Lab env (Isaac Lab
allows one simulation per process), so each phase trains and judges on the env it built.

``direct``: the project's G1 task (gait-clock variant) as ``G1WalkDirectEnv`` through
``IsaacLabVecEnv`` + ``Runner``. First the checkpoints named by ``--judge`` are evaluated on it (the
MuJoCo-trained policy, judged on Isaac Lab); then it trains until ``--iterations`` or
``--deadline-s`` (seconds since launch, compile included), with a checkpoint every
``--save-interval``; then the project's evaluator judges every ``--every``-th checkpoint with the
forward command and the last one also with the task's mixed commands (15 s, falls at 0.60 m, gait
acceptance); last, the root pose and joints of 4 envs walking at 0.5 m/s for 6 s are saved
(``clip.pt``) so that a MuJoCo renderer can replay the Isaac Lab rollout.

``flat``: Isaac Lab's own ``Isaac-Velocity-Flat-G1`` with its five overrides for the local G1. The
same env, GPU and seed train twice, with the task's registered rsl_rl recipe
(``G1FlatPPORunnerCfg``): through ``Runner`` (``RunnerConfig.from_rsl_rl``), then through
rsl-rl-lib's ``OnPolicyRunner`` (``--rsl-iterations``). Before each, every env's episode clock is set
to the same random value (rsl_rl's ``init_at_random_ep_len``). Per iteration both log the same
quantities, measured the same way: wall, collection and update seconds, the mean return and length
of the episodes that ended in it, how many ended, of them by the time limit, the learning rate its
update left and the mean action noise std, the GPU model it ran on, and (every 10th) the env's
per-term episode logs (``Episode_Reward/<term>``, ...). Each trainer
continues from the newest checkpoint in its folder of ``--out`` (``flat_ppo_bootstrap``,
``flat_rsl_rl``), so a run longer than one call (``--deadline-s``) goes on in the next with the same
command, its rows kept; a trainer given 0 iterations, or left no time by the deadline, does not run
in that call, and what an earlier call wrote of it in ``<out>/flat.json`` is kept (``--iterations 0
--rsl-iterations 1000``: rsl-rl-lib alone). A trainer whose checkpoint is already at its iterations
is only judged (on the CPU too: ``--device cpu --num-envs 64``, a GPU run's checkpoints in a folder
of their own), its rows taken from ``flat.json`` where the folder has one.
Each final policy (rsl-rl-lib's converted by ``Runner.load``) is judged by the project's evaluator on
this env
(:class:`~isaac_adapter.evaluation.velocity_probe.IsaacVelocityProbe`): forward 0.5 m/s, then the
task's own commands (the gait verdict of each), then the project's walking gate on the first of the
env's envs (its command battery and smoothness command, 4 starts each, ``--gate-horizon-s``). It
judges as Isaac Lab's play scripts run the task (``--judge-world play``: without the training
world's pushes every 10-15 s and its observation noise), or in the world the policy trained in
(``--judge-world training``, as records judged before the choice were);
``--no-judge`` leaves them unjudged, for runs that look at the start of the curve only, and
``--judge-last`` judges each trainer's newest checkpoint where the deadline stopped it short, or left
it no time to run, a probe's verdict in one call (the goal's lines leave out a seed where both
trainers ran fewer iterations than the goal asks).
``--env-overrides env.rewards.feet_air_time.weight=1.5 ...`` changes the task's env cfg for both
trainers (Isaac Lab's names, as its ``train.py`` takes them); a run folder goes on only with the
overrides it started with. ``Runner`` trains with what ``RunnerConfig.from_rsl_rl`` gives, which
keeps rsl-rl-lib's one order of the samples for all epochs of an update; ``--timeout-bootstrap
state_value`` trains it with rsl_rl's time-out value and ``--shuffle every_epoch`` with a new order
each epoch: probes of what each setting does, shown beside the seeds, with their goal lines after
the goal's; a folder goes on only with the settings its ``Runner`` started with.

Every phase writes ``<out>/<phase>.json``; ``table`` prints the tables from them. Over several
folders it adds the seeds' table and the goal's lines, with Runner's return less rsl-rl-lib's seed by
seed and its paired t; a folder whose record only judged a final checkpoint (the CPU judge above)
gives that seed's trainer its verdicts where it judged as played.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (puts the repository root on sys.path)
import torch
from ppo_bootstrap.episode import TIMEOUT_BOOTSTRAP_MODES
from ppo_bootstrap.ppo import SHUFFLES

from isaac_adapter.app.bench.common import EpisodeMeter
from isaac_adapter.app.bench.isaaclab_flat import (FALL_BIN_S, FORWARD_COMMAND, JUDGE_WORLDS, PLAY_WORLD, RSL_RL,
                                                  RUNNER, RUNNER_SETTINGS, SETTLED_NOTE, block_learner_cells,
                                                  falls_per_bin, format_seeds, judged_rows, judged_world, last_mean,
                                                  learner_state, median_after_first, row_terms, rows_with_devices,
                                                  settled_rows, term_lines, trained_setting)
from isaac_adapter.evaluation.sweep import number_cell

T0 = time.perf_counter()


def elapsed() -> float:
    return time.perf_counter() - T0


def training_time_left(args: argparse.Namespace) -> float:
    """Seconds of training left to this call: ``--deadline-s`` less the judging's ``--eval-reserve-s``."""
    return args.deadline_s - args.eval_reserve_s - elapsed()


def log(msg: str) -> None:
    print(f"[{elapsed():7.1f} s] {msg}", flush=True)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def device_name(device: str) -> str:
    """The GPU model of ``device`` (``--device``), or "cpu"."""
    return torch.cuda.get_device_name(torch.device(device)) if torch.device(device).type == "cuda" else "cpu"


# -- direct --------------------------------------------------------------------------------------


def run_direct(args: argparse.Namespace) -> dict[str, Any]:
    from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig

    from isaac_adapter.evaluation import ActorCriticPolicy, EvalConfig, Evaluator
    from isaac_adapter.evaluation.g1_probe import G1WalkProbe
    from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env
    from isaac_adapter.tasks.g1_walk.config import LEGACY_COMMANDS, walk_config
    from isaac_adapter.tasks.registry import checkpoint_walk_config, env_params

    from g1_acceptance import acceptance_row, print_header, print_row

    out = Path(args.out)
    run_dir = out / "direct_run"
    # the judged policies' input: as many observation frames as they recorded (one env for all of them)
    frames = {checkpoint_walk_config(path).policy_obs_frames for path in args.judge} or {1}
    if len(frames) > 1 or (not args.judge_only and frames != {1}):
        raise SystemExit(f"error: --judge checkpoints see {sorted(frames)} observation frames: judge those of one "
                         "count per call, with --judge-only unless they see one frame (the trained task's)")
    task = walk_config(True, num_envs=args.num_envs, seed=args.seed, device=args.device, policy_obs_frames=frames.pop())
    t = elapsed()
    env = make_g1_direct_env(task)
    obs = env.reset()
    sync()
    result: dict[str, Any] = {"num_envs": args.num_envs, "device": device_name(args.device),
                              "build_s": round(elapsed() - t, 1), "judged": [], "rows": []}
    log(f"G1WalkDirectEnv built: {args.num_envs} envs in {result['build_s']} s; obs {({k: tuple(v.shape) for k, v in obs.items()})}")

    probe = G1WalkProbe(env, env.unwrapped)

    def judge(path: Path, iteration: int, steps: int, train_s: float, command: Any) -> dict:
        evaluator = Evaluator(probe, EvalConfig(horizon_s=args.horizon_s, seed=args.seed, commands=command))
        base = env.unwrapped
        trained = base.task_cfg
        # mixed commands as the checkpoint was trained with them (an older file: the old ranges)
        recorded = checkpoint_walk_config(str(path))
        base.task_cfg = dataclasses.replace(trained, **{k: getattr(recorded, k) for k in LEGACY_COMMANDS})
        try:
            with torch.no_grad():
                report = evaluator.evaluate(ActorCriticPolicy.from_checkpoint(path, env.reset(), env.num_actions))
        finally:
            base.task_cfg = trained
        row = acceptance_row(report, iteration, steps, train_s)
        row["command"] = "env" if command is None else list(command)
        row["checkpoint"] = str(path)
        return print_row(row)

    forward = FORWARD_COMMAND
    for path in args.judge:
        log(f"judging {path} on Isaac Lab (forward 0.5 m/s, then mixed commands)")
        print_header()
        for command in (forward, None):
            result["judged"].append(judge(Path(path), -1, 0, float("nan"), command))
    if args.judge_only:
        return result

    cfg = RunnerConfig(
        num_steps_per_env=24, save_interval=args.save_interval, log_dir=str(run_dir), seed=args.seed,
        validate_env_output=False, console=False,
        ppo=PPOConfig(**cli_runner_settings(args)),
        policy=PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)),
    )
    runner = Runner(env, cfg)
    # recorded in every checkpoint, so judges and resumes see the command ranges it was trained with
    runner.metadata = {"id": "G1-Walk-Clock-v0", "sim": "isaaclab", "env": env_params(env)}
    train_start = elapsed()
    learn_until_deadline(runner, args)
    s = runner.last_stats
    log(f"stopped at iteration {runner.iteration}: {s['perf/steps_per_s']:,.0f} steps/s, "
        f"return {s.get('episodes/mean_return', float('nan')):.2f}, length {s.get('episodes/mean_length', float('nan')):.0f}")
    result["train_wall_s"] = round(elapsed() - train_start, 1)
    result["iterations"] = runner.iteration

    from ppo_bootstrap.runner import read_metrics

    metrics = read_metrics(run_dir)
    result["curve"] = [{k: r.get(k) for k in ("iteration", "total_steps", "train_s", "perf/steps_per_s",
                                              "perf/collection_s", "perf/learning_s", "episodes/mean_return",
                                              "episodes/mean_length", "episodes/terminated", "episodes/truncated_only",
                                              "timeout_bootstrap/mean")} for r in metrics]
    progress = {int(r["iteration"]): (int(r["total_steps"]), r["train_s"]) for r in metrics}
    saved = sorted(int(p.stem.split("_")[1]) for p in run_dir.glob("model_*.pt"))
    chosen = [it for it in saved if it % args.every == 0 or it == saved[-1]]
    log(f"judging checkpoints {chosen} (forward 0.5 m/s), the last also with mixed commands")
    print_header()
    for it in chosen:
        if elapsed() > args.deadline_s and it != saved[-1]:
            continue
        steps, seconds = progress.get(it, (0, float("nan")))
        result["rows"].append(judge(run_dir / f"model_{it}.pt", it, steps, seconds, forward))
    steps, seconds = progress.get(saved[-1], (0, float("nan")))
    result["rows"].append(judge(run_dir / f"model_{saved[-1]}.pt", saved[-1], steps, seconds, None))

    result["clip"] = record_clip(env, run_dir / f"model_{saved[-1]}.pt", out / "clip.pt", seconds=6.0)
    return result


def learn_until_deadline(runner: Any, args: argparse.Namespace, iterations: int | None = None) -> None:
    """``runner.learn(iterations)`` (default ``args.iterations``), stopped ``args.eval_reserve_s`` before
    ``args.deadline_s`` by the Runner's own clean stop: SIGTERM ends the iteration in progress and
    writes its checkpoint."""
    iterations = args.iterations if iterations is None else iterations
    budget = training_time_left(args)
    log(f"training {iterations} iterations or for {budget:.0f} s")
    alarm = threading.Timer(max(budget, 1.0), os.kill, (os.getpid(), signal.SIGTERM))
    if math.isfinite(budget):
        alarm.start()
    try:
        runner.learn(iterations)
    finally:
        alarm.cancel()


@torch.no_grad()
def record_clip(env: Any, checkpoint_path: Path, path: Path, seconds: float, envs: int = 4) -> str:
    """Roll ``checkpoint_path`` out at 0.5 m/s forward and save the first ``envs`` envs' root position,
    quaternion ``(w, x, y, z)`` and joints (task order) per policy step: ``{"qpos": [T, envs, 7 + J], "dt"}``."""
    from isaac_adapter.evaluation import ActorCriticPolicy

    task = env.unwrapped
    task.generator.manual_seed(0)
    env.reset()
    obs = task.set_commands(torch.tensor(FORWARD_COMMAND))
    policy = ActorCriticPolicy.from_checkpoint(checkpoint_path, obs, env.num_actions)
    frames = []
    for _ in range(round(seconds / task.task_cfg.policy_dt)):
        res = env.step(policy(obs))
        policy.reset(res.terminated | res.truncated)
        obs = res.obs
        s = task.state
        frames.append(torch.cat([s.root_pos_w, s.root_quat_w, s.joint_pos], dim=-1)[:envs].cpu())
    torch.save({"qpos": torch.stack(frames), "dt": task.task_cfg.policy_dt, "command": list(FORWARD_COMMAND)}, path)
    log(f"saved {len(frames)} frames of {envs} envs to {path}")
    return str(path)


# -- flat ----------------------------------------------------------------------------------------


def randomize_episode_clocks(env: Any, seed: int) -> None:
    """Every env's episode step set to a random value below the limit (rsl_rl's ``init_at_random_ep_len``),
    the same values for every trainer."""
    base = env.unwrapped
    g = torch.Generator().manual_seed(seed)
    clocks = torch.randint(0, int(base.max_episode_length), (base.num_envs,), generator=g)
    base.episode_length_buf[:] = clocks.to(base.episode_length_buf.device)


def newest_checkpoint(run_dir: Path) -> Path | None:
    """``run_dir/model_<it>.pt`` of the highest iteration, or None."""
    from isaac_adapter.app.bench.time_to_walk import checkpoints

    saved = checkpoints(run_dir)  # sorted by iteration
    return saved[max(saved)] if saved else None


def cli_runner_settings(args: argparse.Namespace) -> dict[str, str]:
    """The ``PPOConfig`` settings of :data:`RUNNER_SETTINGS` as the command line gives them."""
    return {key: getattr(args, key) for key in RUNNER_SETTINGS}


class StopTraining(Exception):
    """Raised from rsl_rl's per-iteration hook at the deadline, after its checkpoint is saved."""


def train_flat_runner(env: Any, runner_config: Any, run_dir: Path, args: argparse.Namespace,
                      earlier: dict[str, Any]) -> dict[str, Any]:
    """The registered recipe through ``Runner`` to ``args.iterations``, continuing from the newest
    checkpoint in ``run_dir``; its rows (each with the GPU it ran on and the env's per-term logs;
    ``earlier``: the record an earlier run wrote, for its rows' GPUs), and the final policy judged
    once it is reached (with ``--judge-last``, the newest checkpoint wherever the deadline stopped it)."""
    from ppo_bootstrap import Runner
    from ppo_bootstrap.disk import METRICS
    from ppo_bootstrap.logger import ENV_LOG_PREFIX
    from ppo_bootstrap.runner import read_metrics

    cfg = runner_config(run_dir)
    runner = Runner(env, cfg)
    if (latest := newest_checkpoint(run_dir)) is not None:
        runner.load(latest)
    resumed_at = runner.iteration
    remaining = args.iterations - runner.iteration
    if remaining > 0 and training_time_left(args) > 0:
        randomize_episode_clocks(env, args.seed + runner.iteration)  # after the Runner's reset
        learn_until_deadline(runner, args, remaining)
    rows = [{"it": int(r["iteration"]), "wall_s": r["perf/collection_s"] + r["perf/learning_s"],
             "collect_s": r["perf/collection_s"], "learn_s": r["perf/learning_s"],
             "return": r.get("episodes/mean_return", float("nan")), "length": r.get("episodes/mean_length", float("nan")),
             "ended": int(r["episodes/ended"]), "timeouts": int(r["episodes/truncated_only"]),
             "timeout_bootstrap": r["timeout_bootstrap/mean"],
             **(learner_state(r["policy/learning_rate"], r["policy/mean_action_std"])
                if "policy/learning_rate" in r and "policy/mean_action_std" in r else {}),
             **row_terms(int(r["iteration"]), r, ENV_LOG_PREFIX)}
            for r in (read_metrics(run_dir) if (run_dir / METRICS).exists() else [])]  # none: judged, not trained, here
    here = device_name(args.device)
    rows = rows_with_devices(rows, resumed_at, earlier.get("trainers", {}).get(RUNNER, {}).get("rows", []),
                             earlier.get("device", here), here)
    trainer = {"rows": rows, "steps_per_env": cfg.num_steps_per_env, **{k: getattr(cfg.ppo, k) for k in RUNNER_SETTINGS},
               "network": f"{cfg.policy.actor_hidden}, obs norm {cfg.policy.obs_normalization}"}
    if judged_here(runner.iteration, args.iterations, args):
        trainer["judged"] = judge_velocity_policy(env, run_dir / f"model_{runner.iteration}.pt", args)
    log(f"ppo_bootstrap: {runner.iteration} of {args.iterations} iterations")
    return trainer


def run_flat(args: argparse.Namespace) -> dict[str, Any]:
    """Both trainers to ``--iterations`` (rsl_rl: ``--rsl-iterations``), each continuing from its newest
    checkpoint in ``--out`` (a run too long for one call continues in the next, rows kept), then each
    final policy judged by the same evaluator on this env."""
    from ppo_bootstrap import Runner, RunnerConfig

    from isaac_adapter.app.envs import isaaclab_task_env
    from isaac_adapter.isaaclab.velocity import registered_agent_cfg
    from isaac_adapter.tasks.registry import UsageError

    out = Path(args.out)
    t = elapsed()
    agent = registered_agent_cfg(args.task)  # both trainers' recipe; its clip_actions is the env's
    try:  # --env-overrides: the same change for both trainers
        env = isaaclab_task_env(args.task, args.num_envs, args.device, args.env_overrides, agent.clip_actions)
    except UsageError as err:
        raise SystemExit(f"isaaclab_g1.py: error: {err}") from None
    env.reset()
    sync()
    result: dict[str, Any] = {"task": args.task, "num_envs": args.num_envs, "build_s": round(elapsed() - t, 1),
                              "device": device_name(args.device), "seed": args.seed, "trainers": {}}
    log(f"{args.task} built: {args.num_envs} envs in {result['build_s']} s")

    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper, check_rsl_rl_version, create_rsl_rl_runner, handle_deprecated_rsl_rl_cfg

    version = check_rsl_rl_version()
    agent.device = args.device
    agent.seed = args.seed
    agent.save_interval = args.save_interval
    agent = handle_deprecated_rsl_rl_cfg(agent, version)
    n = args.num_envs

    def runner_config(log_dir: Path) -> Any:
        cfg = RunnerConfig.from_rsl_rl(agent, save_interval=args.save_interval, log_dir=str(log_dir),
                                       validate_env_output=False, console=False)
        return dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, **cli_runner_settings(args)))

    # a trainer this call does not run (its iterations 0, or no time left) keeps what an earlier call recorded of it
    earlier_file = out / "flat.json"
    earlier = json.loads(earlier_file.read_text()) if earlier_file.exists() else {}
    kept = earlier.get("trainers", {})
    steps = runner_config(out / "flat_ppo_bootstrap").num_steps_per_env
    if args.iterations > 0:
        result["trainers"][RUNNER] = train_flat_runner(env, runner_config, out / "flat_ppo_bootstrap", args,
                                                                earlier)
    elif RUNNER in kept:
        result["trainers"][RUNNER] = kept[RUNNER]
    no_time = training_time_left(args) < 0
    if not args.rsl_iterations or (no_time and not args.judge_last):  # --judge-last: judged, not trained
        if RSL_RL in kept:
            result["trainers"][RSL_RL] = kept[RSL_RL]
        return result

    # -- rsl-rl-lib: the registered recipe through its OnPolicyRunner, saving into its own folder
    base = env.unwrapped
    base.reset()
    torch.manual_seed(args.seed)

    from ppo_bootstrap.runner import LogSums

    class Metered(RslRlVecEnvWrapper):
        def step(self, actions):  # noqa: ANN001, ANN202
            obs, rew, dones, extras = super().step(actions)
            # a time-out on a step that also ended the MDP counts as a fall, as the Runner counts it
            meter.add(rew, dones.bool(), extras["time_outs"].bool() & ~base.reset_terminated)
            env_logs["sums"].add(extras.get("log", {}))  # summed as the Runner sums them
            return obs, rew, dones, extras

    meter = EpisodeMeter(n, base.device)
    env_logs = {"sums": LogSums()}
    wrapped = Metered(base, clip_actions=agent.clip_actions)
    rsl_dir = out / "flat_rsl_rl"
    rsl_dir.mkdir(parents=True, exist_ok=True)
    rsl = create_rsl_rl_runner(wrapped, agent, log_dir=str(rsl_dir))
    if (latest := newest_checkpoint(rsl_dir)) is not None:
        rsl.load(str(latest), map_location=args.device)  # a GPU run's checkpoint, judged on the CPU too
    done = rsl.current_learning_iteration
    rows_file = rsl_dir / "rows.jsonl"
    # the rows so far: the trainer's own file, and what flat.json recorded for those it lacks (a folder
    # of records holds only that); rows past the checkpoint were not kept by it
    logged = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.exists() else []
    rsl_rows = rows_with_devices([r for r in logged if r["it"] <= done], done, kept.get(RSL_RL, {}).get("rows", []),
                                 earlier.get("device", result["device"]), result["device"])
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in rsl_rows))
    clock = {"t": time.perf_counter()}

    def hook(it: int, collect_time: float, learn_time: float, **logged: Any) -> None:
        sync()
        now = time.perf_counter()
        ret, length, ended, timeouts = meter.take()
        means = env_logs["sums"].means(steps)  # per step, as the Runner's env/ keys
        env_logs["sums"] = LogSums()
        rsl_rows.append({"it": it + 1, "wall_s": now - clock["t"], "collect_s": collect_time, "learn_s": learn_time,
                         "return": ret, "length": length, "ended": ended, "timeouts": timeouts,
                         "device": result["device"],
                         **(learner_state(logged["learning_rate"], float(logged["action_std"].mean()))
                            if "learning_rate" in logged and "action_std" in logged else {}),
                         **row_terms(it + 1, means)})
        clock["t"] = now
        with rows_file.open("a") as f:
            f.write(json.dumps(rsl_rows[-1]) + "\n")
        if (it + 1) % 50 == 0:
            log(f"rsl_rl it {it + 1}: {rsl_rows[-1]['wall_s']:.3f} s, return {ret:.2f}, length {length:.0f}")
        if training_time_left(args) < 0 and it + 1 < args.rsl_iterations:
            rsl.current_learning_iteration = it + 1  # the checkpoint counts the iterations done
            rsl.save(str(rsl_dir / f"model_{it + 1}.pt"))
            raise StopTraining

    rsl.logger.log = hook
    remaining = args.rsl_iterations - done
    try:
        if remaining > 0 and not no_time:
            randomize_episode_clocks(wrapped, args.seed + done)
            clock["t"] = time.perf_counter()
            rsl.learn(remaining, init_at_random_ep_len=False)  # the clocks are set above, as for Runner
            rsl.current_learning_iteration = args.rsl_iterations
            rsl.save(str(rsl_dir / f"model_{args.rsl_iterations}.pt"))
    except StopTraining:
        log(f"rsl_rl stopped at iteration {rsl_rows[-1]['it']} for the deadline; the next run continues it")
    trainer = {"rows": rsl_rows, "steps_per_env": steps, "version": version,
               "network": f"{tuple(agent.actor.hidden_dims)}, obs norm {agent.actor.obs_normalization}"}
    # the checkpoint's count, as for Runner: a brought-back folder may hold a checkpoint and no rows
    if judged_here(last := rsl.current_learning_iteration, args.rsl_iterations, args):
        # the same evaluator on the same env: the rsl-rl-lib file converted by Runner.load, saved as a Runner file
        converted = rsl_dir / f"runner_model_{last}.pt"
        judge_runner = Runner(env, runner_config(out / "flat_rsl_rl_converted"))
        judge_runner.load(str(rsl_dir / f"model_{last}.pt"))
        judge_runner.save(converted)
        trainer["judged"] = judge_velocity_policy(env, converted, args)
    result["trainers"][RSL_RL] = trainer
    return result


def judged_here(iteration: int, goal: int, args: argparse.Namespace) -> bool:
    """Whether this call judges a trainer's newest checkpoint (at ``iteration``, asked for ``goal``): once
    it reaches the goal, or wherever the deadline stopped it with ``--judge-last``."""
    return not args.no_judge and iteration > 0 and (iteration >= goal or args.judge_last)


def judge_velocity_policy(env: Any, path: Path, args: argparse.Namespace) -> list[dict]:
    """The project's evaluator on the velocity task: forward 0.5 m/s, then the task's own commands,
    each row with the gait verdict; the first row also carries the project's walking gate, run on the
    first of this env's envs (``gate``: its ``as_dict``)."""
    from isaac_adapter.evaluation import ActorCriticPolicy, EvalConfig, Evaluator
    from isaac_adapter.evaluation.gate import GateConfig, run_gate
    from isaac_adapter.evaluation.velocity_probe import IsaacVelocityProbe

    from g1_acceptance import acceptance_row, print_header, print_row

    probe = IsaacVelocityProbe(env, as_played=args.judge_world == PLAY_WORLD)
    rows = []
    print_header()
    try:
        for command in (FORWARD_COMMAND, None):
            evaluator = Evaluator(probe, EvalConfig(horizon_s=args.horizon_s, seed=args.seed, commands=command))
            with torch.no_grad():
                report = evaluator.evaluate(ActorCriticPolicy.from_checkpoint(path, env.reset(), env.num_actions))
            ckpt = torch.load(path, map_location="cpu", weights_only=False)
            row = acceptance_row(report, int(ckpt["iteration"]), int(ckpt["total_steps"]), float("nan"))
            row["command"] = "env" if command is None else list(command)
            row["checkpoint"], row["world"] = str(path), args.judge_world
            rows.append(print_row(row))
        with torch.no_grad():
            gate = run_gate(probe, ActorCriticPolicy.from_checkpoint(path, env.reset(), env.num_actions),
                            GateConfig(horizon_s=args.gate_horizon_s, seed=args.seed))
        print(gate.format())
        rows[0]["gate"] = gate.as_dict()
    finally:
        probe.close()
    return rows


# -- table ---------------------------------------------------------------------------------------


def print_tables(out: Path, block: int = 100, until: int | None = None) -> None:
    """The tables of the records in ``out``; the flat phase's per-block table has a row per ``block``
    iterations, up to iteration ``until`` (all: None)."""
    flat = out / "flat.json"
    if flat.exists():
        res = json.loads(flat.read_text())
        n = res["num_envs"]
        settled = {name: settled_rows(tr["rows"]) for name, tr in res["trainers"].items()}
        print(f"{res['task']}, {n} envs, {res['device']}, build {res['build_s']} s; {SETTLED_NOTE}")
        print("| trainer | network | iterations | wall s/it | collect s | update s | env-steps/s | return (last 10) | length (last 10) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, tr in res["trainers"].items():
            rows, steps = tr["rows"], tr["steps_per_env"]
            if not rows:  # a checkpoint brought here to be judged, its training recorded elsewhere
                print(f"| {name} | {tr['network']} | judged only | - | - | - | - | - | - |")
                continue
            wall = median_after_first(rows, "wall_s")
            print(f"| {name} | {tr['network']} | {len(rows)} | {wall:.3f} | {median_after_first(rows, 'collect_s'):.3f} | "
                  f"{median_after_first(rows, 'learn_s'):.3f} | {steps * n / wall:,.0f} | "
                  f"{last_mean(settled[name], 'return'):.2f} | {last_mean(settled[name], 'length'):.0f} |")
        for name in res["trainers"]:
            rows = judged_rows(res, name)
            for row in rows:
                times = [fall["time_s"] for fall in row["falls"]]
                when = ""
                if times:  # when they fell: at the start, or later (under a push in the training world, say)
                    per_bin = ", ".join(map(str, falls_per_bin(times, res["args"]["horizon_s"])))
                    when = f" (at {min(times):.2f}-{max(times):.2f} s; per {FALL_BIN_S:g} s: {per_bin})"
                print(f"{name} policy at iteration {row['iteration']}, command {row['command']}, "
                      f"{judged_world(row)}: falls {row['fall_rate']:.2%}"
                      f"{when}, air time {row['air_time_s']:.3f} s, {row['step_frequency_hz']:.2f} Hz, double support "
                      f"{row['double_support']:.2f}, tracking error {row['tracking_error']:.3f} m/s, "
                      f"{'accepted' if row['verdict']['accepted'] else 'rejected'}")
                if "gate" in row:
                    gate = row["gate"]
                    print(f"{name} policy at iteration {row['iteration']}, {judged_world(row)}, the walking gate: "
                          f"{'PASS' if gate['passed'] else 'FAIL'} (" + "; ".join(
                              f"{ln['name']} {ln['value']:.3g} {ln['op']} {ln['threshold']:g}"
                              + ("" if ln["passed"] else " FAIL") for ln in gate["lines"]) + ")")
        print(f"\nper {block} iterations: median s/it, env-steps/s, return, length and action std (mean of the block's "
              "last 10), episodes ended and, of them, by the time limit (the block's sums), the learning rate (the "
              f"block's geometric mean), the GPU; '-': not recorded or none left; {SETTLED_NOTE}")
        print("| trainer | iterations | s/it | env-steps/s | return | length | episodes ended | by the time limit | "
              "learning rate | action std | GPU |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, tr in res["trainers"].items():
            rows = [r for r in tr["rows"] if until is None or r["it"] <= until]
            for lo in range(0, len(rows), block):
                part = rows[lo:lo + block]
                wall = statistics.median(r["wall_s"] for r in part)
                timeouts = f"{sum(r['timeouts'] for r in part):,}" if all("timeouts" in r for r in part) else "-"
                gpus = " + ".join(dict.fromkeys(r.get("device", res["device"]) for r in part))
                rate, std = block_learner_cells(part)
                whole = [r for r in settled[name] if part[0]["it"] <= r["it"] <= part[-1]["it"]]
                print(f"| {name} | {part[0]['it']}-{part[-1]['it']} | {wall:.3f} | {tr['steps_per_env'] * n / wall:,.0f} | "
                      f"{number_cell(last_mean(whole, 'return'), '.2f')} | {number_cell(last_mean(whole, 'length'), '.0f')} | "
                      f"{sum(r['ended'] for r in part):,} | {timeouts} | {rate} | {std} | {gpus} |")
        if terms := term_lines(res):
            print("\n" + "\n".join(terms))
    direct = out / "direct.json"
    if direct.exists():
        res = json.loads(direct.read_text())
        curve = res.get("curve", [])  # none with --judge-only
        trained = f", {res['iterations']} iterations in {res['train_wall_s']} s of training wall time" if curve else ", judging only"
        print(f"\nG1WalkDirectEnv (gait clock), {res['num_envs']} envs, {res['device']}, build {res['build_s']} s{trained}")
        if curve:
            print(f"median {median_after_first(curve, 'perf/steps_per_s'):,.0f} env-steps/s, "
                  f"{median_after_first([{'s': r['perf/collection_s'] + r['perf/learning_s']} for r in curve], 's'):.3f} s/it")
        print("| checkpoint | command | env steps | train s | falls at 0.60 m (envs) | air time s | steps Hz | double support | tracking error m/s | verdict |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for row in res["judged"] + res.get("rows", []):
            name = Path(row["checkpoint"]).name if row["iteration"] < 0 else f"it {row['iteration']}"
            print(f"| {name} | {row['command']} | {row['env_steps']:,} | {row['train_s']:.0f} | {row['fall_rate']:.2%} ({len(row['falls'])}) | "
                  f"{row['air_time_s']:.3f} | {row['step_frequency_hz']:.2f} | {row['double_support']:.2f} | "
                  f"{row['tracking_error']:.3f} | {'accepted' if row['verdict']['accepted'] else 'rejected'} |")
        print("\ncurve (every 50th iteration): it, env steps, return, episode length, mean timeout bootstrap")
        for r in curve:
            if r["iteration"] % 50 == 0 or r is curve[-1]:
                print(f"{r['iteration']:>5} {r['total_steps']:>11,} {r['episodes/mean_return'] or float('nan'):8.2f} "
                      f"{r['episodes/mean_length'] or float('nan'):6.0f} {r['timeout_bootstrap/mean']:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("phase", choices=("direct", "flat", "table"))
    parser.add_argument("out", nargs="*", default=[], help="table: the folders with the phases' JSON (one per seed: "
                        "then also the seeds' table and the goal's verdict over them)")
    parser.add_argument("--out", dest="out_dir", default="runs/isaaclab_g1")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=1500, help="flat: Runner's iterations (0: none this call)")
    parser.add_argument("--deadline-s", type=float, default=math.inf, help="stop training this long after launch")
    parser.add_argument("--eval-reserve-s", type=float, default=90.0, help="seconds kept for judging before the deadline")
    parser.add_argument("--save-interval", type=int, default=50)
    parser.add_argument("--every", type=int, default=100, help="direct: judge every this many iterations")
    parser.add_argument("--horizon-s", type=float, default=15.0)
    parser.add_argument("--gate-horizon-s", type=float, default=20.0, help="flat: the walking gate's horizon")
    parser.add_argument("--judge", nargs="*", default=[], help="direct: checkpoints to judge on Isaac Lab before training")
    parser.add_argument("--judge-only", action="store_true", help="direct: judge the --judge checkpoints, do not train")
    parser.add_argument("--timeout-bootstrap", choices=TIMEOUT_BOOTSTRAP_MODES, default=RUNNER_SETTINGS["timeout_bootstrap"],
                        help="Runner's value of a time-out (flat: another is a probe, e.g. rsl_rl's state_value)")
    parser.add_argument("--shuffle", choices=SHUFFLES, default=RUNNER_SETTINGS["shuffle"],
                        help="Runner's order of the samples over an update's epochs (flat: another is a probe, e.g. "
                             "every_epoch, a new order each epoch)")
    parser.add_argument("--task", default="Isaac-Velocity-Flat-G1", help="flat: the Isaac Lab task id")
    parser.add_argument("--rsl-iterations", type=int, default=None, help="flat: rsl-rl-lib iterations (default: --iterations; 0: none)")
    parser.add_argument("--no-judge", action="store_true",
                        help="flat: leave the final policies unjudged (runs that look at the start of the curve)")
    parser.add_argument("--judge-last", action="store_true",
                        help="flat: judge each trainer's newest checkpoint even where the deadline stopped it short or left it no time "
                             "(probes; the goal's lines still leave out a seed short of 1,000 iterations)")
    parser.add_argument("--judge-world", choices=JUDGE_WORLDS, default=PLAY_WORLD,
                        help="flat: judge as Isaac Lab's play scripts run the task (play: no pushes, no observation "
                             "noise) or in the world it trained in (training)")
    parser.add_argument("--block", type=int, default=100, help="table: iterations per row of the flat phase's per-block table")
    parser.add_argument("--until", type=int, default=None, help="table: that table up to this iteration (default: all)")
    parser.add_argument("--env-overrides", nargs="*", default=[], metavar="env.KEY=VALUE",
                        help="flat: changes to the task's env cfg for both trainers, as Isaac Lab's train.py takes them "
                             "(env.rewards.feet_air_time.weight=1.5)")
    args = parser.parse_intermixed_args()  # table: options before or after the folders
    if args.phase == "table":
        if args.block < 1:
            parser.error(f"--block {args.block}: a row of the per-block table holds at least 1 iteration")
        folders = [Path(f) for f in args.out or [args.out_dir]]
        if missing := [str(f) for f in folders if not f.is_dir()]:
            parser.error(f"table: no such folder: {', '.join(missing)}")
        if empty := [str(f) for f in folders if not any((f / f"{phase}.json").exists() for phase in ("flat", "direct"))]:
            parser.error(f"table: no flat.json or direct.json in {', '.join(empty)} (the folders --out gave the phases)")
        for folder in folders:
            print_tables(folder, args.block, args.until)
        flats = [json.loads((f / "flat.json").read_text()) for f in folders if (f / "flat.json").exists()]
        if flats:
            print()
            print(format_seeds(flats))
        return
    args.out = args.out_dir
    if args.rsl_iterations is None:
        args.rsl_iterations = args.iterations
    if args.no_judge and args.judge_last:
        parser.error("--judge-last with --no-judge: give one of them")
    if args.phase == "flat":  # each final policy meets the walking gate, which needs its envs in this env
        from isaac_adapter.evaluation.gate import GateConfig

        if args.num_envs < (needed := GateConfig().num_envs):
            parser.error(f"--num-envs {args.num_envs}: flat judges each final policy by the walking gate on this env, "
                         f"which needs at least {needed} envs")
    earlier = Path(args.out) / f"{args.phase}.json"
    if args.phase == "flat" and earlier.exists():  # a run goes on only with the env it started with
        record = json.loads(earlier.read_text())
        if record.get("num_envs", args.num_envs) != args.num_envs:
            parser.error(f"--num-envs {args.num_envs}: {earlier} was trained with {record['num_envs']} envs; give the "
                         "same, or another --out")
        recorded = record.get("args", {}).get("env_overrides", [])
        if recorded != args.env_overrides:
            parser.error(f"--env-overrides {' '.join(args.env_overrides) or '(none)'}: {earlier} was trained with "
                         f"{' '.join(recorded) or 'none'}; give the same, or another --out")
        ours = record.get("trainers", {}).get(RUNNER)
        for key in RUNNER_SETTINGS:
            trained = trained_setting(ours, key) if ours else getattr(args, key)
            if args.iterations > 0 and trained != getattr(args, key):
                parser.error(f"--{key.replace('_', '-')} {getattr(args, key)}: {earlier} trained Runner with {trained}; "
                             "give the same, or another --out")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    result = run_direct(args) if args.phase == "direct" else run_flat(args)
    result["args"] = {k: v for k, v in vars(args).items() if k not in ("out_dir",)}
    result["total_wall_s"] = round(elapsed(), 1)
    (Path(args.out) / f"{args.phase}.json").write_text(json.dumps(result, indent=1, default=str))
    log(f"wrote {Path(args.out) / f'{args.phase}.json'}")
    print_tables(Path(args.out))


if __name__ == "__main__":
    main()
