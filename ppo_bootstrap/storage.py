"""Rollout storage that keeps terminated, truncated and the true final observation apart.

Per-step data lives in a :class:`tensordict.TensorDict` of batch ``[T, N]``. Terminal observations
are stored compactly: only the rows of envs that ended, ``[K]`` in all, with the step and env id
they belong to (and, for recurrent critics, the critic state from *before* the reset). A 4096-env,
24-step rollout with a handful of ends per step thus adds a few hundred rows, not a second
``[T, N]`` observation buffer.

An env that reports the dense form (``final_obs_all``, every env's pre-reset observation) skips
the per-step ``nonzero`` that finding the ``K`` ids costs on a GPU; then the storage copies the
critic's group into a ``[T, N, D]`` buffer each step (no host synchronisation) and picks the ended
rows once, in :meth:`RolloutStorage.finish`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ppo_bootstrap.env import ObsGroups, StepResult, critic_group
from ppo_bootstrap.episode import State, done_mask

if TYPE_CHECKING:
    from tensordict import TensorDict


def tensordict_class() -> type[TensorDict]:
    """``tensordict.TensorDict``, imported at first use: tensordict imports ``torch._dynamo``, seconds
    with torch's CUDA build, so importing the library leaves it to the first storage built, or to an
    application that imports it beside its env build."""
    from tensordict import TensorDict

    return TensorDict


@dataclass
class Transition:
    """What the policy did at step ``t``, before the env answered. ``N`` envs, ``A`` actions.

    Attributes:
        obs: the observation groups acted on, ``[N, D_g]`` each.
        actions, action_mean, action_std: ``[N, A]``.
        log_probs, values: ``[N]``.
        critic_state: critic state ``[S, N, H]`` after step ``t`` and before any reset (``None``
            for MLPs): ``V(s_final)`` of an episode ending at ``t`` continues this memory.
    """

    obs: ObsGroups
    actions: torch.Tensor
    action_mean: torch.Tensor
    action_std: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    critic_state: State = None


@dataclass
class TerminalRows:
    """The final observations of every episode that ended inside a rollout, ``K`` rows in all.

    Attributes:
        obs: batch ``[K]``, one group per observation group, captured before the reset.
        step: ``[K]`` long, the step ``t`` at which each episode ended.
        env_id: ``[K]`` long, its env.
        critic_state: ``[S, K, H]`` pre-reset critic state of each row, ``None`` for MLPs.
    """

    obs: TensorDict
    step: torch.Tensor
    env_id: torch.Tensor
    critic_state: State = None

    @property
    def num_rows(self) -> int:
        return int(self.step.shape[0])


class RolloutStorage:
    """Transitions of one rollout of ``num_steps`` x ``num_envs``.

    Fields of :attr:`data` (batch ``[T, N]``): ``obs/<group>`` ``[T, N, D_g]``, ``actions``,
    ``action_mean``, ``action_std`` ``[T, N, A]``, ``log_probs``, ``values``, ``rewards`` ``[T, N]``,
    ``terminated``, ``truncated`` ``[T, N]`` bool; after :meth:`set_returns` also ``advantages`` and
    ``returns`` ``[T, N]``. After :meth:`track_importance_weights` also ``importance_weights`` ``[T, N]``
    (ones until the learner writes them), for a rollout that another policy than the update's acted.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_shapes: dict[str, tuple[int, ...]],
        num_actions: int,
        device: torch.device | str,
    ) -> None:
        self.num_steps = num_steps
        self.num_envs = num_envs
        self.device = torch.device(device)
        T, N, A = num_steps, num_envs, num_actions

        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(T, N, *shape, dtype=dtype, device=self.device)

        tensordict = tensordict_class()
        self.data = tensordict(
            {
                "obs": tensordict({g: zeros(*s) for g, s in obs_shapes.items()}, batch_size=[T, N]),
                "actions": zeros(A),
                "action_mean": zeros(A),
                "action_std": zeros(A),
                "log_probs": zeros(),
                "values": zeros(),
                "rewards": zeros(),
                "terminated": zeros(dtype=torch.bool),
                "truncated": zeros(dtype=torch.bool),
                "advantages": zeros(),
                "returns": zeros(),
            },
            batch_size=[T, N],
            device=self.device,
        )
        self.initial_states: tuple[State, State] = (None, None)
        self.step = 0
        self._terminal: list[tuple[int, torch.Tensor, ObsGroups, State]] = []
        # the dense form: the critic's group of final_obs_all [T, N, D] (and critic state [T, S, N, H]),
        # allocated on the first such step, and the steps that used it
        self._final_all: dict[str, torch.Tensor] = {}
        self._final_all_state: torch.Tensor | None = None
        self._dense_steps: list[int] = []
        self._order_generator: torch.Generator | None = None  # draws the update's shuffles on the device
        self.terminal: TerminalRows | None = None

    def track_importance_weights(self) -> None:
        """Add the ``importance_weights`` field (ones), before any update reads this storage: an update
        recorded as a CUDA graph reads the fields it was captured with, in place."""
        if "importance_weights" not in self.data.keys():
            self.data["importance_weights"] = torch.ones(self.num_steps, self.num_envs, device=self.device)

    def start(self, states: tuple[State, State]) -> None:
        """Begin a rollout; ``states`` are the (actor, critic) recurrent states before its first step."""
        self.step = 0
        self._terminal.clear()
        self._dense_steps.clear()
        self.terminal = None
        self.initial_states = tuple(s.clone() if s is not None else None for s in states)  # type: ignore[assignment]

    def add(self, transition: Transition, result: StepResult) -> None:
        """Record step ``t``: what the policy did (``transition``) and how the env answered (``result``).

        Only the ``K`` ended rows of ``result.final_obs`` are kept, with their step, env id and the
        pre-reset critic state; the post-reset ``result.obs`` is the next transition's business.
        With ``result.final_obs_all`` (the dense form) the critic's group of every env is kept
        instead, and :meth:`finish` picks the ended rows.
        """
        if self.step >= self.num_steps:
            raise RuntimeError(f"rollout storage is full ({self.num_steps} steps); call start() first")
        t = self.step
        row = self.data[t]
        for group, value in transition.obs.items():
            row["obs", group].copy_(value)
        row["actions"].copy_(transition.actions)
        row["action_mean"].copy_(transition.action_mean)
        row["action_std"].copy_(transition.action_std)
        row["log_probs"].copy_(transition.log_probs)
        row["values"].copy_(transition.values)
        row["rewards"].copy_(result.reward)
        row["terminated"].copy_(result.terminated)
        row["truncated"].copy_(result.truncated)
        if result.final_obs_all is not None:
            self._add_dense(t, result.final_obs_all, transition.critic_state)
        elif result.final_env_ids.numel():
            # Plain tensors per step (no per-step TensorDict): this sits on the env-step hot path.
            ids = result.final_env_ids.to(device=self.device, dtype=torch.long)
            state = transition.critic_state
            state_rows = state[:, ids] if state is not None else None
            self._terminal.append((t, ids, {g: v.to(self.device) for g, v in result.final_obs.items()}, state_rows))
        self.step += 1

    def _add_dense(self, t: int, final_obs_all: ObsGroups, state: State) -> None:
        """Keep step ``t``'s pre-reset critic observation ``[N, D]`` and critic state of every env."""
        group = critic_group(final_obs_all)
        value = final_obs_all[group]
        buffer = self._final_all.get(group)
        if buffer is None or buffer.shape[2:] != value.shape[1:]:
            buffer = self._final_all[group] = torch.empty(
                self.num_steps, *value.shape, dtype=value.dtype, device=self.device
            )
        buffer[t].copy_(value)
        if state is not None:
            if self._final_all_state is None or self._final_all_state.shape[1:] != state.shape:
                self._final_all_state = torch.empty(self.num_steps, *state.shape, dtype=state.dtype, device=self.device)
            self._final_all_state[t].copy_(state)
        self._dense_steps.append(t)

    def _dense_rows(self) -> tuple[torch.Tensor, torch.Tensor, ObsGroups, State]:
        """``(step, env_id, obs, critic_state)`` of the envs that ended on the dense steps: one ``nonzero``."""
        steps = torch.tensor(self._dense_steps, device=self.device)
        ended = done_mask(self.data["terminated"][steps], self.data["truncated"][steps])
        at, env_id = torch.nonzero(ended, as_tuple=True)
        step = steps[at]
        obs = {g: buffer[step, env_id] for g, buffer in self._final_all.items()}
        state = None
        if self._final_all_state is not None:
            state = self._final_all_state[step, :, env_id].transpose(0, 1)  # [K, S, H] -> [S, K, H]
        return step, env_id, obs, state

    def finish(self) -> TerminalRows | None:
        """Close the rollout; return its terminal rows (``None`` when no episode ended), ordered by
        step, then env id within a step."""
        if self.step != self.num_steps:
            raise RuntimeError(f"rollout has {self.step} of {self.num_steps} steps")
        parts = [(torch.full((i.numel(),), t, device=self.device), i, o, s) for t, i, o, s in self._terminal]
        mixed = bool(self._terminal) and bool(self._dense_steps)  # e.g. a blow-up repaired into the sparse form
        if self._dense_steps:
            dense = self._dense_rows()
            # the dense steps kept only the critic's group: the sparse rows give the same one
            parts = [(t, i, {g: o[g] for g in dense[2]}, s) for t, i, o, s in parts] + [dense]
        self._terminal.clear()
        self._dense_steps.clear()
        if not parts or sum(p[1].numel() for p in parts) == 0:
            self.terminal = None
            return None
        step = torch.cat([p[0] for p in parts])
        env_id = torch.cat([p[1] for p in parts]).to(torch.long)
        obs = {g: torch.cat([p[2][g] for p in parts]) for g in parts[0][2]}
        state = torch.cat([p[3] for p in parts], dim=1) if parts[0][3] is not None else None
        if mixed:  # each form is in (step, env id) order on its own
            order = torch.argsort(step * self.num_envs + env_id, stable=True)
            step, env_id = step[order], env_id[order]
            obs = {g: v[order] for g, v in obs.items()}
            state = state[:, order] if state is not None else None
        self.terminal = TerminalRows(
            obs=type(self.data)(obs, batch_size=[step.shape[0]], device=self.device),
            step=step,
            env_id=env_id,
            critic_state=state,
        )
        return self.terminal

    def set_returns(self, advantages: torch.Tensor, returns: torch.Tensor) -> None:
        self.data["advantages"].copy_(advantages)
        self.data["returns"].copy_(returns)

    def episode_starts(self) -> torch.Tensor:
        """``[T, N]`` bool: step ``t`` is the first of a new episode (an end at ``t - 1``)."""
        starts = torch.zeros_like(self.data["terminated"])
        starts[1:] = done_mask(self.data["terminated"][:-1], self.data["truncated"][:-1])
        return starts

    @property
    def is_recurrent(self) -> bool:
        return any(s is not None for s in self.initial_states)

    def permutations(
        self, count: int, num_mini_batches: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, int]:
        """``count`` shuffled orders of the samples (envs, if recurrent), ``[count, n]`` on the device,
        and the mini-batch size.

        Each order is drawn where the storage lives, by a generator seeded with one number from
        ``generator`` (the runner's CPU generator; the default one if ``None``). So the host does no
        work of size ``n`` and copies nothing, work that other processes' CPU load could delay
        while the GPU waits. One seed per order means ``count`` calls of :meth:`permutation` give
        the same orders as one call here, and a checkpoint's CPU generator state still fixes every
        shuffle after a resume.
        """
        n = self.num_envs if self.is_recurrent else self.num_steps * self.num_envs
        if n % num_mini_batches:
            unit = "envs" if self.is_recurrent else "samples"
            raise ValueError(f"{n} {unit} do not split into {num_mini_batches} mini-batches")
        seeds = torch.randint(0, 2**62, (count,), generator=generator).tolist()  # CPU: no device sync
        if self._order_generator is None:
            self._order_generator = torch.Generator(device=self.device)
        orders = []
        for seed in seeds:
            self._order_generator.manual_seed(seed)
            orders.append(torch.randperm(n, generator=self._order_generator, device=self.device))
        return torch.stack(orders), n // num_mini_batches

    def permutation(self, num_mini_batches: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, int]:
        """A shuffled order of samples (envs, if recurrent) ``[n]`` on the device, and the mini-batch size."""
        orders, size = self.permutations(1, num_mini_batches, generator)
        return orders[0], size

    def mini_batches(
        self, num_mini_batches: int, generator: torch.Generator | None = None, order: torch.Tensor | None = None
    ) -> Iterator[tuple[TensorDict, tuple[State, State], torch.Tensor | None]]:
        """One epoch of mini-batches: ``(batch, initial_states, starts)``.

        Feed-forward (no recurrent state stored): shuffled samples, batch ``[B]``, states ``(None, None)``
        and ``starts`` ``None``. Recurrent: whole env columns, batch ``[T, B_env]``, with each
        column's state before step 0 and its episode starts, so no hidden state crosses an episode end.
        ``order``: the samples' (envs', if recurrent) order ``[n]``, one of :meth:`permutations`;
        drawn from ``generator`` when ``None``.
        """
        recurrent = self.is_recurrent
        if order is None:
            perm, size = self.permutation(num_mini_batches, generator)
        else:
            perm, size = order, order.shape[0] // num_mini_batches
        if not recurrent:
            flat = self.data.reshape(-1)
            for i in range(num_mini_batches):
                yield flat[perm[i * size : (i + 1) * size]], (None, None), None
            return
        starts = self.episode_starts()
        for i in range(num_mini_batches):
            idx = perm[i * size : (i + 1) * size]
            states = tuple(s[:, idx] if s is not None else None for s in self.initial_states)
            yield self.data[:, idx], states, starts[:, idx]  # type: ignore[misc]
