"""The benchmark ``isaac_adapter/app/bench/time_to_walk.py`` (its docstring and ``--help`` say what it measures)::

    python benchmarks/time_to_walk.py --seeds 0 1 2 --modes exact --save-interval 20 --out runs/ttw -- --task G1-Walk-Clock-Fast-v0 --symmetry both --tf32
    python benchmarks/time_to_walk.py --seeds 0 1 2 --nproc 2 --out runs/ttw2      # torchrun, envs per GPU
    python benchmarks/time_to_walk.py --seeds 0 --modes exact -- --num-steps-per-env 32   # after --: g1_walk.py flags
    python benchmarks/time_to_walk.py --table runs/ttw                              # re-print the table, run nothing
    python benchmarks/time_to_walk.py --table runs/ttw_s0 runs/ttw_s1               # one table of both, medians over both
    python benchmarks/time_to_walk.py --judge-only runs/ttw/exact_s0                # judge a run folder's checkpoints
    python benchmarks/time_to_walk.py --seeds 0 1 2 --modes state_value --parallel 3 --out runs/sv   # samples only
    python benchmarks/time_to_walk.py --judge-when after --max-iterations 560 --save-interval 20 -- --task G1-Walk-Clock-Fast-v1 --symmetry both --tf32 --cuda-graph-step
    python benchmarks/time_to_walk.py --seeds 0 1 2 --modes exact --save-interval 20 -- --task G1-Walk-Clock-Fast-v2 --symmetry both --tf32 --cuda-graph-step
"""

import sys

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.time_to_walk import main

if __name__ == "__main__":
    sys.exit(main())
