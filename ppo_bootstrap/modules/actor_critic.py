"""Gaussian actor-critic policies: MLP, and recurrent (GRU / LSTM) with per-env memory.

Recurrent state is one tensor per network, ``[S, N, H]`` (``S`` = layers for a GRU, ``2 * layers``
for an LSTM: ``h`` stacked over ``c``), so storage and resets index it the same way for both.
MLP policies carry ``None`` as state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.distributions import Normal

from ppo_bootstrap.episode import State, reset_memory
from ppo_bootstrap.modules.normalizer import EmpiricalNormalization, MomentsReduce


@dataclass
class PolicyConfig:
    """Network shape. Defaults follow common G1 velocity-tracking setups."""

    actor_hidden: tuple[int, ...] = (512, 256, 128)
    critic_hidden: tuple[int, ...] = (512, 256, 128)
    activation: str = "elu"
    init_noise_std: float = 1.0
    std_type: Literal["scalar", "log", "state_dependent"] = "scalar"
    """``scalar``/``log``: a state-independent std parameter (as is or in log space); ``state_dependent``:
    the actor outputs mean and log-std."""
    obs_normalization: bool = True
    recurrent: Literal["gru", "lstm"] | None = None
    rnn_hidden: int = 256
    rnn_layers: int = 1


_ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh, "selu": nn.SELU, "silu": nn.SiLU}


def mlp(in_dim: int, hidden: tuple[int, ...], out_dim: int, activation: str) -> nn.Sequential:
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), _ACTIVATIONS[activation]()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class Memory(nn.Module):
    """A GRU or LSTM run one step at a time, with its state as a single ``[S, N, H]`` tensor."""

    def __init__(self, kind: Literal["gru", "lstm"], in_dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        if kind not in ("gru", "lstm"):
            raise ValueError(f"recurrent must be 'gru', 'lstm' or None, got {kind!r}")
        self.kind = kind
        self.layers = layers
        self.hidden = hidden
        self.rnn = (nn.GRU if kind == "gru" else nn.LSTM)(in_dim, hidden, num_layers=layers)

    def initial_state(self, n: int, device: torch.device) -> torch.Tensor:
        slots = self.layers * (2 if self.kind == "lstm" else 1)
        return torch.zeros(slots, n, self.hidden, device=device)

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: ``x`` ``[N, D]``, ``state`` ``[S, N, H]`` -> ``([N, H], [S, N, H])``."""
        if self.kind == "gru":
            out, h = self.rnn(x.unsqueeze(0), state.contiguous())
            return out.squeeze(0), h
        h, c = state.chunk(2, dim=0)
        out, (h, c) = self.rnn(x.unsqueeze(0), (h.contiguous(), c.contiguous()))
        return out.squeeze(0), torch.cat([h, c], dim=0)

    def sequence(self, x: torch.Tensor, state: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """Run ``T`` steps; ``x`` ``[T, B, D]``, ``state`` ``[S, B, H]`` before step 0.

        ``starts`` ``[T, B]`` bool marks steps that begin a new episode: the state is zeroed before
        them, so no hidden state crosses an episode end. Returns ``[T, B, H]``.
        """
        outputs = []
        for t in range(x.shape[0]):
            state = reset_memory(state, starts[t])  # the episode rule: memory restarts at an episode's first step
            out, state = self(x[t], state)
            outputs.append(out)
        return torch.stack(outputs)


class _Network(nn.Module):
    """normalizer -> (memory) -> MLP head. Used for both actor and critic."""

    def __init__(self, in_dim: int, out_dim: int, hidden: tuple[int, ...], cfg: PolicyConfig) -> None:
        super().__init__()
        self.normalizer = EmpiricalNormalization(in_dim) if cfg.obs_normalization else nn.Identity()
        self.memory = Memory(cfg.recurrent, in_dim, cfg.rnn_hidden, cfg.rnn_layers) if cfg.recurrent else None
        self.head = mlp(cfg.rnn_hidden if self.memory else in_dim, hidden, out_dim, cfg.activation)

    def update_normalizer(self, obs: torch.Tensor, reduce: MomentsReduce | None = None) -> None:
        if isinstance(self.normalizer, EmpiricalNormalization):
            self.normalizer.update(obs, reduce)

    def initial_state(self, n: int, device: torch.device) -> State:
        return self.memory.initial_state(n, device) if self.memory is not None else None

    def step(self, obs: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """``obs`` ``[N, D]`` -> (output ``[N, O]``, next state)."""
        x = self.normalizer(obs)
        if self.memory is not None:
            x, state = self.memory(x, state)
        return self._head(x), state

    def sequence(self, obs: torch.Tensor, state: State, starts: torch.Tensor | None) -> torch.Tensor:
        """``obs`` ``[T, B, D]`` (or ``[B, D]`` for MLPs) -> outputs of the same leading shape."""
        x = self.normalizer(obs)
        if self.memory is not None:
            x = self.memory.sequence(x, state, starts)
        return self._head(x)

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP; under autocast (``PPOConfig.bf16_update``) its last layer runs in float32: it is
        the narrow one, and the means and values it gives feed log-probs, ratios and the KL."""
        if not torch.is_autocast_enabled(x.device.type):
            return self.head(x)
        hidden = self.head[:-1](x)
        with torch.autocast(x.device.type, enabled=False):
            return self.head[-1](hidden.float())


class ActorCritic(nn.Module):
    """Gaussian policy and value function, each with its own normalizer (and memory, if recurrent).

    Args:
        policy_dim: size of the ``"policy"`` observation group.
        critic_dim: size of the critic's input (the ``"critic"`` group when present).
        num_actions: action size ``A``.
        cfg: :class:`PolicyConfig`.
    """

    def __init__(self, policy_dim: int, critic_dim: int, num_actions: int, cfg: PolicyConfig) -> None:
        super().__init__()
        if cfg.std_type not in ("scalar", "log", "state_dependent"):
            raise ValueError(f"std_type must be 'scalar', 'log' or 'state_dependent', got {cfg.std_type!r}")
        if cfg.init_noise_std <= 0:
            raise ValueError(f"init_noise_std must be positive, got {cfg.init_noise_std}")
        self.cfg = cfg
        self.num_actions = num_actions
        actor_out = 2 * num_actions if cfg.std_type == "state_dependent" else num_actions
        self.actor = _Network(policy_dim, actor_out, cfg.actor_hidden, cfg)
        self.critic = _Network(critic_dim, 1, cfg.critic_hidden, cfg)
        if cfg.std_type == "scalar":
            self.std_param = nn.Parameter(cfg.init_noise_std * torch.ones(num_actions))
        elif cfg.std_type == "log":
            self.std_param = nn.Parameter(torch.log(cfg.init_noise_std * torch.ones(num_actions)))
        else:
            # Start at init_noise_std: zero the log-std half of the last layer, bias = log(std).
            last = self.actor.head[-1]
            with torch.no_grad():
                last.weight[num_actions:].zero_()
                last.bias[num_actions:].fill_(float(torch.log(torch.tensor(cfg.init_noise_std))))

    @property
    def is_recurrent(self) -> bool:
        return self.cfg.recurrent is not None

    def parameter_groups(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        """(the actor's parameters with its noise std, the critic's): every parameter, once."""
        critic = list(self.critic.parameters())
        in_critic = {id(p) for p in critic}
        return [p for p in self.parameters() if id(p) not in in_critic], critic

    def initial_state(self, n: int, device: torch.device) -> tuple[State, State]:
        """Zero (actor, critic) states for ``n`` envs."""
        return self.actor.initial_state(n, device), self.critic.initial_state(n, device)

    def update_normalizers(
        self, policy_obs: torch.Tensor, critic_obs: torch.Tensor, reduce: MomentsReduce | None = None
    ) -> None:
        """Merge ``[B, D]`` batches into the actor's and critic's normalizers (``reduce``: across processes)."""
        self.actor.update_normalizer(policy_obs, reduce)
        self.critic.update_normalizer(critic_obs, reduce)

    def _distribution(self, out: torch.Tensor) -> Normal:
        if self.cfg.std_type == "state_dependent":
            mean, log_std = out.split(self.num_actions, dim=-1)
            return Normal(mean, log_std.exp(), validate_args=False)
        std = self.std_param if self.cfg.std_type == "scalar" else self.std_param.exp()
        # no argument validation: it would cost a host sync per call on GPU
        return Normal(out, std.clamp_min(1e-6).expand_as(out), validate_args=False)

    def act(self, policy_obs: torch.Tensor, state: State) -> tuple[Normal, State]:
        """One step of the actor: action distribution over ``[N, A]`` and the next actor state."""
        out, state = self.actor.step(policy_obs, state)
        return self._distribution(out), state

    def act_inference(self, policy_obs: torch.Tensor, state: State = None) -> tuple[torch.Tensor, State]:
        """Deterministic action (the mean) ``[N, A]`` and the next actor state."""
        out, state = self.actor.step(policy_obs, state)
        return out[..., : self.num_actions], state

    def value(self, critic_obs: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """One step of the critic: ``V`` ``[N]`` and the next critic state."""
        out, state = self.critic.step(critic_obs, state)
        return out.squeeze(-1), state

    def evaluate(
        self,
        policy_obs: torch.Tensor,
        critic_obs: torch.Tensor,
        states: tuple[State, State] = (None, None),
        starts: torch.Tensor | None = None,
    ) -> tuple[Normal, torch.Tensor]:
        """Distribution and values for a training batch.

        MLP: ``[B, D]`` inputs. Recurrent: ``[T, B, D]`` sequences with ``states`` before step 0
        and ``starts`` ``[T, B]`` marking episode starts (see :meth:`Memory.sequence`).
        """
        dist = self._distribution(self.actor.sequence(policy_obs, states[0], starts))
        values = self.critic.sequence(critic_obs, states[1], starts).squeeze(-1)
        return dist, values
