"""The README's first example runs as written, and its printed claim holds for several seeds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SEEDS = [0, 1, 2]


def use_snippet() -> str:
    section = README.read_text().split("## Use", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def snippet_runs(tmp_path_factory) -> dict[int, tuple[Path, subprocess.CompletedProcess]]:
    """The snippet once per seed, each in a fresh interpreter in a folder of its own (it writes runs/demo/),
    the three started together: each trains on one thread (as conftest.py sets), so the other cores
    are free for the next seed."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(path)}
    started = {}
    for seed in SEEDS:
        code = use_snippet().replace("cfg = RunnerConfig(", f"cfg = RunnerConfig(seed={seed}, console=False,")
        folder = tmp_path_factory.mktemp(f"seed{seed}")
        started[seed] = folder, subprocess.Popen([sys.executable, "-c", code], cwd=folder, env=env, text=True,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    runs = {}
    try:
        for seed, (folder, proc) in started.items():
            out, err = proc.communicate(timeout=600)
            runs[seed] = folder, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for _, proc in started.values():
            proc.kill()  # a no-op once it has exited
    return runs


@pytest.mark.parametrize("seed", SEEDS)
def test_use_snippet_learns_the_value_it_prints(seed, snippet_runs):
    folder, done = snippet_runs[seed]
    assert done.returncode == 0, done.stderr[-2000:]
    value = float(re.search(r"V = ([\d.]+), expected 1 / \(1 - 0.98\) = 50", done.stdout).group(1))
    assert abs(value - 50.0) < 0.05 * 50.0, value
    assert (folder / "runs" / "demo" / "actor.onnx").is_file()
