"""``python benchmarks/startup.py --help`` says what it measures and how to run it; the code is
:mod:`isaac_adapter.app.bench.startup`, where the tests import it from."""

import _common  # noqa: F401  (puts the repository root on sys.path)

from isaac_adapter.app.bench.startup import main

if __name__ == "__main__":
    main()
