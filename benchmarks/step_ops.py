"""The benchmark ``isaac_adapter/app/bench/step_ops.py`` (its docstring and ``--help`` say what it measures)::

    python benchmarks/step_ops.py                                  # G1-Walk-Clock-Fast-v0, 16 envs, CPU MuJoCo
    python benchmarks/step_ops.py --task G1-Walk-Clock-v0 --steps 48
"""

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.step_ops import main

if __name__ == "__main__":
    main()
