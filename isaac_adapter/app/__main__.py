"""``python -m isaac_adapter.app {train,play,eval,list}``."""

from isaac_adapter.app.cli import main

main()
