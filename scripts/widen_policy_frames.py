"""Widen a G1 policy checkpoint to more observation frames, for fine-tuning it with history.

    python scripts/widen_policy_frames.py docs/checkpoints/g1_robust_ft_it2200.pt runs/ft_k3.pt --frames 3

The widened policy acts as the original on the frame it saw, the past frames weighted zero
(:mod:`isaac_adapter.tasks.g1_walk.widen_frames`); the file records the new frame count, so
``examples/g1_walk.py --checkpoint OUT`` fine-tunes, plays and evaluates it with those frames.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppo_bootstrap import checkpoint  # noqa: E402

from isaac_adapter.tasks.g1_walk.widen_frames import widen_policy_frames  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="a G1-Walk checkpoint (full or policy-only)")
    p.add_argument("out", help="where to write the widened policy-only checkpoint")
    p.add_argument("--frames", type=int, required=True, help="the observation frames the widened policy sees")
    a = p.parse_args(argv)
    if Path(a.out).resolve() == Path(a.checkpoint).resolve():
        raise SystemExit(f"error: out {a.out} is the checkpoint itself: write the widened one beside it")
    try:
        widened = widen_policy_frames(checkpoint.read(a.checkpoint), a.frames)
    except FileNotFoundError:
        raise SystemExit(f"error: no checkpoint at {a.checkpoint}") from None
    except (ValueError, checkpoint.CheckpointError) as err:
        raise SystemExit(f"error: {err}") from None
    checkpoint.save_atomic(widened, a.out)
    print(f"wrote {a.out}: the policy sees {a.frames} frames (the past ones weighted zero)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
