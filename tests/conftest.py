import torch

# The suite's networks are tiny: one thread is fastest and keeps results independent of core count.
torch.set_num_threads(1)
