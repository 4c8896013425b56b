"""Step an exported actor (ONNX, TorchScript) and ``act_inference`` side by side, for the export tests."""

from __future__ import annotations

import os

import pytest
import torch

from ppo_bootstrap.modules.actor_critic import ActorCritic

Steps = list[tuple[torch.Tensor, torch.Tensor | None]]
"""(actions ``[B, A]``, next state ``[S, B, H]`` or None) per step."""


def expected_rollout(policy: ActorCritic, obs_seq: torch.Tensor) -> Steps:
    """``act_inference`` over ``obs_seq`` ``[T, B, D]`` from zero memory."""
    state = policy.initial_state(obs_seq.shape[1], obs_seq.device)[0]
    steps = []
    with torch.no_grad():
        for obs in obs_seq:
            actions, state = policy.act_inference(obs, state)
            steps.append((actions, state))
    return steps


def onnx_rollout(path: str | os.PathLike, obs_seq: torch.Tensor, state: torch.Tensor | None) -> Steps:
    """The ONNX actor at ``path`` over ``obs_seq`` ``[T, B, D]`` from ``state``, its own state fed back."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path))
    steps = []
    for obs in obs_seq:
        feeds = {"obs": obs.numpy()} if state is None else {"obs": obs.numpy(), "state_in": state.numpy()}
        outputs = [torch.from_numpy(out) for out in session.run(None, feeds)]
        state = outputs[1] if state is not None else None
        steps.append((outputs[0], state))
    return steps


def torchscript_rollout(module, obs_seq, state):
    """A TorchScript actor over ``obs_seq`` ``[T, B, D]`` from ``state``, as :func:`onnx_rollout`.

    Plain torch only: ``test_export`` also runs this source in a process that cannot import the project.
    """
    steps = []
    with torch.no_grad():
        for obs in obs_seq:
            if state is None:
                steps.append((module(obs), None))
            else:
                actions, state = module(obs, state)
                steps.append((actions, state))
    return steps


def assert_same_rollout(actual: Steps, expected: Steps) -> None:
    """Actions (and states) equal to 1e-5 at every step."""
    for t, ((actions, state), (want_actions, want_state)) in enumerate(zip(actual, expected, strict=True)):
        torch.testing.assert_close(actions, want_actions, rtol=1e-5, atol=1e-5, msg=lambda m: f"actions, step {t}: {m}")
        if want_state is not None:
            torch.testing.assert_close(state, want_state, rtol=1e-5, atol=1e-5, msg=lambda m: f"state, step {t}: {m}")
