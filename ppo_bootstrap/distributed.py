"""Data-parallel training over ``torch.distributed``: one process per GPU, each with its own envs.

Everything that must agree across ranks goes through the helpers here: gradients (averaged),
advantage statistics (global batch), observation-normalizer moments (the union of all ranks' data,
where rsl_rl keeps them per rank), and the KL that drives the adaptive learning rate, so every
rank takes the same decisions and the parameters stay identical. Rank 0 alone logs and writes
checkpoints. Launch with ``torchrun --nproc-per-node N script.py``; with a single process every
helper is a no-op.

Faults (``docs/multi_gpu.md``):

* a rank that dies (SIGKILL, out of memory, a crash) breaks the next collective of every other
  rank: those raise :class:`RankFailure`, a ``SystemExit`` whose one line names the ranks whose
  processes are gone, so each survivor exits at once without a traceback (torchrun's agent also
  stops the workers of its node). A rank that hangs without dying is caught by the collective
  timeout (:data:`TIMEOUT_ENV`, default :data:`DEFAULT_TIMEOUT_S` seconds);
* ranks set up differently (env count, observation layout, actions, Runner or task config) are
  refused before training starts by :func:`check_ranks_agree`, one line naming the field and the ranks.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import torch
import torch.distributed as dist

TIMEOUT_ENV = "PPO_BOOTSTRAP_COLLECTIVE_TIMEOUT_S"
"""Environment variable: seconds a collective may wait for the other ranks before it fails."""
DEFAULT_TIMEOUT_S = 300.0
"""The collective timeout without :data:`TIMEOUT_ENV`: longer than any iteration's work between two
collectives (a checkpoint write, the first CUDA graph capture), far shorter than torch's 30 minutes."""
RANK_LOCAL_FIELDS = ("seed", "device", "log_dir")
"""Config fields that differ between ranks by design (each rank its own seed and device; rank 0 alone
logs), left out of :func:`check_ranks_agree`."""

_PEER_EXIT_WAIT_S = 2.0  # how long a failed collective waits for a dying peer's process to end, to name it
_peers: list[tuple[str, int]] = []  # (host, pid) of every rank, from check_ranks_agree


class RankFailure(SystemExit):
    """A collective failed because another rank died or hung. A ``SystemExit`` whose message is one line
    (printed by Python on exit, without a traceback); ``lost`` lists the ranks known to be gone."""

    def __init__(self, message: str, lost: list[int]) -> None:
        super().__init__(message)
        self.lost = lost


class RankMismatchError(ValueError):
    """Ranks were started with different env counts or configurations; the message names field and ranks."""


F = TypeVar("F", bound=Callable[..., Any])


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def init_from_env(device: str | torch.device | None = None) -> torch.device:
    """Join the process group ``torchrun`` describes (``WORLD_SIZE`` > 1); return this rank's device.

    NCCL for CUDA, gloo for CPU. Without ``torchrun`` this returns ``device`` (default ``cpu``).
    """
    requested = torch.device(device or "cpu")
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return requested
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    timeout = datetime.timedelta(seconds=collective_timeout_s())
    if requested.type == "cuda":
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank), timeout=timeout)
        return torch.device("cuda", local_rank)
    dist.init_process_group("gloo", timeout=timeout)
    return requested


def collective_timeout_s() -> float:
    """Seconds a collective waits for the other ranks: :data:`TIMEOUT_ENV`, else :data:`DEFAULT_TIMEOUT_S`."""
    text = os.environ.get(TIMEOUT_ENV)
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ValueError(f"{TIMEOUT_ENV}={text!r}: give the collective timeout as a positive number of seconds")
    return seconds


# ------------------------------------------------------------------ rank failures
def _process_ended(pid: int) -> bool:
    """Whether process ``pid`` of this host has ended (a zombie, killed and not yet reaped, has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def lost_ranks() -> list[int]:
    """Ranks on this host whose processes have ended (known after :func:`check_ranks_agree`)."""
    host = socket.gethostname()
    return [r for r, (h, pid) in enumerate(_peers) if h == host and r != rank() and _process_ended(pid)]


def rank_failure(err: BaseException) -> RankFailure:
    """The one-line :class:`RankFailure` of a collective that raised ``err``."""
    me, lost = rank(), lost_ranks()
    # a peer's sockets close a moment before its process is gone: give a dying one that moment
    deadline = time.monotonic() + _PEER_EXIT_WAIT_S
    while not lost and _peers and time.monotonic() < deadline:
        time.sleep(0.05)
        lost = lost_ranks()
    text = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
    cause = re.sub(r"^\[[^\]]*\]\s*", "", text).split(". ")[0][:160]  # gloo's source location and advice dropped
    if lost:
        who = f"rank {lost[0]}" if len(lost) == 1 else f"ranks {lost}"
        return RankFailure(f"rank {me}: {who} of {world_size()} stopped (its process is gone); this rank stops too. "
                           "Resume from the last checkpoint rank 0 wrote", lost)
    host = socket.gethostname()
    remote = [r for r, (h, _) in enumerate(_peers) if h != host]
    where = f"; ranks {remote} run on other hosts" if remote else ""
    return RankFailure(f"rank {me}: a collective with the other ranks failed ({cause}): another rank died or hung "
                       f"past {TIMEOUT_ENV}={collective_timeout_s():g} s{where}; this rank stops too. Resume from "
                       "the last checkpoint rank 0 wrote", [])


def _collective(fn: F) -> F:
    """Turn a failed collective inside ``fn`` into :func:`rank_failure`'s one line."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RuntimeError as err:  # torch.distributed.DistError and the backends' errors are RuntimeErrors
            if not is_distributed():
                raise
            raise rank_failure(err) from None

    return wrapper  # type: ignore[return-value]


# ------------------------------------------------------------------ start-up agreement
def setup_fingerprint(env: Any, runner_config: Any, obs_layout: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """What every rank must share: ``num_envs``, ``num_actions``, the observation groups and widths,
    the Runner's config and the env's own config (``env.cfg`` where it is a dataclass), without
    :data:`RANK_LOCAL_FIELDS`. Plain values, comparable and picklable."""
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        if isinstance(value, Mapping):
            return {str(k): plain(v) for k, v in value.items() if k not in RANK_LOCAL_FIELDS}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)

    # the counts from the VecEnv itself (an adapter's simulator may spell them otherwise), its config
    # from the simulator underneath
    env_cfg = getattr(getattr(env, "unwrapped", env), "cfg", None)
    return {
        "num_envs": int(env.num_envs),
        "num_actions": int(env.num_actions),
        "observations": {group: list(shape) for group, shape in obs_layout.items()},
        "runner": plain(runner_config),
        **({"task": plain(env_cfg)} if dataclasses.is_dataclass(env_cfg) else {}),
    }


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value}


def check_ranks_agree(fingerprint: Mapping[str, Any]) -> None:
    """Gather every rank's :func:`setup_fingerprint` (one collective at start-up) and raise the same
    :class:`RankMismatchError` on every rank where any differs from rank 0's, naming the first fields
    and their values per rank. Also records each rank's host and pid for :func:`lost_ranks`.
    A no-op with one process."""
    if not is_distributed():
        return
    gathered: list[Any] = [None] * world_size()
    _all_gather_object(gathered, {"fingerprint": dict(fingerprint), "host": socket.gethostname(), "pid": os.getpid()})
    _peers[:] = [(g["host"], g["pid"]) for g in gathered]
    flat = [_flatten(g["fingerprint"]) for g in gathered]
    differing = [key for key in sorted(set().union(*flat)) if len({repr(f.get(key)) for f in flat}) > 1]
    if not differing:
        return
    parts = []
    for key in differing[:3]:
        values: dict[str, list[int]] = {}
        for r, f in enumerate(flat):
            values.setdefault(repr(f.get(key, "(absent)")), []).append(r)
        parts.append(f"{key} is " + ", ".join(f"{v} on rank{'s' if len(rs) > 1 else ''} "
                                              f"{rs if len(rs) > 1 else rs[0]}" for v, rs in values.items()))
    more = f" (and {len(differing) - 3} more fields)" if len(differing) > 3 else ""
    raise RankMismatchError("ranks were started with different setups: " + "; ".join(parts) + more +
                            ". Every rank needs the same env count and task/agent config")


@_collective
def _all_gather_object(out: list[Any], value: Any) -> None:
    dist.all_gather_object(out, value)


@_collective
def all_reduce_sum_(tensor: torch.Tensor) -> torch.Tensor:
    """In-place sum over ranks (identity with one process)."""
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


@_collective
def all_reduce_mean_(tensor: torch.Tensor) -> torch.Tensor:
    """In-place mean over ranks (identity with one process)."""
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= dist.get_world_size()
    return tensor


@_collective
def broadcast_module_(module: torch.nn.Module, src: int = 0) -> None:
    """Copy parameters and buffers of rank ``src`` to every rank."""
    if not is_distributed():
        return
    for tensor in list(module.parameters()) + list(module.buffers()):
        dist.broadcast(tensor.data, src=src)


@_collective
def average_gradients_(parameters) -> None:
    """Average ``.grad`` over ranks in one flat all-reduce."""
    if not is_distributed():
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    all_reduce_mean_(flat)
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


@_collective
def global_moments(count: torch.Tensor, mean: torch.Tensor, m2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Combine per-rank ``(count, mean, m2)`` into the moments of the union of all ranks' samples.

    ``count`` is a scalar tensor, ``mean`` and ``m2`` (sum of squared deviations) ``[D]``; all float64.
    """
    if not is_distributed():
        return count, mean, m2
    total = all_reduce_sum_(count.clone())
    global_mean = all_reduce_sum_(mean * count) / total.clamp_min(1.0)
    global_m2 = all_reduce_sum_(m2 + count * (mean - global_mean) ** 2)
    return total, global_mean, global_m2
