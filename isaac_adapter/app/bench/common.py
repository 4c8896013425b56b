"""Small helpers shared by the benchmarks (``benchmarks/*.py`` and :mod:`isaac_adapter.app.bench`)."""

from __future__ import annotations

import math
import os
import platform
import statistics
from pathlib import Path
from typing import Any

import torch

from ppo_bootstrap import compute_gae, compute_gae_reference
from ppo_bootstrap.episode import assemble_next_values

#: The return a training run ends at: the mean over its last this many iterations.
RETURN_WINDOW = 10

#: The trainers' names in the records that put ``Runner`` beside rsl-rl-lib.
RUNNER, RSL_RL = "ppo_bootstrap", "rsl_rl"

#: The checkout the benchmarks run from (a source install: ``examples/``, ``docs/``, ``benchmarks/``).
CHECKOUT = Path(__file__).resolve().parents[3]

__all__ = [
    "CHECKOUT",
    "EpisodeMeter",
    "RETURN_WINDOW",
    "add_rollout_args",
    "add_solver_args",
    "assemble_next_values",
    "checkout_env",
    "compute_gae",
    "compute_gae_reference",
    "format_table",
    "last_mean",
    "learning_rate_cell",
    "machine_line",
    "median_after_first",
    "resolve_device",
    "resolve_rollout_args",
    "solver_overrides",
]


def checkout_env() -> dict[str, str]:
    """This process's environment with the checkout first on ``PYTHONPATH``: a child started with
    ``python -m isaac_adapter...`` imports the same code from wherever it was launched."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(CHECKOUT) + (os.pathsep + path if path else "")}


def resolve_device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but torch.cuda.is_available() is False")
    return device


def add_rollout_args(p, per: str) -> None:
    """The rollout-size and timing flags the learner and bootstrap-cost scripts share."""
    p.add_argument("--device", default="cpu")
    p.add_argument("--num-envs", type=int, default=None,
                   help="envs N (default: 4096 on CUDA; 1024 on CPU, where 4096 x 24 takes ~30 s per iteration)")
    p.add_argument("--steps", type=int, default=24, help="rollout length T per env")
    p.add_argument("--repeats", type=int, default=None, help=f"timed iterations per {per} (default: 5 CPU, 20 CUDA)")
    p.add_argument("--warmup", type=int, default=None, help=f"untimed iterations per {per} (default: 1 CPU, 3 CUDA)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: on a small shared CPU, OpenMP barriers make 2+ threads noisy)")


def resolve_rollout_args(a) -> tuple[torch.device, int, int]:
    """Apply ``--threads``, fill the size and repeat defaults of the device; ``(device, repeats, warmup)``."""
    device = resolve_device(a.device)
    cuda = device.type == "cuda"
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    a.num_envs = a.num_envs if a.num_envs is not None else (4096 if cuda else 1024)
    repeats = a.repeats if a.repeats is not None else (20 if cuda else 5)
    warmup = a.warmup if a.warmup is not None else (3 if cuda else 1)
    return device, repeats, warmup


def add_solver_args(p) -> None:
    """``--solver-iterations`` / ``--ls-iterations``: another constraint-solver budget than the G1 model's."""
    p.add_argument("--solver-iterations", type=int, default=None,
                   help="the constraint solver's iterations (default: the G1 model's)")
    p.add_argument("--ls-iterations", type=int, default=None, help="its line-search steps (default: the model's)")


def solver_overrides(a) -> dict[str, int]:
    """The ``G1WalkConfig`` fields (``solver_iterations``, ``ls_iterations``) that :func:`add_solver_args`'s
    flags set, only those given; one line and exit when one is below 1."""
    given = {"solver_iterations": a.solver_iterations, "ls_iterations": a.ls_iterations}
    if any(v is not None and v < 1 for v in given.values()):
        raise SystemExit("error: --solver-iterations and --ls-iterations must be >= 1")
    return {k: v for k, v in given.items() if v is not None}


def machine_line(device: torch.device) -> str:
    if device.type == "cuda":
        what = torch.cuda.get_device_name(device)
    else:
        what = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads"
    return f"torch {torch.__version__} | device {device} ({what}) | python {platform.python_version()}"


def format_table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Plain fixed-width table; the first ``left`` columns left-aligned, the rest right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        out = []
        for i, (cell, w) in enumerate(zip(cells, widths)):
            out.append(cell.ljust(w) if i < left else cell.rjust(w))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


class EpisodeMeter:
    """Returns and lengths of the episodes that end, and how many ended by the time limit, summed on
    the device (no host sync per step). Measured on the env's side, so that two trainers driving
    the same env are measured alike.

    ``add(reward, done, time_out)``: one step, each ``[N]``; ``time_out`` counts only where ``done``.
    ``take()``: since the last take, the mean return and length of the episodes that ended, how many
    ended and how many of them by the time limit (nan, nan, 0, 0 if none)."""

    def __init__(self, num_envs: int, device: Any) -> None:
        self.ret = torch.zeros(num_envs, device=device)
        self.len = torch.zeros(num_envs, device=device)
        self.sums = torch.zeros(4, device=device)  # ended, return, length, time-outs

    def add(self, reward: torch.Tensor, done: torch.Tensor, time_out: torch.Tensor) -> None:
        self.ret += reward
        self.len += 1
        d = done.float()
        self.sums += torch.stack([d.sum(), (self.ret * d).sum(), (self.len * d).sum(), (time_out.float() * d).sum()])
        self.ret *= 1 - d
        self.len *= 1 - d

    def take(self) -> tuple[float, float, int, int]:
        ended, ret, length, timeouts = self.sums.tolist()
        self.sums.zero_()
        return ((ret / ended, length / ended, int(ended), int(timeouts)) if ended
                else (float("nan"), float("nan"), 0, 0))


def median_after_first(rows: list[dict], key: str) -> float:
    """Median of ``key`` over ``rows`` but the first (it holds the compile and warm-up); nan if none."""
    values = [r[key] for r in rows[1:] if r.get(key) is not None and not math.isnan(r[key])]
    return statistics.median(values) if values else float("nan")


def last_mean(rows: list[dict], key: str, k: int = RETURN_WINDOW) -> float:
    """Mean of ``key`` over the last ``k`` rows that have it; nan if none."""
    values = [r[key] for r in rows[-k:] if r.get(key) is not None and not math.isnan(r[key])]
    return sum(values) / len(values) if values else float("nan")


def learning_rate_cell(rows: list[dict]) -> str:
    """The geometric mean of ``lr`` over the rows that kept it (the adaptive schedule steps it by
    factors), as a table cell; ``-`` if none did (older records)."""
    rates = [r["lr"] for r in rows if "lr" in r]
    return f"{statistics.geometric_mean(rates):.2e}" if rates else "-"
