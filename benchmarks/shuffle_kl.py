"""What the adaptive learning-rate schedule reads under each order of the samples, on the same rollouts.

``PPOConfig.shuffle`` is the one difference left between one update of ``Runner`` and one of
rsl-rl-lib (``every_epoch``: a new order each epoch; ``once``: one order per update, rsl-rl-lib's).
The ``adaptive`` schedule reads, before each mini-batch's step, the KL between the policy that
collected the rollout and the policy now, on that mini-batch, and lowers the rate when it reads
more than ``2 x desired_kl``. This script asks whether the order changes what it reads.

``Runner`` trains ``Hopper-v5`` from the agent config of ``rsl_rl_learning.py``. Every ``--every``
iterations, before its own update, copies of its learner (networks, Adam state, learning rate) run
that update on the same rollout once per order, with the learning rate held at the Runner's (the
schedule ``fixed``), and from one seed (so ``once`` keeps the first order ``every_epoch`` draws).
Each gives the KL the schedule reads (the mean over the update's mini-batches) and the KL the
update moved the policy by on the whole rollout. The Runner's own training is not changed.

    pip install "gymnasium[mujoco]"
    python benchmarks/shuffle_kl.py --seeds 0 1 2 --iterations 200 --every 10
"""

from __future__ import annotations

import argparse
import statistics
from argparse import Namespace

import _common  # noqa: F401  (puts the repository root on sys.path)
import torch
from ppo_bootstrap import Runner, RunnerConfig
from ppo_bootstrap.ppo import SHUFFLES

from isaac_adapter.app.bench.rsl_rl_learning import agent_config, read_and_moved
from rsl_rl_learning import check_task, make_env


def run_seed(seed: int, args: argparse.Namespace) -> list[dict[str, tuple[float, float]]]:
    """``Runner`` at ``seed`` for ``args.iterations``; the measure of every ``args.every``-th update."""
    env = make_env(Namespace(env="Hopper-v5", time_limit=None, num_envs=args.num_envs, steps=args.steps), seed)
    runner = Runner(env, RunnerConfig.from_rsl_rl(agent_config(seed, args.steps, args.iterations), console=False,
                                                  log_dir=None))
    learner, own_update = runner.alg, runner.alg.update
    measured = []

    def update(generator: torch.Generator | None = None) -> dict[str, float]:
        it = runner.iteration + 1
        if it % args.every == 0:
            measured.append(read_and_moved(learner, seed * 100_000 + it))
        return own_update(generator)

    learner.update = update
    runner.learn(args.iterations)
    return measured


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--every", type=int, default=10, help="measure every this many iterations' update")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=32, help="env steps per iteration")
    args = p.parse_args()
    if not 1 <= args.every <= args.iterations:
        p.error(f"--every {args.every}: give 1 to --iterations ({args.iterations})")
    check_task(p, "Hopper-v5")
    torch.set_num_threads(1)
    print(f"Hopper-v5, {args.num_envs} envs x {args.steps} steps; per seed, the means over the updates measured "
          f"(every {args.every}th of {args.iterations}): the KL the schedule reads and the KL the update moved, per order")
    print("| seed | updates | read, every_epoch | read, once | moved, every_epoch | moved, once | read / moved, every_epoch | read / moved, once |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for seed in args.seeds:
        measured = run_seed(seed, args)
        mean = {s: tuple(statistics.fmean(m[s][i] for m in measured) for i in (0, 1)) for s in SHUFFLES}
        (re, me), (ro, mo) = mean["every_epoch"], mean["once"]
        ratios += [m["every_epoch"][0] / m["once"][0] for m in measured]
        print(f"| {seed} | {len(measured)} | {re:.5f} | {ro:.5f} | {me:.5f} | {mo:.5f} | {re / me:.2f} | {ro / mo:.2f} |",
              flush=True)
    print(f"read KL, every_epoch over once, update by update: median {statistics.median(ratios):.3f}, "
          f"above 1 in {sum(r > 1 for r in ratios)} of {len(ratios)}")


if __name__ == "__main__":
    main()
