"""Train, evaluate and watch the Unitree G1 walking, as Isaac Lab's train.py / play.py do.

    python examples/g1_walk.py                                   # device auto: GPU + MuJoCo Warp, else CPU MuJoCo
    python examples/g1_walk.py --task G1-Walk-Clock-v0 --num_envs 4096 --max_iterations 600
    python examples/g1_walk.py --resume                          # the newest run of the experiment, its newest checkpoint
    python examples/g1_walk.py env.rewards.action_rate=-0.05 agent.ppo.num_mini_batches=8   # config overrides
    python examples/g1_walk.py --resume --load_run 2026-11-30.* --checkpoint model_500.pt
    python examples/g1_walk.py --sim isaaclab --num_envs 4096    # the same task on Isaac Lab (Python 3.12)
    python examples/g1_walk.py --task Isaac-Velocity-Flat-G1 --num_envs 4096
    python examples/g1_walk.py --eval docs/checkpoints/g1_clock_it1296.pt   # the task comes from the checkpoint
    python examples/g1_walk.py --play docs/checkpoints/g1_clock_it1296.pt --video g1.gif
    python examples/g1_walk.py --export docs/checkpoints/g1_clock_it1296.pt --export-dir out   # + deploy.yaml
    torchrun --nproc-per-node 2 examples/g1_walk.py --device cuda --num_envs 4096 --distributed
    tensorboard --logdir logs

The application is ``python -m isaac_adapter.app {train,play,eval,list}`` (docs/cli.md); this script
is its command line without a subcommand. ``--help`` lists every flag and registered task. The
exported actor comes with the deploy.yaml that deploy/deploy_mujoco.py runs (docs/deploy.md).
"""

import os
import sys

# running the file directly puts examples/ on sys.path, not the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from isaac_adapter.app import headless_rendering  # noqa: E402  (first: its import time is the startup line's start)

headless_rendering(sys.argv[1:])  # before MuJoCo is imported

from isaac_adapter.app.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
