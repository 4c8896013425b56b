"""The benchmark ``isaac_adapter/app/bench/train_gpu.py`` (its docstring and ``--help`` say what it measures)::

    python benchmarks/train_gpu.py --num-envs 4096 16384              # one GPU
    torchrun --nproc-per-node 2 benchmarks/train_gpu.py --num-envs 16384   # two GPUs, envs per GPU
    python benchmarks/train_gpu.py --task G1-Walk-Clock-Fast-v2 --num-envs 4096 65536 -- --symmetry both --tf32 --cuda-graph-step
    python benchmarks/train_gpu.py --task G1-Walk-Clock-Fast-v2 --nproc 2 --num-envs 16384   # torchrun, envs per GPU
"""

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.train_gpu import main

if __name__ == "__main__":
    main()
