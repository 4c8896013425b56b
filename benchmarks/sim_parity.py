"""The benchmark ``isaac_adapter/app/bench/sim_parity.py`` (its docstring and ``--help`` say what it measures)::

    python benchmarks/sim_parity.py sample docs/checkpoints/g1_clock_it1296.pt --out STATES.npz
    python benchmarks/sim_parity.py compare STATES.npz [--json OUT.json]
    python benchmarks/sim_parity.py inspect
"""

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.sim_parity import main

if __name__ == "__main__":
    main()
