"""The benchmark ``isaac_adapter/app/bench/train_under_load.py`` (its docstring and ``--help`` say what it measures)::

    python benchmarks/train_under_load.py -- --task G1-Walk-Clock-Fast-v1 --symmetry both --tf32 --cuda-graph-step
    python benchmarks/train_under_load.py --rows alone judges --workers 4 --iterations 40
    python benchmarks/train_under_load.py --sim mujoco --device cpu --num-envs 64 --rows alone   # a CPU try-out
"""

import sys

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.train_under_load import main

if __name__ == "__main__":
    sys.exit(main())
