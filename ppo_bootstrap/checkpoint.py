"""Checkpoint files: one place that writes them, reads and checks them, and rebuilds the policy they hold.

A checkpoint is a ``torch.save`` dict. A full one (``Runner.save``) holds ``iteration``, ``env_device``,
``total_steps``, ``world_size``, ``policy`` (the :class:`ActorCritic` state dict), ``ppo``
(optimizer and learning rate), ``config`` (the ``RunnerConfig`` as a dict), the observations,
recurrent states, episode accumulators, env state and RNG states. A policy-only file (what
``docs/checkpoints`` ships) holds ``policy`` and ``config`` (and ``iteration``, ``total_steps``).
A file rsl-rl-lib wrote (:func:`is_rsl_rl`) is read and checked the same way; ``Runner.load``
converts it (:mod:`ppo_bootstrap.rsl_rl`).

* Integrity: :func:`save_atomic` adds ``checksum``, BLAKE2b digests of every tensor and array (named
  by their path, e.g. ``policy/actor.head.0.weight``) and one of every other value, computed on CPU
  copies at save and again at :func:`read`. Files written before checksums load with a warning that
  says "no checksum"; their tensors are checked against the CRC-32 torch wrote into the zip file.
  Before anything is unpickled, :func:`read` checks the pickle's own bytes against theirs.
* Values: the policy and optimizer tensors must be finite, at save and at read.
* Errors: whatever is wrong with a file (empty, truncated, foreign bytes, not a checkpoint, an
  incomplete one, a checksum mismatch, NaN or inf, a network of another shape) raises
  :class:`CheckpointError`, one line naming the file and the problem. A missing file stays a
  ``FileNotFoundError``.
* Disk errors: a write the disk refuses (full, failing, read-only) raises
  :class:`~ppo_bootstrap.disk.RunWriteError`, one line naming the file and the reason
  (``No space left on device (ENOSPC)``), and leaves nothing of it behind.
* Temporaries: a write goes through ``.<name>.tmp-<pid>`` beside the target; those that killed
  writers left are removed at the next save (:func:`remove_stale_temporaries`), never one that a
  live process is writing.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import re
import warnings
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ppo_bootstrap.disk import ErrorKeepingFile, RunWriteError
from ppo_bootstrap.env import ObsGroups, POLICY, critic_obs
from ppo_bootstrap.modules.actor_critic import ActorCritic, PolicyConfig

CHECKSUM = "checksum"
RESUME_KEYS = ("iteration", "total_steps", "policy", "ppo", "config", "obs", "states",
               "episode_return", "episode_length", "env", "rng")
"""What a full checkpoint holds besides ``world_size`` and ``checksum``."""
RNG_KEYS = ("torch", "cuda", "numpy", "python", "generator")
_ZIP_MAGIC = b"PK\x03\x04"
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)$")
_writing: set[Path] = set()  # temporaries this process is writing now


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message is one line naming the file and the problem."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"checkpoint {os.fspath(path)}: {problem}")


# ------------------------------------------------------------------ writing
def save_atomic(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``state`` and its checksum to ``path`` through a temporary file, fsync and rename: a
    crash mid-save leaves the previous file at ``path`` intact. Temporaries that killed writers left
    beside ``path`` are removed first. Returns the path.

    Raises:
        CheckpointError: a policy or optimizer tensor holds NaN or inf (nothing is written).
        ~ppo_bootstrap.disk.RunWriteError: the disk refused the write (full, failing, read-only):
            one line naming ``path`` and the reason; no file of it is left.
    """
    path = Path(path)
    bad = first_non_finite(_learned_tensors(state))
    if bad is not None:
        raise CheckpointError(path, f"not written: tensor {bad} holds NaN or inf")
    state = {**state, CHECKSUM: checksum(state)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunWriteError("checkpoint", path, err, "not written: its folder cannot be made") from err
    remove_stale_temporaries(path.parent)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    _writing.add(tmp)
    stream = None
    try:
        with open(tmp, "wb") as f:
            stream = ErrorKeepingFile(f)
            torch.save(state, stream)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:  # an error or a signal's exit mid-write: no temporary stays behind
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # the folder went away or turned read-only: the write's own error says it
            pass
        # torch's zip writer reports a failed write as a RuntimeError without the OS's reason
        cause = err if isinstance(err, OSError) else getattr(stream, "error", None)
        if cause is not None:
            raise RunWriteError("checkpoint", path, cause, "not written, nothing of it is left") from err
        raise
    finally:
        _writing.discard(tmp)
    return path


def remove_stale_temporaries(directory: str | os.PathLike) -> list[Path]:
    """Remove the ``.<name>.tmp-<pid>`` files in ``directory`` that interrupted writes left.

    A file goes when its process no longer runs, or when its pid is this process's own (an earlier
    process with the same pid, as in a restarted container) and this process is not writing it. A
    file whose process runs is never touched. Pids are judged on this host: runs on other hosts
    must not share the directory while they write to it. Returns the removed paths.
    """
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for entry in entries:
        match = _TEMPORARY.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        path, pid = Path(directory) / entry.name, int(match["pid"])
        if path in _writing or (pid != os.getpid() and _running(pid)):
            continue
        try:
            path.unlink()
            removed.append(path)
        except OSError:  # another process cleaned it first, or the folder turned read-only (the write says so)
            pass
    return removed


def _running(pid: int) -> bool:
    if pid <= 0 or os.name == "nt":  # no such writer; on Windows os.kill would end the process: keep
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except OverflowError:
        return False
    return True


# ------------------------------------------------------------------ integrity
def _leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, value)`` of every leaf of nested dicts, lists and tuples; dict keys in sorted order."""
    if isinstance(obj, Mapping):
        for key in sorted(obj, key=str):
            yield from _leaves(obj[key], f"{prefix}{key}/")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from _leaves(value, f"{prefix}{i}/")
    else:
        yield prefix[:-1], obj


def _as_bytes(leaf: Any) -> tuple[str, np.ndarray] | None:
    """A tensor (as a CPU copy) or a numpy array: its dtype and shape, and its bytes; else ``None``."""
    if torch.is_tensor(leaf):
        t = leaf.detach().cpu().contiguous()
        return f"{t.dtype}{tuple(t.shape)}", t.reshape(-1).view(torch.uint8).numpy()
    if isinstance(leaf, np.ndarray) and not leaf.dtype.hasobject:
        return f"{leaf.dtype}{leaf.shape}", np.ascontiguousarray(leaf).reshape(-1).view(np.uint8)
    return None


def _value_text(leaf: Any) -> str:
    if leaf is None or isinstance(leaf, (bool, int, float, str, bytes, np.generic)):
        return repr(leaf)
    return f"<{type(leaf).__qualname__}>"  # the type alone: a repr may hold a memory address


def checksum(state: Mapping[str, Any]) -> dict[str, Any]:
    """BLAKE2b digests of ``state`` (its own ``checksum`` entry left out): one per tensor or array,
    named by its path, and one over every other value (counters, config, RNG state)."""
    tensors: dict[str, str] = {}
    other = hashlib.blake2b(digest_size=16)
    for name, leaf in _leaves({k: v for k, v in state.items() if k != CHECKSUM}):
        data = _as_bytes(leaf)
        if data is None:
            other.update(f"{name}={_value_text(leaf)}\n".encode())
            continue
        digest = hashlib.blake2b(data[0].encode(), digest_size=16)
        digest.update(data[1])
        tensors[name] = digest.hexdigest()
    return {"algorithm": "blake2b-128", "tensors": tensors, "other": other.hexdigest()}


def verify(ckpt: Mapping[str, Any], path: str | os.PathLike) -> bool:
    """Whether ``ckpt`` has a checksum (``False``: written before checksums); raise if it does not match.

    Raises:
        CheckpointError: the contents differ from what was written, naming the first tensor that does.
    """
    stored = ckpt.get(CHECKSUM)
    if stored is None:
        return False
    if not isinstance(stored, Mapping) or not isinstance(stored.get("tensors"), Mapping):
        raise CheckpointError(path, "its checksum entry is damaged")
    now = checksum(ckpt)
    if now["tensors"] == stored["tensors"] and now["other"] == stored.get("other"):
        return True
    saved = stored["tensors"]
    changed = [name for name, digest in now["tensors"].items() if name in saved and saved[name] != digest]
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        where = f"tensor {changed[0]}{more}"
    elif set(now["tensors"]) != set(saved):
        where = f"its entries: {sorted(set(now['tensors']) ^ set(saved))[:3]} added or lost"
    else:
        where = "its non-tensor values (counters, config, RNG state)"
    raise CheckpointError(path, f"checksum mismatch in {where}: the file changed after it was written")


def first_non_finite(tensors: Mapping[str, torch.Tensor]) -> str | None:
    """The name of the first floating-point tensor holding NaN or inf, or ``None``.

    One fused check per device and dtype, read back with a single host sync; only when it fails are
    the tensors looked at one by one.
    """
    floats = {name: t.detach() for name, t in tensors.items() if t.is_floating_point() and t.numel()}
    groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    for t in floats.values():
        groups.setdefault((t.device, t.dtype), []).append(t.reshape(-1))
    if not groups:
        return None
    first = next(iter(groups))[0]
    finite = torch.stack([torch.isfinite(torch.cat(ts)).all().to(first) for ts in groups.values()])
    if bool(finite.all()):
        return None
    return next(name for name, t in floats.items() if not bool(torch.isfinite(t).all()))


def check_update_finite(policy: Mapping[str, torch.Tensor], losses: Mapping[str, float], iteration: int,
                        last_checkpoint: Path | None) -> None:
    """Raise ``FloatingPointError`` if an update left NaN or inf in the ``policy`` state (one fused
    check, one host sync) or in its ``losses`` (an overflowed loss clips its gradient to nothing: the
    update did not happen); the message names the tensor or loss and ``last_checkpoint``."""
    tensor = first_non_finite(policy)
    loss = next((key for key, value in losses.items() if not math.isfinite(value)), None)
    if tensor is None and loss is None:
        return
    what = f"policy tensor {tensor!r}" if tensor is not None else f"its {loss} ({losses[loss]})"
    raise FloatingPointError(
        f"iteration {iteration}: the update left NaN or inf in {what} (rewards or observations too "
        f"large for float32, or too high a learning rate?); not saved, the last checkpoint is "
        f"{last_checkpoint or 'none'}"
    )


RSL_RL_ENTRIES = ("actor_state_dict", "critic_state_dict", "model_state_dict", "optimizer_state_dict")
"""What rsl-rl-lib's ``OnPolicyRunner.save`` writes besides ``iter`` and ``infos`` (4.x/5.x: actor and
critic; 3.x: ``model_state_dict``)."""


def is_rsl_rl(ckpt: Mapping[str, Any]) -> bool:
    """A checkpoint rsl-rl-lib wrote (3.x to 5.x), not one of this library's."""
    return "policy" not in ckpt and (
        "model_state_dict" in ckpt or ("actor_state_dict" in ckpt and "critic_state_dict" in ckpt))


def _learned_tensors(ckpt: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The policy and optimizer tensors, by path (``policy/...``, ``ppo/optimizer/state/0/exp_avg``)."""
    names = RSL_RL_ENTRIES if is_rsl_rl(ckpt) else ("policy", "ppo")
    learned = {name: ckpt.get(name) for name in names}
    return {name: leaf for name, leaf in _leaves(learned) if torch.is_tensor(leaf)}


# ------------------------------------------------------------------ reading
def read(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The checkpoint at ``path``, tensors mapped to ``map_location``, once checked: a readable
    torch file, a checkpoint dict (``policy``, ``config``; every resume entry when it has ``ppo``),
    its checksum (files written before checksums: the zip's CRC-32 and a warning) and finite
    policy and optimizer tensors.

    Raises:
        FileNotFoundError: no file at ``path``.
        CheckpointError: anything else wrong with it, in one line naming the file.
    """
    size = os.path.getsize(path)
    if size == 0:
        raise CheckpointError(path, "is empty (0 bytes): its write never happened or was cut off")
    with open(path, "rb") as f:
        head = f.read(4)
    is_zip = head == _ZIP_MAGIC
    try:
        if is_zip:  # damaged pickle bytes never reach the unpickler (a flipped bit can ask it for GBs)
            _check_archive(path, tensors=False)
        ckpt = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as err:
        if is_zip:
            problem = "is truncated or damaged"
        elif head[:1] == b"\x80":
            problem = "is a truncated or damaged pickle"
        else:
            problem = f"is not a torch checkpoint (it starts with {head!r})"
        raise CheckpointError(path, f"{problem} ({size} bytes; {_first_line(err)})") from err
    _check_structure(ckpt, path)
    if not verify(ckpt, path):
        try:
            if is_zip:
                _check_archive(path, tensors=True)
        except zipfile.BadZipFile as err:
            raise CheckpointError(path, f"is damaged ({_first_line(err)})") from err
        if not is_rsl_rl(ckpt):  # rsl-rl-lib writes none: the zip's CRC-32 is all there is
            warnings.warn(f"checkpoint {os.fspath(path)}: no checksum (written before checksums); its tensors are "
                          "checked against the zip's CRC-32 only", UserWarning, stacklevel=2)
    bad = first_non_finite(_learned_tensors(ckpt))
    if bad is not None:
        raise CheckpointError(path, f"tensor {bad} holds NaN or inf")
    return ckpt


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"


def _check_archive(path: str | os.PathLike, tensors: bool) -> None:
    """Read the records of a torch zip file, the tensors' (``<archive>/data/<key>``) or the others
    (the pickle and metadata), against the CRC-32 torch wrote with each; records written without
    one (CRC 0) are skipped. ``zipfile.BadZipFile`` names the first that differs."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.CRC and ("/data/" in info.filename) == tensors:
                with archive.open(info) as record:
                    while record.read(1 << 20):
                        pass


def _check_structure(ckpt: Any, path: str | os.PathLike) -> None:
    if not isinstance(ckpt, Mapping):
        raise CheckpointError(path, f"holds a {type(ckpt).__name__}, not a checkpoint dict")
    if is_rsl_rl(ckpt):
        for name in RSL_RL_ENTRIES[:3]:
            if name in ckpt and not (isinstance(ckpt[name], Mapping) and all(map(torch.is_tensor, ckpt[name].values()))):
                raise CheckpointError(path, f"its {name!r} entry is not a state dict of tensors")
        return
    if "policy" not in ckpt:
        raise CheckpointError(path, f"is not a checkpoint: no 'policy' entry (it holds {sorted(map(str, ckpt))[:6]})")
    policy = ckpt["policy"]
    if not isinstance(policy, Mapping) or not all(torch.is_tensor(v) for v in policy.values()):
        raise CheckpointError(path, "its 'policy' entry is not a state dict of tensors")
    config = ckpt.get("config")
    if not isinstance(config, Mapping) or not isinstance(config.get("policy"), Mapping):
        raise CheckpointError(path, "has no 'config' entry with the network settings ('policy')")
    if is_full(ckpt):
        rng = ckpt.get("rng")
        missing = [k for k in RESUME_KEYS if k not in ckpt]
        missing += [f"rng/{k}" for k in RNG_KEYS if not isinstance(rng, Mapping) or k not in rng]
        if missing:
            raise CheckpointError(path, f"is a full checkpoint (it has 'ppo') without {missing}")


def rng_state(generator: torch.Generator) -> dict[str, Any]:
    """Every RNG a run draws from (:data:`RNG_KEYS`): torch's, CUDA's, numpy's, Python's and ``generator``."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "generator": generator.get_state(),
    }


def check_rng_state(rng: Mapping[str, Any], generator: torch.Generator) -> None:
    """Raise ``ValueError`` unless ``rng`` (:func:`rng_state` of a file) can be restored here; changes nothing."""
    for name, now in (("torch", torch.get_rng_state()), ("generator", generator.get_state())):
        if not torch.is_tensor(rng[name]) or rng[name].shape != now.shape:
            raise ValueError(f"its {name} RNG state is malformed")


def set_rng_state(rng: Mapping[str, Any], generator: torch.Generator) -> None:
    """Restore :func:`rng_state`'s record (CUDA's only where this process sees CUDA)."""
    torch.set_rng_state(rng["torch"].cpu())
    if rng["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in rng["cuda"]])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])
    generator.set_state(rng["generator"].cpu())


def is_full(ckpt: Mapping[str, Any]) -> bool:
    """A checkpoint to resume from (``Runner.save``), rather than a policy-only file."""
    return "ppo" in ckpt


def env_steps(ckpt: Mapping[str, Any]) -> int:
    """Calls of ``env.step`` the training of ``ckpt`` had made (``Runner.env_steps``). Files written
    before it was recorded (policy-only files among them) derive it: ``num_steps_per_env`` per
    iteration, and one rollout more for the normalizer warm-up of a trained run that normalizes."""
    if "env_steps" in ckpt:
        return int(ckpt["env_steps"])
    config = ckpt.get("config") or {}
    iteration = int(ckpt.get("iteration", 0))
    warm = ckpt.get("normalizers_warm", iteration > 0 and (config.get("policy") or {}).get("obs_normalization", True))
    return (iteration + int(bool(warm))) * int(config.get("num_steps_per_env", 0))


def task_id(ckpt: Mapping[str, Any]) -> str | None:
    """The registered task a checkpoint was trained on, where it records one (``task/id``)."""
    task = ckpt.get("task")
    return task.get("id") if isinstance(task, Mapping) else None


def check_fits(path: str | os.PathLike, saved: Mapping[str, torch.Tensor], current: Mapping[str, torch.Tensor],
               what: str, tasks: tuple[str | None, str | None] = (None, None)) -> None:
    """Raise :class:`CheckpointError` unless ``saved`` has exactly ``current``'s entries and shapes.

    ``tasks``: the checkpoint's task id and this run's, where known; when both are and differ, the
    message names them (the usual reason a network does not fit).
    """
    resized = [f"{k} {tuple(saved[k].shape)} there, {tuple(v.shape)} here"
               for k, v in current.items() if k in saved and saved[k].shape != v.shape]
    missing = [k for k in current if k not in saved]
    unexpected = [k for k in saved if k not in current]
    parts = [f"{label}: {', '.join(names[:2])}{f' (+{len(names) - 2} more)' if len(names) > 2 else ''}"
             for label, names in (("shapes", resized), ("missing", missing), ("unexpected", unexpected)) if names]
    if parts and None not in tasks and tasks[0] != tasks[1]:
        raise CheckpointError(path, f"was trained on task {tasks[0]}, this run is task {tasks[1]}: its network does "
                                    f"not fit {what} ({'; '.join(parts)})")
    if parts:
        raise CheckpointError(path, f"does not fit {what} ({'; '.join(parts)}): it was trained with another "
                                    "network or task configuration")


def policy_config(ckpt: dict[str, Any]) -> PolicyConfig:
    """The network shape a checkpoint was trained with."""
    return PolicyConfig(**ckpt["config"]["policy"])


def load_policy(
    path: str | os.PathLike, obs: ObsGroups, num_actions: int, device: str | torch.device = "cpu"
) -> ActorCritic:
    """The actor-critic of a checkpoint, normalizers included, sized for envs that return ``obs``.

    Only the network is restored (no optimizer, env or RNG state), so it suits evaluation, playback
    and export on an env of any size.

    Raises:
        CheckpointError: the file is damaged, or its network does not fit ``obs`` / ``num_actions``.
    """
    ckpt = read(path, device)
    if is_rsl_rl(ckpt):
        raise CheckpointError(path, "was written by rsl-rl-lib and holds no network settings: load it into a Runner "
                                    "built with RunnerConfig.from_rsl_rl(<its agent config>) (Runner.load)")
    policy_dim, critic_dim = obs[POLICY].shape[-1], critic_obs(obs).shape[-1]
    policy = ActorCritic(policy_dim, critic_dim, num_actions, policy_config(ckpt)).to(device)
    check_fits(path, ckpt["policy"], policy.state_dict(),
               f"this env (policy input {policy_dim}, critic input {critic_dim}, {num_actions} actions)")
    policy.load_state_dict(ckpt["policy"])
    return policy.eval()
