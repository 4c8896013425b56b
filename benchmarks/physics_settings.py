"""The benchmark ``isaac_adapter/app/bench/physics_settings.py`` (its docstring and ``--help`` say what it measures)::

    python benchmarks/physics_settings.py
    python benchmarks/physics_settings.py --settings "dt=0.004,dec=5,it=3,ls=4" "dt=0.005,dec=4,it=2,ls=2"
    python benchmarks/physics_settings.py --json physics_settings.json
"""

import sys

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.physics_settings import main

if __name__ == "__main__":
    sys.exit(main())
