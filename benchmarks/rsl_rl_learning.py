"""The return ``Runner`` ends at beside rsl-rl-lib's ``OnPolicyRunner``, over seeds, on a cheap task.

Both trainers take one rsl_rl agent config, as rsl-rl-lib 5.x's ``OnPolicyRunner`` reads it (a
``to_dict()``): rsl-rl-lib as it is, ``Runner`` through ``RunnerConfig.from_rsl_rl``. Both drive the
same Gymnasium vector env through the same adapter (``isaac_adapter.adapters.gymnasium``, same-step
auto-reset with the true final observation): rsl-rl-lib sees it through a small ``VecEnv`` shim that
reports ``dones = terminated | truncated`` and ``extras["time_outs"] = truncated``, as Isaac Lab's
wrapper does. One meter on the env counts, for both, the return and length of each episode that ends
and how it ended. So what differs is the trainer alone: its random streams, its mini-batch order,
and how it values a time-out (``Runner``'s ``V(s_final)``; ``--runner-bootstrap state_value`` gives
it rsl_rl's ``V(s_t)``, to tell that part apart). ``Runner`` keeps rsl-rl-lib's one order of the
samples for all epochs of an update, as ``from_rsl_rl`` gives it; ``--runner-shuffle every_epoch``
draws a new one each epoch, as the records named without "shuffled once" did. Each row keeps the
learning rate the adaptive schedule left after the iteration's update, as each trainer holds it.

This answers on the CPU in minutes what Isaac Lab's flat G1 asks of a GPU for an hour: at one seed
there ``Runner`` ended lower (BENCHMARKS.md, "Isaac Lab's own G1 beside rsl_rl"); is that the trainer
or the seed?

    pip install rsl-rl-lib "gymnasium[mujoco]"
    python benchmarks/rsl_rl_learning.py --seeds 0 1 2 3 4 --out runs/rsl_learning          # each seed, each trainer
    python benchmarks/rsl_rl_learning.py --table runs/rsl_learning/*.json                  # the table again

Each (trainer, seed) run writes ``<out>/<trainer>_s<seed>.json`` with its per-iteration rows; the
table gives per trainer the return over the last ``--window`` iterations at each seed, their mean and
standard deviation, the episodes ended over the run, of them by the time limit, and the learning
rate (the geometric mean over every iteration of its runs).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (puts the repository root on sys.path)
import torch
from ppo_bootstrap.ppo import SHUFFLES, PPOConfig
from ppo_bootstrap.rsl_rl import RSL_RL_SHUFFLE

from isaac_adapter.app.bench.common import RETURN_WINDOW, RSL_RL, RUNNER, EpisodeMeter, last_mean
from isaac_adapter.app.bench.rsl_rl_learning import agent_config, learning_table

TRAINERS = (RUNNER, RSL_RL)


class MeteredEnv:
    """The adapted env with every step counted by an :class:`EpisodeMeter` (a fall on the last step
    counts as a fall, as the Runner counts it)."""

    def __init__(self, env: Any) -> None:
        self.env, self.meter = env, EpisodeMeter(env.num_envs, "cpu")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, actions: torch.Tensor) -> Any:
        result = self.env.step(actions)
        self.meter.add(result.reward, result.terminated | result.truncated, result.truncated & ~result.terminated)
        return result

    def take(self) -> dict[str, Any]:
        ret, length, ended, timeouts = self.meter.take()
        return {"return": ret, "length": length, "ended": ended, "timeouts": timeouts}


class RslRlShim:
    """rsl-rl-lib's ``VecEnv`` over the adapted env (the protocol its ``OnPolicyRunner`` reads)."""

    def __init__(self, env: MeteredEnv, horizon: int) -> None:
        from tensordict import TensorDict

        self.env, self._td = env, TensorDict
        self.num_envs, self.num_actions, self.device, self.cfg = env.num_envs, env.num_actions, "cpu", {}
        self.max_episode_length = horizon
        self.episode_length_buf = torch.zeros(env.num_envs, dtype=torch.long)  # read only to randomize; unused here
        self._obs = env.reset()

    def _groups(self, obs: dict[str, torch.Tensor]) -> Any:
        return self._td(dict(obs), batch_size=[self.num_envs])

    def get_observations(self) -> Any:
        return self._groups(self._obs)

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        r = self.env.step(actions)
        self._obs = r.obs
        return self._groups(r.obs), r.reward, (r.terminated | r.truncated).long(), {"time_outs": r.truncated}


def make_env(args: argparse.Namespace, seed: int) -> MeteredEnv:
    import gymnasium as gym

    from isaac_adapter.adapters.gymnasium import GymnasiumVecEnv

    limit = {"max_episode_steps": args.time_limit} if args.time_limit else {}
    vec = gym.make_vec(args.env, num_envs=args.num_envs, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}, **limit)
    env = GymnasiumVecEnv(vec, device="cpu")
    vec.reset(seed=seed)
    return MeteredEnv(env)


def run_one(args: argparse.Namespace, trainer: str, seed: int) -> dict[str, Any]:
    """``trainer`` at ``seed`` for ``args.iterations``; its rows."""
    import gymnasium as gym

    cfg = agent_config(seed, args.steps, args.iterations)
    horizon = args.time_limit or gym.spec(args.env).max_episode_steps
    env = make_env(args, seed)
    rows: list[dict[str, Any]] = []
    clock = {"t": time.perf_counter()}

    def row(it: int, lr: float) -> None:
        now = time.perf_counter()
        took = env.take()
        rows.append({"it": it, "wall_s": round(now - clock["t"], 4), **took,
                     "return": round(took["return"], 2), "length": round(took["length"], 2), "lr": float(f"{lr:.4g}")})
        clock["t"] = now

    if trainer == RUNNER:
        import dataclasses

        from ppo_bootstrap import Runner, RunnerConfig

        rc = RunnerConfig.from_rsl_rl(cfg, console=False, log_dir=None)
        rc = dataclasses.replace(rc, ppo=dataclasses.replace(rc.ppo, timeout_bootstrap=args.runner_bootstrap,
                                                             shuffle=args.runner_shuffle))
        runner = Runner(env, rc)
        for it in range(1, args.iterations + 1):
            runner.learn(1)
            if runner.interrupted:  # SIGINT / SIGTERM: the Runner ended its iteration cleanly; so does the run
                raise SystemExit(f"{trainer} seed {seed}: stopped by a signal at iteration {runner.iteration}")
            row(it, runner.last_stats["policy/learning_rate"])
        # named against PPOConfig's own order, as every record is (from_rsl_rl took that one before)
        name = f"{RUNNER}/{args.runner_bootstrap}" + ("" if args.runner_shuffle == PPOConfig.shuffle
                                                            else f", shuffled {args.runner_shuffle}")
    else:
        from rsl_rl.runners import OnPolicyRunner

        torch.manual_seed(seed)
        rsl = OnPolicyRunner(RslRlShim(env, horizon), cfg, log_dir=None, device="cpu")
        rsl.logger.log = lambda it, **_: row(it + 1, rsl.alg.learning_rate)  # one row per iteration, no files
        rsl.learn(args.iterations)
        name = RSL_RL
    return {"trainer": name, "seed": seed, "env": args.env, "time_limit": horizon, "num_envs": args.num_envs, "steps": args.steps,
            "iterations": args.iterations, "agent_cfg": cfg, "rows": rows}


def check_task(p: argparse.ArgumentParser, env_id: str) -> None:
    """Build ``env_id`` once, or end in one line naming what failed (Gymnasium's MuJoCo tasks need
    ``pip install "gymnasium[mujoco]"``)."""
    try:
        import gymnasium as gym

        gym.make(env_id).close()
    except Exception as err:  # noqa: BLE001  (any failure to build the task is the same one-line answer)
        p.error(f"--env {env_id}: {type(err).__name__}: {err}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="Hopper-v5", help="a Gymnasium task id with a Box action space")
    p.add_argument("--time-limit", type=int, default=None,
                   help="episode steps before the time limit (default: the task's); short: most episodes end by it")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--trainers", nargs="+", choices=TRAINERS, default=list(TRAINERS))
    p.add_argument("--runner-bootstrap", choices=("exact", "state_value"), default="exact",
                   help="Runner's value of a time-out (state_value: rsl_rl's, to tell its part in a gap apart)")
    p.add_argument("--runner-shuffle", choices=SHUFFLES, default=RSL_RL_SHUFFLE,
                   help="Runner's order of the samples over an update's epochs (default: rsl-rl-lib's, as from_rsl_rl "
                        "gives it; every_epoch: a new order each epoch)")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=32, help="env steps per iteration")
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--window", type=int, default=RETURN_WINDOW,
                   help="the return a run ends at: the mean over this many iterations")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--out", default="runs/rsl_learning")
    p.add_argument("--table", nargs="*", metavar="JSON", help="print the table of these records and exit")
    args = p.parse_args()
    if args.table is not None:
        if missing := [f for f in args.table if not Path(f).is_file()]:
            p.error(f"--table: no such record: {', '.join(missing)}")
        print(learning_table([json.loads(Path(f).read_text()) for f in args.table], args.window))
        return
    import importlib.util

    if RSL_RL in args.trainers and importlib.util.find_spec("rsl_rl") is None:
        p.error("rsl-rl-lib is not installed: pip install rsl-rl-lib, or give --trainers ppo_bootstrap")
    check_task(p, args.env)
    torch.set_num_threads(args.torch_threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for seed in args.seeds:
        for trainer in args.trainers:
            t = time.perf_counter()
            rec = run_one(args, trainer, seed)
            tag = re.sub(r"[^A-Za-z0-9]+", "_", rec["trainer"])
            (out / f"{tag}_s{seed}.json").write_text(json.dumps(rec))
            print(f"{rec['trainer']} seed {seed}: return {last_mean(rec['rows'], 'return', args.window):.1f} "
                  f"({time.perf_counter() - t:.0f} s)", flush=True)
            records.append(rec)
    print(learning_table(records, args.window))


if __name__ == "__main__":
    main()
