"""ONNX export of the deterministic actor."""

from __future__ import annotations

import os
import warnings

import torch
from torch import nn

from ppo_bootstrap.modules.actor_critic import ActorCritic


class _FeedForwardActor(nn.Module):
    def __init__(self, policy: ActorCritic) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy.act_inference(obs, None)[0]


class _RecurrentActor(nn.Module):
    def __init__(self, policy: ActorCritic) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.policy.act_inference(obs, state)


def export_actor_onnx(policy: ActorCritic, obs_dim: int, path: str | os.PathLike) -> None:
    """Write the actor of ``policy`` (normalizer and memory included) as an ONNX graph at ``path``."""
    device = next(policy.parameters()).device
    obs = torch.zeros(1, obs_dim, device=device)
    was_training = policy.training
    policy.eval()
    try:
        with warnings.catch_warnings():
            # The exporter warns about RNN batch sizes unless h0 is an input; here it always is.
            warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size other than 1")
            if policy.is_recurrent:
                state = policy.initial_state(1, device)[0]
                torch.onnx.export(
                    _RecurrentActor(policy), (obs, state), str(path), dynamo=False,
                    input_names=["obs", "state_in"], output_names=["actions", "state_out"],
                    dynamic_axes={"obs": {0: "batch"}, "state_in": {1: "batch"},
                                  "actions": {0: "batch"}, "state_out": {1: "batch"}},
                )
            else:
                torch.onnx.export(
                    _FeedForwardActor(policy), (obs,), str(path), dynamo=False,
                    input_names=["obs"], output_names=["actions"],
                    dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}},
                )
    finally:
        policy.train(was_training)
