"""Exported actors (ONNX, TorchScript) compute what ``ActorCritic.act_inference`` computes."""

import inspect
import json
import subprocess
import sys
import warnings

import pytest
import torch

from ppo_bootstrap import PolicyConfig
from ppo_bootstrap.export import export_actor_onnx, export_actor_torchscript, export_policy
from ppo_bootstrap.modules.actor_critic import ActorCritic
from export_check import assert_same_rollout, expected_rollout, onnx_rollout, torchscript_rollout

OBS_DIM, NUM_ACTIONS = 7, 3
POLICIES = {  # name: (recurrent, rnn_layers, std_type)
    "mlp": (None, 1, "scalar"),
    "mlp_state_dependent_std": (None, 1, "state_dependent"),  # the actor also outputs log-std columns
    "gru": ("gru", 1, "scalar"),
    "lstm_2_layers": ("lstm", 2, "scalar"),
}


def fitted_policy(name: str) -> ActorCritic:
    """A small policy whose observation normalizer has seen shifted, scaled random data (not identity)."""
    recurrent, layers, std_type = POLICIES[name]
    torch.manual_seed(0)
    cfg = PolicyConfig(actor_hidden=(16, 16), critic_hidden=(16,), recurrent=recurrent, rnn_hidden=8,
                       rnn_layers=layers, std_type=std_type)
    policy = ActorCritic(OBS_DIM, OBS_DIM + 2, NUM_ACTIONS, cfg)
    for _ in range(3):
        policy.update_normalizers(3.0 * torch.randn(64, OBS_DIM) + torch.arange(OBS_DIM), torch.randn(64, OBS_DIM + 2))
    assert not torch.allclose(policy.actor.normalizer.std, torch.ones(OBS_DIM))
    return policy.eval()


def obs_sequence(steps: int, batch: int) -> torch.Tensor:
    """``[T, B, D]`` observations on the scale the normalizer was fitted to."""
    noise = torch.randn(steps, batch, OBS_DIM, generator=torch.Generator().manual_seed(1))
    return 3.0 * noise + torch.arange(OBS_DIM)


def jit_load(path) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch marks TorchScript deprecated
        return torch.jit.load(str(path))


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_onnx_and_torchscript_match_act_inference(tmp_path, name):
    policy = fitted_policy(name)
    obs_seq = obs_sequence(steps=5 if policy.is_recurrent else 1, batch=4)
    expected = expected_rollout(policy, obs_seq)
    state0 = policy.initial_state(4, torch.device("cpu"))[0]

    paths = export_policy(policy, OBS_DIM, tmp_path / "exported")
    assert {key: p.name for key, p in paths.items()} == {
        "onnx": "policy.onnx", "torchscript": "policy.pt", "metadata": "policy.json"}
    assert sorted(p.name for p in (tmp_path / "exported").iterdir()) == ["policy.json", "policy.onnx", "policy.pt"]
    assert_same_rollout(torchscript_rollout(jit_load(paths["torchscript"]), obs_seq, state0), expected)
    assert_same_rollout(onnx_rollout(paths["onnx"], obs_seq, state0), expected)
    assert_same_rollout(expected_rollout(policy, obs_seq), expected)  # the policy itself is unchanged


@pytest.mark.parametrize("name", ["mlp", "gru"])
def test_export_leaves_a_training_policy_in_training_mode(tmp_path, name):
    policy = fitted_policy(name).train()
    export_actor_onnx(policy, OBS_DIM, tmp_path / "a.onnx")
    export_actor_torchscript(policy, OBS_DIM, tmp_path / "a.pt")
    assert all(module.training for module in policy.modules())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "a.pt"]  # no temporary file left behind


@pytest.mark.parametrize("name", ["mlp", "lstm_2_layers"])
def test_torchscript_runs_without_this_project(tmp_path, name):
    """``torch.jit.load`` alone runs the file: ppo_bootstrap cannot be imported in that process."""
    policy = fitted_policy(name)
    export_actor_torchscript(policy, OBS_DIM, tmp_path / "policy.pt")
    obs_seq = obs_sequence(steps=3, batch=2)
    torch.save({"obs": obs_seq, "state": policy.initial_state(2, torch.device("cpu"))[0]}, tmp_path / "inputs.pt")
    script = "\n".join([
        "import sys",
        "for name in ('ppo_bootstrap', 'isaac_adapter', 'export_check'):",
        "    sys.modules[name] = None  # importing any of them now raises ImportError",
        "import torch",
        inspect.getsource(torchscript_rollout),
        "inputs = torch.load('inputs.pt')",
        "module = torch.jit.load('policy.pt')",
        "torch.save(torchscript_rollout(module, inputs['obs'], inputs['state']), 'outputs.pt')",
    ])
    # -I: neither the working directory nor PYTHONPATH on sys.path
    done = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert_same_rollout(torch.load(tmp_path / "outputs.pt"), expected_rollout(policy, obs_seq))


def test_metadata_records_the_interface(tmp_path):
    lstm = json.loads(export_policy(fitted_policy("lstm_2_layers"), OBS_DIM, tmp_path)["metadata"].read_text())
    assert lstm["obs_dim"] == OBS_DIM and lstm["action_dim"] == NUM_ACTIONS
    assert lstm["inputs"] == {"obs": ["batch", OBS_DIM], "state_in": [4, "batch", 8]}  # 2 layers x (h, c)
    assert lstm["outputs"] == {"actions": ["batch", NUM_ACTIONS], "state_out": [4, "batch", 8]}
    assert lstm["recurrent"]["kind"] == "lstm"
    assert lstm["files"] == {"onnx": "policy.onnx", "torchscript": "policy.pt"}
    mlp = json.loads(export_policy(fitted_policy("mlp"), OBS_DIM, tmp_path / "mlp")["metadata"].read_text())
    assert mlp["recurrent"] is None and list(mlp["inputs"]) == ["obs"] and list(mlp["outputs"]) == ["actions"]
