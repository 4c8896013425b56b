"""The G1 env's whole step (task and physics) recorded once in a torch CUDA graph and replayed.

One recorder, :class:`StepGraph`, for both G1 envs that run on a GPU: the MuJoCo Warp env
(:class:`~isaac_adapter.tasks.g1_walk.env.G1WalkEnv`, its ``_step_body``) and Isaac Lab's
(:class:`~isaac_adapter.isaaclab.g1_direct.G1WalkDirectEnv`, ``DirectRLEnv.step`` with Newton's
physics inside); each hands it its step, how its physics joins torch's stream, and the host work
a replay skips.

On a GPU the task's step is about 280 small tensor operations (``benchmarks/step_ops.py``), each a
launch and a pass through Python: at 4,096 envs they take as long as the physics. Replaying them
from one graph costs one launch. What a replay needs, and where it is done:

* every buffer the step keeps is written in place, because a graph replays fixed addresses: the
  task rebinds some each step (``self.state = ...``, ``self.last_action = self.actions``), so
  :func:`pinned` runs the step and copies what was rebound back into the buffers it had before
  (:func:`unshare`, before the warm-up step and again before the recording, gives each buffer its
  own storage, so that no copy lands in another's);
* the physics records into the same graph: the backend runs its Warp work eagerly on torch's
  stream while torch captures (``on_torch_stream``), and does its host bookkeeping (counters, the
  periodic health check, a host read) after each replay (``after_replay``);
* the reward ramps read an env-step count that the graph advances on the device
  (``G1WalkTask.reward_step_on_device``), the task's random generator is registered with the graph;
* the step's outputs live in the graph's memory and the next replay overwrites them, so each
  replay's are copied out (the log scalars as one vector, one copy);
* host decisions made while recording (the config, held commands) are frozen into the graph, and
  so are the buffers' addresses: a change to ``task_cfg``, or an eager ``reset``, ``load_state_dict``
  or ``set_commands`` (they rebind buffers), records the graph again at the next step.

The first graphed step runs eagerly (on a side stream, the warm-up torch asks for before a
capture) and returns that step's result; the recording follows it and runs nothing; every later
step is a replay. Replayed steps draw their random numbers from the graph's own offsets of the
generator, so their random stream is not the eager one, and MuJoCo Warp run inside another graph
differs from its own graphs in the last bits; a graphed env is not a bitwise twin of an eager one.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from isaac_adapter.backends.base import PhysicsState


def _buffers(owner: Any) -> dict[str, torch.Tensor | PhysicsState]:
    """The tensors and physics states held as attributes of ``owner``: what a step may read or rebind."""
    return {name: value for name, value in vars(owner).items() if isinstance(value, (torch.Tensor, PhysicsState))}


def _tensors(value: torch.Tensor | PhysicsState) -> list[torch.Tensor]:
    return list(value.as_dict().values()) if isinstance(value, PhysicsState) else [value]


def unshare(owner: Any) -> None:
    """Give every buffer of ``owner`` (tensor or :class:`PhysicsState` attribute) storage of its own:
    a view, or a tensor whose storage another buffer also uses, is replaced by a copy. Buffers that
    alias (``last_action`` is ``actions`` after a step) would otherwise receive two copies in
    :func:`pinned`."""
    seen: set[int] = set()
    for name, value in _buffers(owner).items():
        fresh = []
        changed = False
        for t in _tensors(value):
            key = t.untyped_storage().data_ptr()
            if t._base is not None or key in seen:
                t, changed = t.clone(), True
            seen.add(t.untyped_storage().data_ptr())
            fresh.append(t)
        if changed:
            if isinstance(value, PhysicsState):
                setattr(owner, name, PhysicsState(**dict(zip(value.as_dict(), fresh))))
            else:
                setattr(owner, name, fresh[0])


def pinned(owner: Any, body: Callable[[], Any]) -> Any:
    """Run ``body()`` and leave ``owner``'s buffers where they were: each buffer that ``body`` rebound
    to another tensor (or physics state) is copied back into the one it had before, which it holds
    again. Returns what ``body`` returned (whose tensors are the rebound ones, not the buffers).

    Raises:
        ValueError: ``body`` rebound a buffer to a value of another shape, dtype or kind; names it.
    """
    before = _buffers(owner)
    out = body()
    for name, old in before.items():
        new = getattr(owner, name)
        if new is old:
            continue
        if type(new) is not type(old):
            raise ValueError(f"{name}: a recorded step rebinds it to a {type(new).__name__}, not a {type(old).__name__}")
        for dst, src in zip(_tensors(old), _tensors(new)):
            if dst.shape != src.shape or dst.dtype != src.dtype:
                raise ValueError(f"{name}: a recorded step rebinds it to {tuple(src.shape)} {src.dtype}, "
                                 f"was {tuple(dst.shape)} {dst.dtype}")
            dst.copy_(src)
        setattr(owner, name, old)
    return out


class _Outputs:
    """A step's outputs as recorded in the graph: fixed tensors, copied out after each replay.

    The result may be a :class:`~ppo_bootstrap.env.StepResult` or Isaac Lab's ``(obs, reward,
    terminated, time_outs, extras)``: any nesting of dataclasses, tuples, lists and dicts. Each tensor
    is copied once however often it is named, and a ``"log"`` mapping's 0-dim scalars are copied as
    one stacked vector (one copy per replay, not one per key).
    """

    def __init__(self, result: Any) -> None:
        self.result = result
        self.logs: list[tuple[dict[str, Any], list[str], torch.Tensor]] = []
        self._find_logs(result, "")

    def _find_logs(self, value: Any, key: str) -> None:
        if isinstance(value, dict):
            if key == "log":
                plain = [k for k, v in value.items() if not isinstance(v, torch.Tensor)]
                if plain:  # a Python number would be frozen into the graph at its recorded value
                    raise ValueError(f"cuda_graph: log values must be tensors, got Python numbers for {plain}")
                if value and all(v.dim() == 0 for v in value.values()):
                    self.logs.append((value, list(value), torch.stack([v.float() for v in value.values()])))
                    return
            for k, v in value.items():
                self._find_logs(v, str(k))
        elif isinstance(value, (list, tuple)):
            for v in value:
                self._find_logs(v, "")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                self._find_logs(getattr(value, f.name), f.name)

    def copy(self) -> Any:
        copies: dict[int, Any] = {}
        logs = {id(d): dict(zip(names, stacked.clone().unbind(0))) for d, names, stacked in self.logs}

        def out(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                if id(value) not in copies:  # one copy per tensor, however often it is named
                    copies[id(value)] = value.clone()
                return copies[id(value)]
            if isinstance(value, dict):
                return logs[id(value)] if id(value) in logs else {k: out(v) for k, v in value.items()}
            if isinstance(value, tuple):
                return tuple(out(v) for v in value)
            if isinstance(value, list):
                return [out(v) for v in value]
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                return dataclasses.replace(value, **{f.name: out(getattr(value, f.name))
                                                     for f in dataclasses.fields(value) if f.init})
            return value

        return out(self.result)


class StepGraph:
    """Records an env's whole step in one torch CUDA graph and replays it (see the module docstring).

    Args:
        env: the G1 env (a :class:`~isaac_adapter.tasks.g1_walk.task.G1WalkTask`): its buffers,
            ``task_cfg``, ``generator``, ``common_step_counter`` and ``reward_step_on_device``.
        body: the step's device work and its Python, ``body(actions) -> result``.
        on_torch_stream: a context in which the physics runs its work eagerly on torch's current
            stream, so that a capture records it.
        after_replay: the host side of a step that a replay skips (step counters, health checks).
        counts_inside: whether ``body`` advances ``env.common_step_counter`` itself (Isaac Lab's
            ``DirectRLEnv.step``); otherwise the caller advances it before each step.
    """

    def __init__(self, env: Any, body: Callable[[torch.Tensor], Any], on_torch_stream: Callable[[], Any],
                 after_replay: Callable[[], None], counts_inside: bool = False) -> None:
        if torch.device(env.device).type != "cuda":
            raise ValueError(f"cuda_graph: a step is recorded only on CUDA; this env runs on {env.device}; "
                             "set env.cuda_graph = False")
        self.env = env
        self.body, self.on_torch_stream, self.after_replay = body, on_torch_stream, after_replay
        self.counts_inside = counts_inside
        self.graph: torch.cuda.CUDAGraph | None = None
        self.recorded_cfg: Any = None
        self.recorded_buffers: dict[str, Any] = {}
        self.actions: torch.Tensor | None = None
        self.outputs: _Outputs | None = None

    def is_current(self) -> bool:
        """Whether the graph still fits the env: the same config, and the same buffer objects (an
        eager ``reset``, ``load_state_dict`` or ``set_commands`` rebinds some, and the graph would
        read the old ones)."""
        env = self.env
        if self.graph is None or self.recorded_cfg != env.task_cfg:
            return False
        now = _buffers(env)
        return now.keys() == self.recorded_buffers.keys() and all(now[k] is v for k, v in self.recorded_buffers.items())

    def step(self, actions: torch.Tensor) -> Any:
        """One env step: a replay, or (first, and whenever the graph no longer fits) an eager step
        followed by a recording."""
        if not self.is_current():
            return self._record(actions)
        self.actions.copy_(actions)
        self.graph.replay()
        self.after_replay()
        return self.outputs.copy()

    def _record(self, actions: torch.Tensor) -> Any:
        env = self.env
        self.release()
        unshare(env)
        # the warm-up torch asks for before a capture, on a side stream: this call's real step
        current = torch.cuda.current_stream(env.device)
        side = torch.cuda.Stream(env.device)
        side.wait_stream(current)
        with torch.cuda.stream(side), self.on_torch_stream():
            result = pinned(env, lambda: self.body(actions))
        current.wait_stream(side)
        if not self.counts_inside:
            self.after_replay()
        unshare(env)  # again: the first step may have made buffers (the task's per-step ones)

        # the recording runs the step's Python once and no device work; the host count it sees is
        # the next step's, as at every replay (the graph advances the device count by one)
        self.actions = actions.detach().clone()
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(env.generator)
        count = env.common_step_counter
        env.reward_step_on_device = True
        try:
            if not self.counts_inside:
                env.common_step_counter = count + 1
            with torch.cuda.graph(graph, capture_error_mode="thread_local"), self.on_torch_stream():
                self.outputs = _Outputs(pinned(env, lambda: self.body(self.actions)))
        except BaseException:
            env.reward_step_on_device = False
            raise
        finally:
            env.common_step_counter = count
        self.graph = graph
        self.recorded_cfg = copy.deepcopy(env.task_cfg)
        self.recorded_buffers = _buffers(env)
        return result

    def release(self) -> None:
        """Drop the graph: the env steps eagerly until it is recorded again."""
        self.graph = None
        self.recorded_buffers = {}
        self.env.reward_step_on_device = False
