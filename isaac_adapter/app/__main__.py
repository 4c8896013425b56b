"""``python -m isaac_adapter.app {train,play,eval,list}``."""

import sys

from isaac_adapter.app import headless_rendering

headless_rendering(sys.argv[1:])  # before MuJoCo is imported

from isaac_adapter.app.cli import main  # noqa: E402

main()
