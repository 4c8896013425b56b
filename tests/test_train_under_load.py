"""benchmarks/train_under_load.py: the CPU facts it reads and the medians it prints, by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from isaac_adapter.app.bench import train_under_load as tul  # noqa: E402


def test_cgroup_quota_v2_and_v1(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("1600000 100000\n")
    assert tul.cgroup_cpu_quota(tmp_path) == 16.0
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert tul.cgroup_cpu_quota(tmp_path) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("250000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert tul.cgroup_cpu_quota(v1) == 2.5
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert tul.cgroup_cpu_quota(v1) is None
    assert tul.cgroup_cpu_quota(tmp_path / "nowhere") is None


@pytest.mark.parametrize("text, count", [("0\n", 1), ("0-1\n", 2), ("0,64\n", 2), ("0-1,64-65\n", 4)])
def test_threads_per_core(tmp_path: Path, text: str, count: int) -> None:
    path = tmp_path / "thread_siblings_list"
    path.write_text(text)
    assert tul.threads_per_core(path) == count
    assert tul.threads_per_core(tmp_path / "missing") is None


def test_split_cpus_gives_the_trainer_the_first_ones() -> None:
    assert tul.split_cpus([0, 1, 2, 3, 5], 2) == ([0, 1], [2, 3, 5])
    for bad in (0, 5):
        with pytest.raises(ValueError, match=f"--trainer-cpus {bad}: pinning needs 1 to 4 of the 5 usable CPUs"):
            tul.split_cpus([0, 1, 2, 3, 5], bad)


def test_row_summary_skips_the_warmup_and_takes_medians() -> None:
    rows = [{"iteration": i, "perf/collection_s": 0.1 * i, "perf/learning_s": 0.01 * i, "perf/steps_per_s": 10.0 * i}
            for i in (4, 1, 3, 2, 5)]
    summary = tul.row_summary(rows, warmup=2)  # iterations 3, 4, 5
    assert summary == {"collection_s": pytest.approx(0.4), "learning_s": pytest.approx(0.04),
                       "steps_per_s": pytest.approx(40.0), "iterations": 3}
    assert tul.row_summary(rows, warmup=5)["learning_s"] is None


def test_table_compares_with_the_row_alone() -> None:
    results = [
        {"row": "alone", "trainer_cpus": 16, "trainer_threads": None, "collection_s": 0.085, "learning_s": 0.042,
         "steps_per_s": 400_000.0, "iterations": 50},
        {"row": "judges-pinned", "trainer_cpus": 4, "trainer_threads": None, "collection_s": 0.085,
         "learning_s": 0.127, "steps_per_s": 240_000.0, "iterations": 50},
    ]
    lines = tul.table(results, workers=4).splitlines()
    assert lines[2].split() == ["alone", "-", "16", "default", "85.0", "42.0", "400,000", "1.00"]
    assert lines[3].split() == ["judges-pinned", "4", "judges", "4", "default", "85.0", "127.0", "240,000", "0.60"]


def test_its_judges_get_the_walking_gates_settings() -> None:
    """The benchmark's parsed flags give the judges the walking gate (it has no ``--judge``)."""
    from isaac_adapter.app.bench import time_to_walk as ttw

    a, _ = tul.parse_args(["--gate-starts", "3", "--gate-seed", "7", "--trainer-cpus", "1"])
    assert ttw.gate_settings(a) == {"starts": 3, "horizon_s": a.gate_horizon_s, "seed": 7}
