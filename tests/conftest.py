import dataclasses

import pytest
import torch

# The suite's networks are tiny: one thread is fastest and keeps results independent of core count.
torch.set_num_threads(1)


@pytest.fixture
def recording(tmp_path):
    """``recording(source, task_id, env_cfg, name)``: a copy of the checkpoint file ``source``, written
    to ``tmp_path / name``, that recorded the task ``task_id`` with the G1 config ``env_cfg``: what a
    run of that task would have saved (``save_atomic`` gives it its own checksum)."""
    from ppo_bootstrap import checkpoint

    def make(source, task_id, env_cfg, name):
        saved = checkpoint.read(source)
        saved["task"] = {"id": task_id, "env": dataclasses.asdict(env_cfg)}
        path = tmp_path / name
        checkpoint.save_atomic(saved, path)
        return path

    return make
