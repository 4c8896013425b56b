"""Export of the deterministic actor (normalizer and memory included) for deployment.

Both formats have one interface:

* feed-forward: ``obs`` ``[B, D]`` -> ``actions`` ``[B, A]``;
* recurrent: ``(obs [B, D], state_in [S, B, H])`` -> ``(actions [B, A], state_out [S, B, H])``, where
  ``S`` is the number of layers for a GRU and ``2 * layers`` for an LSTM (``h`` stacked over ``c``,
  see :class:`ppo_bootstrap.modules.actor_critic.Memory`); start an episode from zeros.

Actions are the policy's mean, as :meth:`ActorCritic.act_inference` returns it: any action scale or
default joint offset is the env's to apply. Files are written for the CPU.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

from ppo_bootstrap.modules.actor_critic import ActorCritic

# Isaac Lab's play.py writes these names under <run>/exported/.
ONNX_NAME = "policy.onnx"
TORCHSCRIPT_NAME = "policy.pt"
METADATA_NAME = "policy.json"


class _FeedForwardActor(nn.Module):
    """``obs [B, D] -> actions [B, A]``. Holds the actor only: the critic is not deployed."""

    def __init__(self, actor: nn.Module, num_actions: int) -> None:
        super().__init__()
        self.actor = actor
        self.num_actions = num_actions

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # act_inference's slice: a state-dependent std adds log-std columns after the mean
        return self.actor.step(obs, None)[0][:, : self.num_actions]


class _RecurrentActor(_FeedForwardActor):
    """``(obs [B, D], state_in [S, B, H]) -> (actions [B, A], state_out [S, B, H])``."""

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, state = self.actor.step(obs, state)
        return out[:, : self.num_actions], state


def _deployable(policy: ActorCritic, obs_dim: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A CPU copy of the actor in eval mode and example inputs for batch 1 (``policy`` is left as it is)."""
    actor = copy.deepcopy(policy.actor).cpu()
    example = (torch.zeros(1, obs_dim),)
    if policy.is_recurrent:
        example += (actor.initial_state(1, torch.device("cpu")),)
    wrapper = _RecurrentActor if policy.is_recurrent else _FeedForwardActor
    return wrapper(actor, policy.num_actions).eval(), example


def _names(policy: ActorCritic) -> tuple[list[str], list[str]]:
    if policy.is_recurrent:
        return ["obs", "state_in"], ["actions", "state_out"]
    return ["obs"], ["actions"]


@contextmanager
def _atomic(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` that replaces it once the block succeeds."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def _quiet_tracing() -> Iterator[None]:
    """Silence the warnings that tracing this actor always raises and that say nothing about it."""
    with warnings.catch_warnings():
        # Both formats come from the TorchScript tracer, which torch marks deprecated; deployment
        # stacks (Isaac Lab's play.py, C++ runners on the robot) still load exactly these files.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.(jit|onnx)")
        warnings.filterwarnings("ignore", category=DeprecationWarning, message="You are using the legacy TorchScript")
        # nn.GRU / nn.LSTM check input sizes in Python; a trace keeps the checks' outcome, not the
        # shapes, so batches of any size still run (tests/test_export.py steps other batch sizes).
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=r"torch\.nn\.modules\.rnn")
        # The exporter warns about RNN batch sizes unless h0 is an input; here it always is.
        warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size other than 1")
        yield


def export_actor_onnx(policy: ActorCritic, obs_dim: int, path: str | os.PathLike) -> None:
    """Write the actor of ``policy`` (normalizer and memory included) as an ONNX graph at ``path``.

    Inputs ``obs`` ``[B, D]`` (and ``state_in`` ``[S, B, H]``), outputs ``actions`` ``[B, A]`` (and
    ``state_out``), ``B`` dynamic; see the module docstring.
    """
    actor, example = _deployable(policy, obs_dim)
    input_names, output_names = _names(policy)
    batch_axes = {"obs": 0, "state_in": 1, "actions": 0, "state_out": 1}
    with _quiet_tracing(), _atomic(path) as tmp:
        torch.onnx.export(
            actor, example, str(tmp), dynamo=False, input_names=input_names, output_names=output_names,
            dynamic_axes={name: {batch_axes[name]: "batch"} for name in input_names + output_names},
        )


def export_actor_torchscript(policy: ActorCritic, obs_dim: int, path: str | os.PathLike) -> None:
    """Write the actor of ``policy`` (normalizer and memory included) as TorchScript at ``path``.

    ``torch.jit.load(path)`` alone runs it, without this package: ``obs`` ``[B, D]`` -> ``actions``
    ``[B, A]``, or ``(obs, state_in [S, B, H])`` -> ``(actions, state_out)`` for a recurrent policy,
    as the ONNX file.
    """
    actor, example = _deployable(policy, obs_dim)
    with _quiet_tracing(), _atomic(path) as tmp:
        torch.jit.save(torch.jit.trace(actor, example), str(tmp))


def policy_metadata(policy: ActorCritic, obs_dim: int) -> dict:
    """What the exported files take and return: names and shapes (``"batch"`` marks the free axis)."""
    inputs: dict[str, list[int | str]] = {"obs": ["batch", obs_dim]}
    outputs: dict[str, list[int | str]] = {"actions": ["batch", policy.num_actions]}
    recurrent = None
    if policy.is_recurrent:
        state = policy.actor.initial_state(1, torch.device("cpu"))
        state_shape = [state.shape[0], "batch", state.shape[2]]
        inputs["state_in"] = outputs["state_out"] = state_shape
        recurrent = {"kind": policy.cfg.recurrent, "layers": policy.cfg.rnn_layers, "state_shape": state_shape,
                     "reset": "zeros at the start of every episode"}
    return {
        "files": {"onnx": ONNX_NAME, "torchscript": TORCHSCRIPT_NAME},
        "obs_dim": obs_dim,
        "action_dim": policy.num_actions,
        "inputs": inputs,
        "outputs": outputs,
        "recurrent": recurrent,
        "obs_normalization": "included" if policy.cfg.obs_normalization else "none",
        "actions": "deterministic mean of the policy; the env applies any action scale and joint offsets",
    }


def export_policy(policy: ActorCritic, obs_dim: int, directory: str | os.PathLike) -> dict[str, Path]:
    """Write ``policy.onnx``, ``policy.pt`` (TorchScript) and ``policy.json`` into ``directory``.

    The two models have the same interface (module docstring); ``policy.json`` records it
    (:func:`policy_metadata`). Returns ``{"onnx": path, "torchscript": path, "metadata": path}``.
    An export cut short (an error, a second Ctrl-C) leaves no half set: the files it wrote go, and
    so does ``directory`` if it made it.
    """
    directory = Path(directory)
    made = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"onnx": directory / ONNX_NAME, "torchscript": directory / TORCHSCRIPT_NAME,
             "metadata": directory / METADATA_NAME}
    written: list[Path] = []
    try:
        export_actor_onnx(policy, obs_dim, paths["onnx"])
        written.append(paths["onnx"])
        export_actor_torchscript(policy, obs_dim, paths["torchscript"])
        written.append(paths["torchscript"])
        with _atomic(paths["metadata"]) as tmp:
            tmp.write_text(json.dumps(policy_metadata(policy, obs_dim), indent=2) + "\n")
    except BaseException:  # SystemExit and KeyboardInterrupt too: they are how a second Ctrl-C arrives
        for path in written:
            path.unlink(missing_ok=True)
        if made and not any(directory.iterdir()):
            directory.rmdir()
        raise
    return paths
