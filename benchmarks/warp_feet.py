"""The benchmark ``isaac_adapter/app/bench/warp_feet.py`` (its docstring and ``--help`` say what it measures)::

    python benchmarks/warp_feet.py                    # Warp's CPU device (no GPU needed)
    python benchmarks/warp_feet.py --device cuda:0
"""

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.warp_feet import main

if __name__ == "__main__":
    main()
