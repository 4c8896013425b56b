"""Older import path of :mod:`isaac_adapter.app.run_dir` (run folders belong to the application)."""

from isaac_adapter.app.run_dir import *  # noqa: F401,F403
from isaac_adapter.app.run_dir import CHECKPOINT_PATTERN, checkpoint_iteration, find_checkpoint, new_run_dir  # noqa: F401
from isaac_adapter.app.run_dir import write_git_state, write_params  # noqa: F401
