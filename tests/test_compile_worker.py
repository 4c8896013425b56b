"""The parent's side of MuJoCo Warp's compile workers (``backends.compile_worker``), which needs
neither Warp nor a GPU: a worker that hangs is stopped at the timeout and named in one line."""

from __future__ import annotations

import pytest

pytest.importorskip("mujoco")


def test_a_compile_worker_past_the_timeout_is_stopped_and_named(tmp_path, capsys) -> None:
    import subprocess
    import sys

    from isaac_adapter.backends.compile_worker import CompileProcesses

    (tmp_path / "share_1.log").write_text("")
    hung = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    assert CompileProcesses(tmp_path, [hung]).wait(timeout_s=0.5) == set()
    assert hung.returncode is not None  # stopped, not left running
    assert capsys.readouterr().err.strip() == ("warning: Warp compile worker 1 of 1 exited with nothing, stopped "
                                               "after 0.5 s (no output); its modules compile in this process")
    assert not tmp_path.exists()  # the workers' folder is removed
