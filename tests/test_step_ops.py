"""The start-up and per-step cost counters of the benchmarks: step_ops.py counts the tensor
operations that compute (a kernel launch each on a GPU), checked on hand-counted cases and on the
labels that split a step by hook; warp_compile.py reads Warp's module-load lines and keeps the
rows it measured when another fails."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from isaac_adapter.app.bench.step_ops import OpCounter


def _count(fn) -> int:
    counter = OpCounter()
    with counter:
        fn()
    return sum(counter.counts.values())


def test_views_and_no_op_casts_are_not_counted_computations_are() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    assert _count(lambda: x.view(-1)) == 0
    assert _count(lambda: x[1].unsqueeze(0)) == 0
    assert _count(lambda: x.to(torch.float32)) == 0  # already float32: the same tensor back
    assert _count(lambda: x.reshape(-1)) == 0  # contiguous: a view
    assert _count(lambda: x.t().reshape(-1)) == 1  # not viewable: a copy
    assert _count(lambda: x.to(torch.float64)) == 1
    assert _count(lambda: x + 1) == 1
    assert _count(lambda: (x * 2).sum()) == 2
    y = x.clone()
    assert _count(lambda: y.add_(1)) == 1  # in place, so it shares its input's storage, and counts


def test_labels_split_the_count_by_the_innermost_labelled_call() -> None:
    class Part:
        def inner(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 + 1  # 2 operations

        def outer(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x).sum()  # 1 more of its own

    part, x = Part(), torch.ones(5)
    counter = OpCounter()
    counter.label(part, "inner", "inner")
    counter.label(part, "outer", "outer")
    with counter:
        part.outer(x)
        x.neg()  # outside every label
    assert counter.counts == {"inner": 2, "outer": 1, "(Runner bookkeeping)": 1}


def test_warp_load_lines_split_into_named_modules_and_per_model_kernels() -> None:
    from isaac_adapter.app.bench.warp_compile import split_loads

    log = "\n".join([
        "Module mujoco_warp._src.smooth 439a86e load on device 'cuda:0' took 8286.02 ms  (compiled)",
        "Module _mul_m__locals___mul_m_2eb0ef19 2c35d76 load on device 'cuda:0' took 198.85 ms  (compiled)",
        "Module mujoco_warp._src.sensor 6b9f021 load on device 'cuda:0' took 1500.00 ms  (compiled)",
        "Module mujoco_warp._src.io 1a2b3c4 load on device 'cuda:0' took 12.50 ms  (cached)",
        "Warp 1.19.0 initialized:",
    ])
    split = split_loads(log)
    assert split == pytest.approx({"named_compiled_s": 9.78602, "named_n": 2, "per_model_compiled_s": 0.19885,
                                   "per_model_n": 1, "cached_s": 0.0125, "cached_n": 1})


def test_a_failed_warp_compile_row_is_reported_and_the_other_rows_are_kept(monkeypatch, capsys) -> None:
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    row = {"device": "cuda:0", "preload_workers": 0, "cache": "empty", "preload_s": 0.0, "build_s": 47.7,
           "first_step_s": 0.1, "total_s": 47.8, "named_compiled_s": 13.0, "named_n": 8,
           "per_model_compiled_s": 33.1, "per_model_n": 46, "cached_s": 0.0, "cached_n": 0,
           "optimization_level": 1, "box_box": "primitive", "output": "cubin", "toolkit": [13, 4],
           "driver": [13, 0]}
    levels, driver_caches = [], []

    def fake_run(cmd, **kwargs):  # the row with preload workers 16 breaks, the other prints its ROW line
        levels.append(cmd[cmd.index("--optimization-level") + 1])
        cache = kwargs["env"]["CUDA_CACHE_PATH"]  # the driver's JIT cache: empty, as on a fresh machine
        assert os.path.isdir(cache) and not os.listdir(cache) and cache not in driver_caches
        driver_caches.append(cache)
        workers = cmd[cmd.index("--preload-workers") + 1]
        if workers == "16":
            return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="Traceback\nRuntimeError: error 901\n")
        return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    with pytest.raises(SystemExit, match="1 of 2 rows failed"):
        warp_compile.main(["--device", "cuda:0", "--preload-workers", "16", "0", "--optimization-level", "1"])
    assert levels == ["1", "1"]  # every row's child compiles at the level asked for
    assert len(driver_caches) == 2
    out = capsys.readouterr().out
    assert ("--preload-workers 16 --box-box primitive --adjoints off --cuda-output cubin --compile-workers 0: "
            "the run failed (exit 1): "
            "['RuntimeError: error 901']") in out
    assert "device cuda:0, kernel cache empty per row (and the driver JIT cache), optimisation -O1" in out
    table_row = [ln.split() for ln in out.splitlines() if ln.startswith("0 ")]
    assert table_row == [["0", "-", "primitive", "-", "cubin", "(toolkit", "13.4,", "driver", "13.0)", "0.0", "47.7", "0.1", "47.8",
                          "8", "/", "13.0", "46", "/", "33.1", "0", "/", "0.0"]]


def test_warp_compile_measures_one_row_per_foot_collider(monkeypatch, capsys) -> None:
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    asked = []

    def fake_run(cmd, **kwargs):  # each child reports the collider it was asked for
        box_box = cmd[cmd.index("--box-box") + 1]
        asked.append(box_box)
        row = {"device": "cpu", "preload_workers": 0, "cache": "empty", "box_box": box_box, "output": "native",
               "preload_s": 0.0, "build_s": 40.0 if box_box == "convex" else 30.0, "first_step_s": 1.0,
               "total_s": 41.0 if box_box == "convex" else 31.0, "named_compiled_s": 20.0, "named_n": 8,
               "per_model_compiled_s": 15.0, "per_model_n": 39, "cached_s": 0.0, "cached_n": 0}
        return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    warp_compile.main(["--preload-workers", "0", "--box-box", "convex", "primitive"])
    assert asked == ["convex", "primitive"]
    rows = [ln.split()[:5] for ln in capsys.readouterr().out.splitlines() if ln.startswith("0 ")]
    assert rows == [["0", "-", "convex", "-", "native"], ["0", "-", "primitive", "-", "native"]]


def test_warp_compile_preload_via_makes_a_row_per_way_only_where_there_is_a_preload(monkeypatch, capsys) -> None:
    """``--preload-via launch force_load`` with preload workers 0 and 16: one row without a preload
    (there is nothing to load either way), two with it; each child is asked for its way, and a failed
    row names it."""
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    asked = []

    def fake_run(cmd, **kwargs):  # Warp's own call breaks with 16 workers, the rest print their ROW line
        workers, via = int(cmd[cmd.index("--preload-workers") + 1]), cmd[cmd.index("--preload-via") + 1]
        asked.append((workers, via))
        if workers and via == "force_load":
            return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="RuntimeError: error 901\n")
        row = {"device": "cuda:0", "preload_workers": workers, "preload_via": via if workers else None,
               "compile_workers": 0, "cache": "empty", "box_box": "primitive", "adjoints": True, "output": "native",
               "preload_s": 6.0 if workers else 0.0, "build_s": 30.0, "first_step_s": 0.1, "total_s": 36.1,
               "named_compiled_s": 0.0, "named_n": 0, "per_model_compiled_s": 0.0, "per_model_n": 0,
               "cached_s": 0.0, "cached_n": 0}
        return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    with pytest.raises(SystemExit, match="1 of 3 rows failed"):
        warp_compile.main(["--device", "cuda:0", "--preload-workers", "0", "16", "--preload-via", "launch",
                           "force_load", "--adjoints", "on"])
    assert asked == [(0, "launch"), (16, "launch"), (16, "force_load")]
    out = capsys.readouterr().out
    assert "--preload-workers 16 --preload-via force_load --box-box primitive --adjoints on" in out
    rows = [ln.split()[:3] for ln in out.splitlines() if ln[:3] in ("0  ", "16 ")]
    assert rows == [["0", "0", "primitive"], ["16", "0", "primitive"]]
    assert warp_compile._preload({"preload_workers": 16, "preload_via": "force_load"}) == "16 (wp.force_load)"


def test_warp_compile_measures_one_row_per_compile_workers(monkeypatch, capsys) -> None:
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    asked = []

    def fake_run(cmd, **kwargs):  # each child reports the workers it was asked for
        workers = int(cmd[cmd.index("--compile-workers") + 1])
        asked.append(workers)
        row = {"device": "cpu", "preload_workers": 0, "compile_workers": workers, "cache": "empty",
               "box_box": "primitive", "adjoints": False, "output": "native", "preload_s": 0.0,
               "build_s": 20.0 if workers else 30.0, "first_step_s": 0.1 if workers else 9.0, "total_s": 0.0,
               "named_compiled_s": 0.0, "named_n": 0, "per_model_compiled_s": 0.0, "per_model_n": 0,
               "cached_s": 0.0, "cached_n": 0}
        return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    warp_compile.main(["--preload-workers", "0", "--compile-workers", "0", "16"])
    assert asked == [0, 16]
    rows = [ln.split()[:2] for ln in capsys.readouterr().out.splitlines() if ln.startswith("0 ")]
    assert rows == [["0", "0"], ["0", "16"]]
    with pytest.raises(SystemExit):
        warp_compile.main(["--compile-workers", "-1"])
    assert "--compile-workers must be >= 0" in capsys.readouterr().err
    assert asked == [0, 16]  # refused before any row ran
    warp_compile.main(["--sim", "isaaclab", "--preload-workers", "0", "--compile-workers", "4"])
    assert asked == [0, 16, 4]  # and on Isaac Lab's env too


def test_warp_compile_via_threads_and_processes_makes_a_row_each_only_with_workers(monkeypatch, capsys) -> None:
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    asked = []

    def fake_run(cmd, **kwargs):  # each child reports how it was asked to compile
        workers, via = int(cmd[cmd.index("--compile-workers") + 1]), cmd[cmd.index("--compile-via") + 1]
        asked.append((workers, via))
        row = {"device": "cpu", "preload_workers": 0, "compile_workers": workers, "cache": "empty",
               "box_box": "primitive", "adjoints": False, "output": "native", "preload_s": 0.0, "build_s": 30.0,
               "first_step_s": 0.1, "total_s": 30.1, "named_compiled_s": 0.0, "named_n": 0,
               "per_model_compiled_s": 0.0, "per_model_n": 0, "cached_s": 0.0, "cached_n": 0,
               "compile_via": via if workers > 1 else None, "compile_misses": 2 if via == "processes" else 0}
        return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    warp_compile.main(["--preload-workers", "0", "--compile-workers", "0", "16", "--compile-via", "threads", "processes"])
    assert asked == [(0, "threads"), (16, "threads"), (16, "processes")]  # no workers: one row
    rows = [ln.split()[:4] for ln in capsys.readouterr().out.splitlines() if ln.startswith("0 ")]
    # the misses beside the processes (the modules no worker compiled)
    assert rows == [["0", "0", "-", "primitive"], ["0", "16", "threads", "primitive"], ["0", "16", "processes", "(2)"]]
    with pytest.raises(SystemExit):
        warp_compile.main(["--sim", "isaaclab", "--compile-workers", "16", "--compile-via", "processes"])
    assert "--compile-via processes is MuJoCo Warp's; Isaac Lab compiles with threads" in capsys.readouterr().err
    assert len(asked) == 3  # refused before any row ran


def test_warp_compile_measures_one_row_with_adjoints_and_one_without(monkeypatch, capsys) -> None:
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    asked = []

    def fake_run(cmd, **kwargs):  # each child reports the adjoints and simulator it was asked for
        adjoints, sim = cmd[cmd.index("--adjoints") + 1], cmd[cmd.index("--sim") + 1]
        asked.append((adjoints, sim))
        row = {"device": "cpu", "preload_workers": 0, "cache": "empty", "box_box": "-", "output": "native",
               "adjoints": adjoints == "on", "sim": sim, "preload_s": 0.0, "build_s": 37.0 if adjoints == "on" else 21.4,
               "first_step_s": 19.0, "total_s": 56.0 if adjoints == "on" else 40.4, "named_compiled_s": 0.0,
               "named_n": 0, "per_model_compiled_s": 0.0, "per_model_n": 0, "cached_s": 0.0, "cached_n": 0}
        return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    warp_compile.main(["--sim", "isaaclab", "--preload-workers", "0", "--adjoints", "on", "off"])
    assert asked == [("on", "isaaclab"), ("off", "isaaclab")]
    out = capsys.readouterr().out
    assert "on Isaac Lab (G1WalkDirectEnv), 64 envs" in out
    rows = [ln.split()[:7] for ln in out.splitlines() if ln.startswith("0 ")]
    assert rows == [["0", "-", "-", "on", "native", "0.0", "37.0"], ["0", "-", "-", "off", "native", "0.0", "21.4"]]


def test_warp_compile_adds_a_row_without_the_build_preload_only_where_there_is_one(monkeypatch, capsys) -> None:
    """``--build-preload on off`` on Isaac Lab: with compile workers a row each, with the env's build
    preload and without; without compile workers (no preload either way) a single row."""
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    asked = []

    def fake_run(cmd, **kwargs):
        workers, preload = int(cmd[cmd.index("--compile-workers") + 1]), cmd[cmd.index("--build-preload") + 1]
        asked.append((workers, preload))
        row = {"device": "cpu", "preload_workers": 0, "cache": "empty", "box_box": "-", "output": "native",
               "adjoints": False, "sim": "isaaclab", "compile_workers": workers,
               "build_preload": (preload == "on") if workers else None, "preload_s": 0.0, "build_s": 40.0,
               "first_step_s": 1.0, "total_s": 41.0, "named_compiled_s": 0.0, "named_n": 0,
               "per_model_compiled_s": 0.0, "per_model_n": 0, "cached_s": 0.0, "cached_n": 0}
        return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    warp_compile.main(["--sim", "isaaclab", "--preload-workers", "0", "--compile-workers", "0", "2",
                       "--build-preload", "on", "off"])
    assert asked == [(0, "on"), (2, "on"), (2, "off")]
    rows = [ln.split()[:3] for ln in capsys.readouterr().out.splitlines() if ln.startswith("0 ")]
    assert rows == [["0", "0", "-"], ["0", "2", "on"], ["0", "2", "off"]]


def test_the_application_compiles_warp_kernels_without_adjoints_to_machine_code(monkeypatch) -> None:
    """PPO never differentiates through the physics: a Warp-based env is built with Warp's adjoint
    code off, and its CUDA kernels compiled to CUBIN (no driver JIT on a fresh machine); the MuJoCo
    CPU env leaves both settings alone."""
    wp = pytest.importorskip("warp")

    import isaac_adapter.tasks.g1_walk as g1_walk
    from isaac_adapter.app.envs import make_env
    from isaac_adapter.tasks.registry import get_task

    seen = []

    class Recorder:  # stands in for the env: what Warp would compile with when it is built
        def __init__(self, cfg, backend):
            seen.append((backend, wp.config.enable_backward, wp.config.cuda_output))

    monkeypatch.setattr(g1_walk, "G1WalkEnv", Recorder)
    monkeypatch.setattr(wp.config, "enable_backward", True)
    monkeypatch.setattr(wp.config, "cuda_output", None)
    spec = get_task("G1-Walk-Clock-Fast-v2")
    make_env(spec, "mujoco", "cpu", 2)
    make_env(spec, "warp", "cpu", 2)
    assert seen == [("mujoco", True, None), ("warp", False, "cubin")]


def test_the_training_start_row_runs_g1_walk_on_the_given_cache_and_splits_its_loads(monkeypatch, capsys) -> None:
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    row = {"device": "cpu", "preload_workers": 0, "cache": "given", "preload_s": 0.0, "build_s": 1.0,
           "first_step_s": 0.1, "total_s": 1.1, "named_compiled_s": 0.0, "named_n": 0,
           "per_model_compiled_s": 0.0, "per_model_n": 0, "cached_s": 0.5, "cached_n": 47}
    started = []

    def fake_run(cmd, **kwargs):  # the one-step row prints its ROW line; g1_walk.py prints load lines
        if "--one" in cmd:
            return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")
        started.append((cmd, kwargs["env"]["WARP_CACHE_PATH"]))
        log = ("Module mujoco_warp._src.smooth 439a86e load on device 'cpu' took 3000.00 ms  (compiled)\n"
               "Module _mul_m__locals___mul_m_2eb0ef19 2c35d76 load on device 'cpu' took 500.00 ms  (compiled)\n"
               "Module _other__locals___k_1 1a2b3c4 load on device 'cpu' took 250.00 ms  (compiled)\n")
        return subprocess.CompletedProcess(cmd, 0, stdout=log, stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    warp_compile.main(["--preload-workers", "0", "--training-start", "--cache", "/given/cache", "--num-envs", "32"])
    (cmd, cache), = started
    assert cache == "/given/cache"
    assert cmd[1].endswith("g1_walk.py") and cmd[cmd.index("--max_iterations") + 1] == "1"
    assert cmd[cmd.index("--num_envs") + 1] == "32" and cmd[cmd.index("--task") + 1] == "G1-Walk-Clock-Fast-v0"
    out = capsys.readouterr().out
    cells = out.strip().splitlines()[-1].split()  # the training start's table row, after its wall clock
    assert cells[1:] == ["1", "/", "3.0", "2", "/", "0.8", "0", "/", "0.0"]


def test_warp_compile_refuses_an_optimization_level_the_training_start_would_not_use(capsys) -> None:
    from isaac_adapter.app.bench import warp_compile

    with pytest.raises(SystemExit) as stop:
        warp_compile.main(["--training-start", "--optimization-level", "1"])
    assert stop.value.code == 2
    assert "--training-start runs g1_walk.py at Warp's default: run the two in separate commands" in capsys.readouterr().err


def test_warp_compile_reads_the_loads_of_a_training_log(tmp_path, capsys) -> None:
    from isaac_adapter.app.bench import warp_compile

    log = tmp_path / "train.log"
    log.write_text("Warp 1.19.0 initialized:\n"
                   "Module mujoco_warp._src.forward 39eb33c load on device 'cuda:0' took 14660.05 ms  (compiled)\n"
                   "Module ccd_kernel_builder__locals__ccd_kernel_3844b8d5 3844b8d load on device 'cuda:0' took 41541.36 ms  (compiled)\n"
                   "Module _solve_done__locals__kernel_acad9682 acad968 load on device 'cuda:0' took 218.78 ms  (compiled)\n"
                   "Module _next_time_builder__locals___next_time_4b70cbb3 4b70cbb load on device 'cuda:0' took 5.00 ms  (cached)\n"
                   "computation: 18,081 steps/s\n")
    warp_compile.main(["--from-log", str(log)])
    out = capsys.readouterr().out
    assert out.splitlines()[-2].split() == ["56.4", "1", "/", "14.7", "2", "/", "41.8", "1", "/", "0.0"]
    assert out.splitlines()[-1] == ("slowest: ccd_kernel_builder__locals__ccd_kernel_3844b8d5 41.5 s; "
                                    "mujoco_warp._src.forward 14.7 s; _solve_done__locals__kernel_acad9682 0.2 s")
    (tmp_path / "empty.log").write_text("no loads here\n")
    for path, why in ((tmp_path / "empty.log", "no Warp module load lines in it"), (tmp_path / "none.log", "No such file")):
        with pytest.raises(SystemExit, match=why):
            warp_compile.main(["--from-log", str(path)])


@pytest.mark.parametrize("flag, values, key, column", [
    ("--precompiled-headers", ("on", "off"), "precompiled_headers", "precompiled headers"),
    ("--solver", ("newton", "cg"), "solver", "solver"),
])
def test_warp_compile_measures_a_row_per_value_and_shows_the_column_only_off_the_default(
        monkeypatch, capsys, flag, values, key, column) -> None:
    """``--precompiled-headers on off`` / ``--solver newton cg``: each child is told which, and the
    table gains the column only when a row left the default (headers on, Newton)."""
    import json
    import subprocess

    from isaac_adapter.app.bench import warp_compile

    asked = []

    def fake_run(cmd, **kwargs):
        value = cmd[cmd.index(flag) + 1]
        asked.append(value)
        row = {"device": "cuda:0", "preload_workers": 0, "compile_workers": 16, "cache": "empty",
               "box_box": "primitive", "adjoints": False, "output": "native", "precompiled_headers": True,
               "solver": "newton", "preload_s": 0.0, "build_s": 33.1 if value == values[0] else 20.5,
               "first_step_s": 0.1, "total_s": 0.0, "named_compiled_s": 0.0, "named_n": 0,
               "per_model_compiled_s": 0.0, "per_model_n": 0, "cached_s": 0.0, "cached_n": 0}
        row[key] = value == "on" if key == "precompiled_headers" else value
        return subprocess.CompletedProcess(cmd, 0, stdout="ROW " + json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(warp_compile.subprocess, "run", fake_run)
    warp_compile.main(["--preload-workers", "0", "--compile-workers", "16", flag, *values])
    assert asked == list(values)
    out = capsys.readouterr().out
    assert column in out.splitlines()[-4]  # the table's header
    rows = [ln.split()[:8] for ln in out.splitlines() if ln.startswith("0 ")]
    assert rows == [["0", "16", "primitive", "off", values[0], "native", "0.0", "33.1"],
                    ["0", "16", "primitive", "off", values[1], "native", "0.0", "20.5"]]
    warp_compile.main(["--preload-workers", "0"])  # the defaults alone: no such column
    assert column not in capsys.readouterr().out.splitlines()[-3]


def test_a_warp_compile_row_sets_warps_precompiled_headers_flag_before_it_builds(monkeypatch) -> None:
    wp = pytest.importorskip("warp")
    from isaac_adapter.app.bench import warp_compile

    monkeypatch.setattr(warp_compile, "_build_and_step", lambda row, *a, **k: row.update(
        preload_s=0.0, build_s=0.0, first_step_s=0.0, flag=wp.config.use_precompiled_headers))
    names = ("use_precompiled_headers", "kernel_cache_dir", "optimization_level", "enable_backward", "cuda_output")
    before = {name: getattr(wp.config, name) for name in names}  # one_run sets them for its process
    try:
        assert warp_compile.one_run("cpu", 4, 0, None, precompiled_headers=False)["flag"] is False
        assert warp_compile.one_run("cpu", 4, 0, None)["flag"] is True
    finally:
        for name, value in before.items():
            setattr(wp.config, name, value)


def test_warp_compile_for_a_cuda_arch_prints_the_slowest_modules_and_the_rest(monkeypatch, capsys) -> None:
    """``--cuda-arch``: the slowest modules first with their shares and their code generation and
    compiler seconds, the others in one row, the total; an architecture that is not a compute
    capability stops before anything is built."""
    from isaac_adapter.app.bench import warp_compile

    built = []

    def fake_compile(arch, num_envs, solver):
        built.append((arch, num_envs, solver))
        # 20 .. 6 s, of which CUDA's compiler a quarter
        return [{"module": f"m{i}", "kernels": i + 1, "seconds": float(20 - i), "compiler_s": (20 - i) / 4}
                for i in range(15)]

    monkeypatch.setattr(warp_compile, "compile_for_arch", fake_compile)
    warp_compile.main(["--cuda-arch", "90", "--num-envs", "4", "--solver", "cg"])
    assert built == [(90, 4, "cg")]
    lines = capsys.readouterr().out.splitlines()
    assert "cg solver" in lines[0] and "compiled for sm_90" in lines[0]
    cells = [line.split() for line in lines[1:]
             if line.startswith(("m", "the other", "all")) and not line.startswith("module")]
    total = sum(range(6, 21))  # 195 s
    assert cells[0] == ["m0", "1", "20.00", f"{100 * 20 / total:.1f}", "15.00", "5.00"]
    assert len([c for c in cells if c[0].startswith("m")]) == 12
    assert cells[-2] == ["the", "other", "3", "modules", str(13 + 14 + 15), f"{8 + 7 + 6:.2f}", f"{100 * 21 / total:.1f}",
                         f"{21 * 3 / 4:.2f}", f"{21 / 4:.2f}"]
    assert cells[-1] == ["all", "15", "modules", str(sum(range(1, 16))), f"{total:.2f}", "100.0", f"{total * 3 / 4:.2f}",
                         f"{total / 4:.2f}"]
    with pytest.raises(SystemExit):
        warp_compile.main(["--cuda-arch", "9"])
    assert "--cuda-arch is a CUDA compute capability as one number (90 for sm_90), got 9" in capsys.readouterr().err
    assert built == [(90, 4, "cg")]  # refused before anything was built


def test_startup_times_each_step_in_a_fresh_process_and_names_what_is_not_installed(capsys) -> None:
    from isaac_adapter.app.bench import startup

    seconds = startup.one_process(["x = sum(range(10))", "import a_package_nobody_installed"])
    assert seconds[0] >= 0.0 and seconds[1] is None
    runs = [[1.0, None, 2.0], [0.5, None, 1.0], [0.7, None, 3.0]]  # the first process, then the others
    assert startup.table_rows(["a", "b", "c"], runs) == [
        ["a", "1.00", "0.60"], ["b", "not installed", "-"], ["c", "2.00", "2.00"], ["all", "3.00", "2.60"]]
    assert startup.table_rows(["a"], [[1.5]]) == [["a", "1.50", "1.50"], ["all", "1.50", "1.50"]]  # one process
    assert [name for name, _ in startup.steps_for("cuda:0")][-2:] == ["torch's CUDA start", "Warp's start"]
    assert len(startup.steps_for("cpu")) == len(startup.IMPORTS)
    for argv, message in ((["--repeats", "0"], "--repeats must be >= 1, got 0"),
                          (["--device", "tpu"], "--device is cpu or cuda, got 'tpu'")):
        with pytest.raises(SystemExit):
            startup.main(argv)
        assert message in capsys.readouterr().err
