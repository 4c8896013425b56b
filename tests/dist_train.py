"""A tiny training run for the multi-process tests, launched by torchrun: TimeLimitEnv on the CPU,
one checkpoint per iteration, and faults on request (a rank killed mid-iteration or mid-save)."""

from __future__ import annotations

import argparse
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig, distributed  # noqa: E402
from ppo_bootstrap.envs import TimeLimitEnv  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--log-dir", required=True)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--num-envs", type=int, default=8, help="envs of every rank")
    p.add_argument("--rank-num-envs", default=None, help="R:N: rank R gets N envs instead")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--resume", default=None)
    p.add_argument("--kill", default=None, help="R:step:K or R:save:K: rank R SIGKILLs itself in iteration K's "
                   "rollout, or while writing iteration K's checkpoint; R:hang:K: rank R stops itself (SIGSTOP) "
                   "in iteration K's rollout, alive and silent")
    return p.parse_args()


def make_runner(log_dir: str | None, num_envs: int = 8, seed: int = 3, rank: int = 0) -> Runner:
    """The run every test launches: rank ``rank``'s envs, one checkpoint per iteration into ``log_dir``."""
    env = TimeLimitEnv(num_envs=num_envs, episode_length=10, privileged_dim=1, fall_probability=0.05, seed=seed + rank)
    cfg = RunnerConfig(num_steps_per_env=8, save_interval=1, log_dir=log_dir, console=False, seed=seed,
                       ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=2),
                       policy=PolicyConfig(actor_hidden=(16,), critic_hidden=(16,)))
    return Runner(env, cfg)


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    distributed.init_from_env("cpu")
    rank = distributed.rank()
    num_envs = args.num_envs
    if args.rank_num_envs and int(args.rank_num_envs.split(":")[0]) == rank:
        num_envs = int(args.rank_num_envs.split(":")[1])
    try:
        runner = make_runner(args.log_dir, num_envs, args.seed, rank)
    except distributed.RankMismatchError as err:  # as examples/g1_walk.py: one line, no traceback
        raise SystemExit(f"error: {err}") from None
    if args.resume:
        runner.load(args.resume)
    if args.kill:
        victim, where, iteration = args.kill.split(":")
        if int(victim) == rank and where in ("step", "hang"):
            env = runner.env
            step = env.step

            def dying_step(actions):
                if runner.iteration == int(iteration) - 1 and env.step_count.sum() > 0:
                    if where == "hang":  # say who hangs, so that the test can end it whatever torchrun does
                        os.makedirs(args.log_dir, exist_ok=True)
                        with open(os.path.join(args.log_dir, f"hung_rank{rank}.pid"), "w") as f:
                            f.write(str(os.getpid()))
                        os.kill(os.getpid(), signal.SIGSTOP)
                    else:
                        kill_self()
                return step(actions)

            env.step = dying_step
        elif int(victim) == rank and where == "save":
            real_save = torch.save

            def dying_save(obj, f, *a, **k):
                if isinstance(obj, dict) and obj.get("iteration") == int(iteration):
                    f.write(b"partial checkpoint bytes")
                    f.flush()
                    kill_self()
                return real_save(obj, f, *a, **k)

            torch.save = dying_save
    runner.learn(args.iterations)
    print(f"rank {rank}: trained to iteration {runner.iteration}", flush=True)
    if distributed.is_distributed():
        # every rank past its last collective before any tears the group down: a rank still talking to
        # one that has gone aborted at exit ("terminate called without an active exception")
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
