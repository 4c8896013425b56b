"""benchmarks/physics_settings.py: its helpers against hand-computed values, and one tiny CPU run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

from isaac_adapter.app.bench import physics_settings as ps  # noqa: E402

SCRIPT = REPO / "benchmarks" / "physics_settings.py"


# -- settings ------------------------------------------------------------------------------------


def test_parse_setting_reads_every_key() -> None:
    s = ps.parse_setting("dt=0.004,dec=5,it=3,ls=4")
    assert s == ps.Setting(0.004, 5, 3, 4)
    assert s.policy_dt == pytest.approx(0.02)
    assert s.label() == "dt 0.004 x5, it 3, ls 4"
    assert s.config_overrides() == {"sim_dt": 0.004, "decimation": 5, "solver_iterations": 3, "ls_iterations": 4,
                                    "model_file_sensors": False, "solver": None}
    with_file = ps.parse_setting("dt=0.004,dec=5,sensors=file")
    assert with_file.file_sensors and with_file.config_overrides()["model_file_sensors"]
    assert with_file.label() == "dt 0.004 x5, it file, ls file, file sensors"
    assert ps.parse_setting("dt=0.004,dec=5,sensors=task") == ps.Setting(0.004, 5)
    cg = ps.parse_setting("dt=0.01,dec=2,solver=cg,it=20")
    assert cg == ps.Setting(0.01, 2, 20, None, solver="cg")
    assert cg.label() == "dt 0.01 x2, cg, it 20, ls file"
    assert cg.config_overrides()["solver"] == "cg"
    assert ps.parse_setting("dt=0.01,dec=2,solver=file") == ps.Setting(0.01, 2)


def test_parse_setting_solver_budget_defaults_to_the_file() -> None:
    assert ps.parse_setting("dt=0.005,dec=4") == ps.Setting(0.005, 4, None, None)
    # spaces, a trailing comma and an explicit "file" are accepted; the order of keys is free
    s = ps.parse_setting(" ls = 2 , dt=0.01, dec=2, it=file, ")
    assert s == ps.Setting(0.01, 2, None, 2)
    assert s.label() == "dt 0.01 x2, it file, ls 2"
    # the file's solver and budget written out: (5, 8, newton) fills only what the setting left open
    assert s.resolved(5, 8, "newton") == ps.Setting(0.01, 2, 5, 2, solver="newton")
    assert ps.parse_setting("dt=0.005,dec=4").resolved(5, 8, "newton") == \
        ps.parse_setting("dt=0.005,dec=4,it=5,ls=8,solver=newton")
    assert ps.parse_setting("dt=0.005,dec=4,solver=cg").resolved(5, 8, "newton").solver == "cg"


@pytest.mark.parametrize("text, message", [
    ("dt=0.005", "dec required"),
    ("dec=4,it=3", "dt required"),
    ("it=3", "dt and dec required"),
    ("dt=0.005,dec=4,iters=3", "unknown key 'iters'"),
    ("dt=0.005,dec=4,dec=5", "dec given twice"),
    ("dt=0.005,dec=0", "dec must be a positive integer"),
    ("dt=0.005,dec=2.5", "dec must be a positive integer"),
    ("dt=0.005,dec=4,it=-1", "it must be a positive integer"),
    ("dt=fast,dec=4", "dt must be a number"),
    ("dt=0,dec=4", "dt must be positive"),
    ("dt0.005,dec=4", "expected key=value"),
    ("dt=,dec=4", "expected key=value"),
    ("dt=0.005,dec=4,sensors=imu", "sensors must be task or file"),
    ("dt=0.005,dec=4,solver=pgs", "solver must be newton, cg or file"),
])
def test_parse_setting_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ps.parse_setting(text)


def test_default_settings_parse_and_keep_the_50_hz_policy() -> None:
    settings = [ps.parse_setting(text) for text in ps.DEFAULT_SETTINGS]
    assert len(settings) == 6
    assert all(s.policy_dt == pytest.approx(0.02) for s in settings)


# -- arithmetic ----------------------------------------------------------------------------------


def test_rms_by_hand() -> None:
    assert ps.rms(np.array([3.0, 4.0])) == pytest.approx(math.sqrt(12.5))  # (9 + 16) / 2
    assert ps.rms(np.array([[1.0, -1.0], [1.0, -1.0]])) == 1.0
    assert math.isnan(ps.rms(np.zeros(0)))


def test_rms_diff_by_hand() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[1.0, 0.0], [0.0, 4.0]])
    assert ps.rms_diff(a, b) == pytest.approx(math.sqrt(13 / 4))  # differences 0, 2, 3, 0
    assert ps.rms_diff(a, a) == 0.0
    with pytest.raises(ValueError, match="shapes differ"):
        ps.rms_diff(a, b[0])


def test_cap_share_by_hand() -> None:
    assert ps.cap_share(np.array([[5, 3], [5, 1]]), 5) == 0.5
    assert ps.cap_share(np.array([2, 3, 4]), 3) == pytest.approx(2 / 3)  # 3 and 4 both count (>= cap)
    assert ps.cap_share(np.array([1, 1]), 2) == 0.0
    assert math.isnan(ps.cap_share(np.zeros(0, dtype=int), 5))


def test_spread_by_hand() -> None:
    assert ps.spread([1.0, 2.0, 6.0], "{:.1f}") == "3.0 (1.0..6.0)"
    assert ps.spread([0.25], "{:.3f}") == "0.250 (0.250..0.250)"


def _row(label: str, us: float, passed: bool) -> dict:
    lines = [{"name": name, "value": 0.5, "passed": passed or i > 0} for i, (name, _, _) in enumerate(ps._GATE_COLUMNS)]
    return {"label": label, "joint_vel_rms_diff": 0.0, "joint_vel_rms_diff_p99": 0.0, "root_lin_vel_rms_diff": 0.0,
            "solver_iter_mean": 2.5, "solver_iterations": 5, "solver_at_cap_share": 0.25, "us_per_env_step": us,
            "gate": {"passed": passed, "lines": lines}}


def test_format_table_costs_against_the_first_row_and_marks_failing_lines() -> None:
    table = ps.format_table([_row("ref", 200.0, True), _row("cheap", 50.0, False)]).splitlines()
    assert len(table) == 4 and table[0].startswith("| setting")
    assert "1.00x" in table[2] and "PASS" in table[2] and "*" not in table[2]
    assert "0.25x" in table[3] and "FAIL (1)" in table[3] and "0*" in table[3]  # the falls line failed
    assert "2.50/5" in table[2] and "25.0 %" in table[2]


# -- the script ----------------------------------------------------------------------------------


def test_script_smoke(tmp_path: Path) -> None:
    out = tmp_path / "ps.json"
    cmd = [sys.executable, str(SCRIPT), "--num-envs", "2", "--seconds", "0.2", "--gate-starts", "1",
           "--gate-horizon-s", "0.2", "--gate-seeds", "0", "1", "--physics-threads", "1",
           "--settings", "dt=0.005,dec=4", "dt=0.005,dec=4,it=5,ls=8", "dt=0.004,dec=5,it=2,ls=2", "dt=0.01,dec=2",
           "--json", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "bit for bit: yes" in proc.stdout
    assert "GPU throughput is measured separately" in proc.stdout
    record = json.loads(out.read_text())
    # the reference first; "it=5,ls=8" is the file's budget, i.e. the reference again, and is dropped
    assert [r["label"] for r in record["rows"]] == [
        "dt 0.005 x4, it file, ls file", "dt 0.004 x5, it 2, ls 2", "dt 0.01 x2, it file, ls file"]
    ref, cheap = record["rows"][0], record["rows"][1]
    assert ref["joint_vel_rms_diff"] == 0.0 and ref["root_lin_vel_rms_diff"] == 0.0
    assert record["scale"]["samples"] == 2 * 10 and record["scale"]["reproduced"]
    assert cheap["solver_iterations"] == 2 and 0.0 <= cheap["solver_at_cap_share"] <= 1.0
    assert all(r["us_per_env_step"] > 0 for r in record["rows"])
    assert set(ref["gate_seeds"]) == {"0", "1"} and len(ref["gate"]["lines"]) == 6
    assert ref["gate"]["config"]["horizon_s"] == 0.2


def test_script_rejects_another_policy_step(capsys) -> None:
    # main() as the script calls it (test_script_smoke runs the script as a process)
    with pytest.raises(SystemExit) as stop:
        ps.main(["--settings", "dt=0.005,dec=5"])
    assert stop.value.code == 2
    assert "policy step 0.025 s, the checkpoint's is 0.02 s" in capsys.readouterr().err
