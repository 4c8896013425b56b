"""Small helpers shared by the benchmark scripts (not part of the library)."""

from __future__ import annotations

import os
import platform
import sys

import torch

# ``python benchmarks/<script>.py`` puts ``benchmarks/`` on ``sys.path``, not the repository root.
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)

try:  # the public entry points, once the package exports them
    from ppo_bootstrap import compute_gae, compute_gae_reference  # noqa: E402
except ImportError:
    from ppo_bootstrap.gae import compute_gae, compute_gae_reference  # noqa: E402

from ppo_bootstrap.episode import assemble_next_values  # noqa: E402

__all__ = [
    "assemble_next_values",
    "compute_gae",
    "compute_gae_reference",
    "format_table",
    "machine_line",
    "resolve_device",
]


def resolve_device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but torch.cuda.is_available() is False")
    return device


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
