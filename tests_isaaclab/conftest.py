import sys
from pathlib import Path

import torch

# cartpole_usd.py sits next to the tests; the repository root provides ppo_bootstrap / isaac_adapter.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
torch.set_num_threads(1)
