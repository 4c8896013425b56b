"""Evaluate a G1 walking checkpoint: falls judged apart from training termination, gait acceptance,
a threshold sweep over one set of rollouts, an optional episode dataset, and plots.

    python examples/g1_eval.py runs/g1_walk/model_1500.pt
    python examples/g1_eval.py runs/g1_walk/model_1500.pt --sweep 0.60,0.50,0.45 --dataset eval.parquet
    python examples/g1_eval.py zero --horizon-s 3 --num-envs 8      # the zero-action stand test
    python examples/g1_eval.py model.pt --backend warp --device cuda --num-envs 1024 --command env

The same as ``python -m isaac_adapter.app eval ...`` (isaac_adapter/app/eval.py, docs/cli.md).
"""

import os
import sys

# running the file directly puts examples/ on sys.path, not the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from isaac_adapter.app.cli import main  # noqa: E402
from isaac_adapter.app.eval import evaluate_checkpoint  # noqa: E402,F401  (the older import path)

if __name__ == "__main__":
    main(["eval", *sys.argv[1:]])
