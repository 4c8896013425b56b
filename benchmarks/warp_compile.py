"""The benchmark ``isaac_adapter/app/bench/warp_compile.py`` (its docstring and ``--help`` say what it measures)::

    python benchmarks/warp_compile.py                                  # Warp's CPU device, a fresh kernel cache
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 0 16
    python benchmarks/warp_compile.py --device cuda:0 --cache /tmp/wc   # warm: the cache of an earlier run
    python benchmarks/warp_compile.py --preload-workers 0 --training-start   # and a whole training start
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 0 --optimization-level 1
    python benchmarks/warp_compile.py --preload-workers 0 --box-box convex primitive   # the feet's collider
    python benchmarks/warp_compile.py --from-log runs/ttw/exact_s0/train.log   # what a training run loaded
"""

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.warp_compile import main

if __name__ == "__main__":
    main()
