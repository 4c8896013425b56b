"""scripts/isaaclab_offline.sh unpack: archives checked against the MANIFEST before anything is
unpacked, and a missing or damaged part refused in one line that says what to copy."""

from __future__ import annotations

import hashlib
import io
import lzma
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "isaaclab_offline.sh"

pytestmark = pytest.mark.skipif(not all(shutil.which(tool) for tool in ("bash", "xz", "tar", "sha256sum")),
                                reason="needs bash, xz, tar and sha256sum")


def pack(out: Path, name: str, files: dict[str, bytes], parts: int) -> bytes:
    """What ``pack`` writes for one archive: an xz'd tar in ``parts`` pieces and its MANIFEST line."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    blob = lzma.compress(raw.getvalue())
    (out / "parts").mkdir(parents=True, exist_ok=True)
    size = -(-len(blob) // parts)
    for k in range(parts):
        (out / "parts" / f"{name}.{k:02d}").write_bytes(blob[k * size:(k + 1) * size])
    with (out / "MANIFEST").open("a") as manifest:
        manifest.write(f"{name} {parts} {hashlib.sha256(blob).hexdigest()}\n")
    return blob


def unpack(out: Path, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "unpack", str(out), str(dest)], capture_output=True, text=True,
                          timeout=60)


def test_unpack_puts_every_archive_into_dest(tmp_path: Path) -> None:
    out = tmp_path / "out"
    pack(out, "isaaclab", {"isaaclab-packages/isaaclab/__init__.py": b"x = 1\n"}, parts=3)
    pack(out, "g1", {"g1-model/g1.xml": b"<mujoco/>", "assets/manifest.json": b"{}"}, parts=2)
    done = unpack(out, tmp_path / "dest")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dest/isaaclab-packages/isaaclab/__init__.py").read_bytes() == b"x = 1\n"
    assert (tmp_path / "dest/g1-model/g1.xml").read_bytes() == b"<mujoco/>"
    assert (tmp_path / "dest/assets/manifest.json").read_bytes() == b"{}"


def test_a_missing_or_damaged_part_is_one_line_and_nothing_of_it_is_unpacked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    pack(out, "isaaclab", {"isaaclab-packages/a.py": b"a\n"}, parts=2)
    damaged = out / "parts" / "isaaclab.01"
    damaged.write_bytes(damaged.read_bytes()[:-1] + b"\0")
    done = unpack(out, tmp_path / "dest")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "isaaclab's parts do not match the MANIFEST" in done.stderr
    assert "copy them again" in done.stderr
    assert not (tmp_path / "dest" / "isaaclab-packages").exists()
    damaged.unlink()
    done = unpack(out, tmp_path / "dest")
    assert done.returncode == 1
    assert done.stderr.strip() == (f"isaaclab_offline: isaaclab has 1 of its 2 parts in {out}/parts: "
                                   "copy the missing ones")


def test_unpack_without_a_manifest_says_what_to_copy(tmp_path: Path) -> None:
    done = unpack(tmp_path / "nothing", tmp_path / "dest")
    assert done.returncode == 1
    assert done.stderr.strip() == f"isaaclab_offline: no {tmp_path}/nothing/MANIFEST: copy pack's whole OUT folder"


def gather(transfer: Path, out: Path, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "gather", str(transfer), str(out), str(dest)], capture_output=True,
                          text=True, timeout=60)


def test_gather_keeps_each_transfers_parts_and_unpacks_once_every_part_is_there(tmp_path: Path) -> None:
    """Two transfers, each with the MANIFEST and some parts (the first's one folder down): the first
    is kept and counted, nothing unpacked; the second completes both archives and unpacks them."""
    full = tmp_path / "full"
    pack(full, "isaaclab", {"isaaclab-packages/isaaclab/__init__.py": b"x = 1\n"}, parts=3)
    pack(full, "g1", {"g1-model/g1.xml": b"<mujoco/>"}, parts=2)
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "p1").mkdir(parents=True)
    second.mkdir()
    for transfer, names in ((first / "p1", ("isaaclab.00", "isaaclab.01")), (second, ("isaaclab.02", "g1.00", "g1.01"))):
        for name in names:
            shutil.copy(full / "parts" / name, transfer / name)
    for transfer in (first, second):
        shutil.copy(full / "MANIFEST", transfer / "MANIFEST")
    out, dest = tmp_path / "stash", tmp_path / "dest"
    done = gather(first, out, dest)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"isaaclab_offline: isaaclab: 2 of its 3 parts in {out}/parts",
                                        f"isaaclab_offline: g1: 0 of its 2 parts in {out}/parts"]
    assert not dest.exists()
    done = gather(second, out, dest)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [f"isaaclab_offline: isaaclab: 3 of its 3 parts in {out}/parts",
                                            f"isaaclab_offline: g1: 2 of its 2 parts in {out}/parts"]
    assert (dest / "isaaclab-packages/isaaclab/__init__.py").read_bytes() == b"x = 1\n"
    assert (dest / "g1-model/g1.xml").read_bytes() == b"<mujoco/>"


def test_gather_without_a_manifest_says_to_carry_it(tmp_path: Path) -> None:
    (tmp_path / "transfer").mkdir()
    done = gather(tmp_path / "transfer", tmp_path / "out", tmp_path / "dest")
    assert done.returncode == 1
    assert done.stderr.strip() == (f"isaaclab_offline: no {tmp_path}/transfer/MANIFEST: carry the MANIFEST with "
                                   "every transfer's parts")
