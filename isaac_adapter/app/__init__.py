"""The application: train, play and evaluate the registered tasks, as Isaac Lab's ``train.py`` /
``play.py`` and mjlab's ``train`` / ``play`` / ``list-envs`` do::

    python -m isaac_adapter.app train --task G1-Walk-Clock-v0 --num_envs 4096 --max_iterations 600
    python -m isaac_adapter.app train --resume --load_run 2026-11-30.* --checkpoint model_500.pt
    python -m isaac_adapter.app play docs/checkpoints/g1_clock_it1296.pt
    python -m isaac_adapter.app eval docs/checkpoints/g1_clock_it1296.pt --num_envs 32
    python -m isaac_adapter.app list

Modules: :mod:`~isaac_adapter.app.args` (every flag, declared once), :mod:`~isaac_adapter.app.envs`
(building envs on each simulator), :mod:`~isaac_adapter.app.train`, :mod:`~isaac_adapter.app.play`,
:mod:`~isaac_adapter.app.eval`, :mod:`~isaac_adapter.app.run_dir` (run folders, ``--resume``),
:mod:`~isaac_adapter.app.overrides` (``env.*`` / ``agent.*`` overrides) and
:mod:`~isaac_adapter.app.cli` (the subcommands, and ``examples/g1_walk.py``'s flags).
"""

import ctypes.util
import os
import sys
import time

STARTED = time.perf_counter()  # before the heavy imports: the trainer's startup line counts them


def headless_rendering(argv: list[str]) -> None:
    """Pick EGL for MuJoCo's offscreen rendering when ``argv`` may render (play, ``--play``,
    ``--replay``, ``--video``, and training, which ends with a clip of a policy that walks): MuJoCo
    reads ``MUJOCO_GL`` when it is first imported, so the entry points call this before importing
    anything else."""
    if argv[:1] in (["eval"], ["list"]) or "--eval" in argv or any(a.startswith("--eval=") for a in argv):
        return
    # Without libEGL, MuJoCo's EGL backend fails inside `import mujoco` (not as an ImportError), so
    # training could not start; left unset, a clip asked for there says instead what is missing.
    if sys.platform.startswith("linux") and ctypes.util.find_library("EGL") is None:
        return
    os.environ.setdefault("MUJOCO_GL", "egl")
