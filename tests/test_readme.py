"""The README's first example runs as written, and its printed claim holds for several seeds."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def use_snippet() -> str:
    section = README.read_text().split("## Use", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_use_snippet_learns_the_value_it_prints(seed, tmp_path, monkeypatch):
    code = use_snippet().replace("cfg = RunnerConfig(", f"cfg = RunnerConfig(seed={seed}, console=False,")
    monkeypatch.chdir(tmp_path)  # it writes runs/demo/
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    value = float(re.search(r"V = ([\d.]+), expected 1 / \(1 - 0.98\) = 50", out.getvalue()).group(1))
    assert abs(value - 50.0) < 0.05 * 50.0, value
    assert (tmp_path / "runs" / "demo" / "actor.onnx").is_file()
