"""Helpers of the benchmark scripts: ``python benchmarks/<script>.py`` puts ``benchmarks/`` on
``sys.path``, not the repository root, so importing this first puts the root there; the helpers
themselves are :mod:`isaac_adapter.app.bench.common`."""

import os
import sys

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)

from isaac_adapter.app.bench.common import *  # noqa: E402,F401,F403
from isaac_adapter.app.bench.common import __all__  # noqa: E402,F401
