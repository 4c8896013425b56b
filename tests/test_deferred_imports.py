"""tensordict, and ``torch._dynamo`` with it, stays out of the library's and the application's
imports: a training imports it beside its env build (``isaac_adapter.app.train.import_beside``),
and the learner's first storage takes it from there."""

from __future__ import annotations

import subprocess
import sys
import threading

import torch

from isaac_adapter.app.train import import_beside
from ppo_bootstrap.env import CRITIC, POLICY
from ppo_bootstrap.storage import RolloutStorage, tensordict_class


def modules_after(code: str) -> set[str]:
    """Which of tensordict and torch._dynamo a fresh interpreter has imported after ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in ('tensordict', 'torch._dynamo') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    return set(out.stdout.split())


def test_the_library_and_the_training_application_import_without_tensordict() -> None:
    assert modules_after("import ppo_bootstrap\nfrom ppo_bootstrap import Runner, RolloutStorage, PPO") == set()
    assert modules_after("import isaac_adapter.app.cli, isaac_adapter.app.train") == set()
    # the control: the probe does see both once tensordict is imported
    assert modules_after("import tensordict") == {"tensordict", "torch._dynamo"}


def test_a_storage_builds_its_tensordict_at_first_use() -> None:
    storage = RolloutStorage(num_steps=2, num_envs=3, obs_shapes={POLICY: (4,), CRITIC: (5,)}, num_actions=2, device="cpu")
    from tensordict import TensorDict

    assert tensordict_class() is TensorDict
    assert isinstance(storage.data, TensorDict) and isinstance(storage.data["obs"], TensorDict)
    assert tuple(storage.data.batch_size) == (2, 3) and storage.data["obs"][CRITIC].shape == (2, 3, 5)
    assert storage.data["obs"][CRITIC].dtype == torch.float32


def test_import_beside_imports_in_another_thread_and_leaves_a_failure_to_the_later_import(capfd) -> None:
    thread = import_beside("json")
    assert thread is not threading.current_thread() and thread.daemon
    thread.join(timeout=60)
    assert not thread.is_alive() and "json" in sys.modules
    missing = import_beside("ppo_bootstrap_no_such_module")
    missing.join(timeout=60)
    assert not missing.is_alive() and "ppo_bootstrap_no_such_module" not in sys.modules
    assert capfd.readouterr().err == ""  # no traceback from the thread: the later import names it
