"""Proximal Policy Optimization with exact timeout bootstrapping."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

import torch
from torch import nn

from ppo_bootstrap import distributed
from ppo_bootstrap.env import CRITIC, POLICY, ObsGroups, StepResult, critic_obs
from ppo_bootstrap.episode import TIMEOUT_BOOTSTRAP_MODES, State, TimeoutBootstrap, bootstrap_values, end_step, value_targets
from ppo_bootstrap.modules.actor_critic import ActorCritic
from ppo_bootstrap.storage import RolloutStorage, TerminalRows, Transition
from ppo_bootstrap.symmetry import Symmetry

if TYPE_CHECKING:
    from tensordict import TensorDict


Shuffle = Literal["every_epoch", "once"]
SHUFFLES: tuple[str, ...] = get_args(Shuffle)
"""The values of :attr:`PPOConfig.shuffle`."""


@dataclass
class PPOConfig:
    """PPO hyper-parameters; defaults are the ones legged-robot users know from rsl_rl / Isaac Lab."""

    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    gamma: float = 0.99
    lam: float = 0.95
    value_loss_coef: float = 1.0
    use_clipped_value_loss: bool = True
    entropy_coef: float = 0.008
    learning_rate: float = 1e-3
    max_grad_norm: float = 1.0
    clip_grad_per_network: bool = False
    """Clip the actor's gradient (its noise std with it) and the critic's to ``max_grad_norm`` each,
    as rsl-rl-lib 4.x/5.x do (``RunnerConfig.from_rsl_rl`` sets it for their ``actor``/``critic``
    configs). ``False``: one norm over both, as rsl-rl-lib 3.x's ``ActorCritic`` and the project's
    recipes; there a large value-loss gradient shrinks the actor's step too."""
    schedule: Literal["adaptive", "fixed"] = "adaptive"
    """``adaptive``: scale the learning rate by 1.5 to keep the KL near ``desired_kl``."""
    desired_kl: float = 0.01
    adaptive_every: Literal["mini_batch", "update"] = "mini_batch"
    """When the ``adaptive`` schedule decides. ``mini_batch`` (rsl_rl's): after every mini-batch, on
    the KL of the update so far, which starts at 0 and grows over the epochs, so the rate rises
    over the first mini-batches and falls over the last ones of every update, and the rate logged
    (the last) is the trough of that saw. ``update``: once per update, on the mean KL of its last
    epoch (the whole update's move), as the adaptive-KL rule of the PPO paper adapts its penalty."""
    min_learning_rate: float = 1e-5
    max_learning_rate: float = 1e-2
    shuffle: Shuffle = "every_epoch"
    """The order of the samples over an update's epochs: ``every_epoch`` draws a new order for each
    epoch; ``once`` draws one order per update and keeps it for every epoch, as rsl-rl-lib's
    mini-batch generator does (``RunnerConfig.from_rsl_rl`` sets it), so mini-batch ``i`` holds the
    same samples in every epoch."""
    normalize_advantage: bool = True
    """Normalize the advantages to mean 0 and std 1 over the whole rollout (every rank's)."""
    normalize_advantage_per_mini_batch: bool = False
    """Normalize each mini-batch's advantages over its own samples (before any mirroring) instead of
    the rollout's, as rsl_rl's option of that name; needs ``normalize_advantage``."""
    bf16_update: bool = False
    """Run the networks' hidden layers in bfloat16 (``torch.autocast``) during the update only; the
    output layers, the distribution, the losses and the optimizer stay float32, and rollouts and
    value targets are computed in float32 as before. Halves the matmul and activation traffic of the
    update, which dominates an iteration at large batches; a speed option, off by default."""
    cuda_graph: bool = True
    """On CUDA, feed-forward, single process: capture one mini-batch step (gather, forward, backward,
    clipping, Adam, KL schedule) as a CUDA graph and replay it, so launch overhead disappears."""
    timeout_bootstrap: TimeoutBootstrap = "exact"
    """How truncated steps are valued (:data:`ppo_bootstrap.episode.TimeoutBootstrap`): ``exact``
    (this library), ``state_value`` (rsl_rl's ``V(s_t)``) or ``none`` (timeout as a fall)."""
    symmetry_augmentation: bool = False
    """Train on every mini-batch and on its left-right mirror image (twice the samples per step);
    needs a :class:`~ppo_bootstrap.symmetry.Symmetry` (the env's ``symmetry``) and a feed-forward policy."""
    symmetry_loss_coef: float = 0.0
    """Weight of the mirror loss ``mean || mu(mirror(o)) - mirror(mu(o)) ||^2`` on the actor's mean
    (logged as ``loss/symmetry``); 0 turns it off. Same requirements as ``symmetry_augmentation``."""

    @property
    def uses_symmetry(self) -> bool:
        """Whether the update needs a :class:`~ppo_bootstrap.symmetry.Symmetry`."""
        return self.symmetry_augmentation or self.symmetry_loss_coef > 0

    def __post_init__(self) -> None:
        if self.timeout_bootstrap not in TIMEOUT_BOOTSTRAP_MODES:
            raise ValueError(f"timeout_bootstrap must be one of {', '.join(TIMEOUT_BOOTSTRAP_MODES)}, "
                             f"got {self.timeout_bootstrap!r}")
        if self.schedule not in ("adaptive", "fixed"):
            raise ValueError(f"schedule must be 'adaptive' or 'fixed', got {self.schedule!r}")
        if self.shuffle not in SHUFFLES:
            raise ValueError(f"shuffle must be one of {', '.join(SHUFFLES)}, got {self.shuffle!r}")
        if self.adaptive_every not in ("mini_batch", "update"):
            raise ValueError(f"adaptive_every must be 'mini_batch' or 'update', got {self.adaptive_every!r}")
        for name in ("num_learning_epochs", "num_mini_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.lam <= 1.0):
            raise ValueError(f"gamma and lam must lie in [0, 1], got {self.gamma}, {self.lam}")
        if self.normalize_advantage_per_mini_batch and not self.normalize_advantage:
            raise ValueError("normalize_advantage_per_mini_batch=True needs normalize_advantage=True (it says where "
                             "the advantages are normalized, not whether)")
        if not isinstance(self.clip_grad_per_network, bool):
            raise ValueError(f"clip_grad_per_network must be True or False, got {self.clip_grad_per_network!r}")
        if not isinstance(self.bf16_update, bool):
            raise ValueError(f"bf16_update must be True or False, got {self.bf16_update!r}")
        if not isinstance(self.symmetry_augmentation, bool):
            raise ValueError(f"symmetry_augmentation must be True or False, got {self.symmetry_augmentation!r}")
        if not (isinstance(self.symmetry_loss_coef, (int, float)) and 0.0 <= self.symmetry_loss_coef < float("inf")):
            raise ValueError(f"symmetry_loss_coef must be a finite number >= 0, got {self.symmetry_loss_coef!r}")


class PPO:
    """The learner. It owns the rollout storage and the recurrent states: the Runner hands it each
    observation (:meth:`act`) and each env answer (:meth:`process_env_step`), then asks for value
    targets (:meth:`compute_returns`) and clipped-surrogate updates (:meth:`update`).

    ``symmetry``: the task's left-right mirror, required when ``cfg`` asks for symmetry
    augmentation or the mirror loss (feed-forward policies only).
    """

    def __init__(
        self, policy: ActorCritic, cfg: PPOConfig, device: torch.device | str = "cpu", symmetry: Symmetry | None = None
    ) -> None:
        if cfg.uses_symmetry and symmetry is None:
            raise ValueError("PPOConfig asks for symmetry (symmetry_augmentation or symmetry_loss_coef > 0) but no "
                             "symmetry was given: pass PPO(..., symmetry=Symmetry(...)) or turn both options off")
        if cfg.uses_symmetry and policy.is_recurrent:
            raise ValueError("symmetry augmentation and the mirror loss need a feed-forward policy (a recurrent "
                             "state has no mirror image): set PolicyConfig.recurrent=None or turn symmetry off")
        self.policy = policy
        self.cfg = cfg
        self.device = torch.device(device)
        self.symmetry = symmetry.to(self.device) if symmetry is not None else None
        # The learning rate lives on the device and adapts there, so the KL schedule costs no host
        # sync per mini-batch; fused Adam on CUDA reads it as a tensor, the CPU path as a float.
        self.lr = torch.tensor(cfg.learning_rate, device=self.device)
        self._tensor_lr = self.device.type == "cuda"
        if self._tensor_lr:
            self.optimizer = torch.optim.Adam(policy.parameters(), lr=self.lr.clone(), fused=True, capturable=True)
        else:
            self.optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate)
        # the parameter sets whose gradient norms are clipped, each to max_grad_norm
        self._clip_groups = policy.parameter_groups() if cfg.clip_grad_per_network else (list(policy.parameters()),)
        self._graph: _GraphedStep | None = None
        self.storage: RolloutStorage | None = None
        self.acting: ActorCritic = policy
        """The policy that acts and values the rollout (:meth:`act`, :meth:`compute_returns`): ``policy``
        itself, or after :meth:`lag_acting` a copy of it that :meth:`sync_acting` brings up to date."""
        self._spare: tuple[RolloutStorage, _GraphedStep | None] | None = None
        self.states: tuple[State, State] = (None, None)
        self._transition: Transition | None = None

    @property
    def learning_rate(self) -> float:
        return float(self.lr)

    def _set_optimizer_lr(self) -> None:
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].copy_(self.lr)
            else:
                group["lr"] = float(self.lr)

    # ------------------------------------------------------------------ rollout
    def init_storage(self, num_steps: int, num_envs: int, obs: ObsGroups, num_actions: int) -> None:
        """Allocate the rollout storage for observation groups shaped like ``obs`` (``[N, D_g]``) and
        zero recurrent states for ``num_envs`` envs."""
        if self.cfg.uses_symmetry:
            self.symmetry.check({g: v.to(self.device) for g, v in obs.items()}, num_actions)
        shapes = {g: tuple(v.shape[1:]) for g, v in obs.items()}
        self.storage = RolloutStorage(num_steps, num_envs, shapes, num_actions, self.device)
        self.states = self.policy.initial_state(num_envs, self.device)

    def start_rollout(self) -> None:
        self.storage.start(self.states)

    def lag_acting(self) -> None:
        """Act with a copy of the policy and keep a second rollout storage, so that a rollout can be
        collected while the update of the one before it trains ``policy`` (:meth:`swap_storage`).
        Feed-forward policies only (a recurrent state would have to follow the copy)."""
        if self.policy.is_recurrent:
            raise ValueError("an acting copy needs a feed-forward policy (it carries no recurrent state): "
                             "set PolicyConfig.recurrent=None")
        if self.acting is self.policy:
            self.acting = copy.deepcopy(self.policy)
            self.acting.requires_grad_(False)
        if self._spare is None:
            data = self.storage.data
            shapes = {g: tuple(v.shape[2:]) for g, v in data["obs"].items()}
            T, N, A = data["actions"].shape
            self._spare = (RolloutStorage(T, N, shapes, A, self.device), None)
            for storage in (self.storage, self._spare[0]):
                storage.track_importance_weights()
            self._forget_graphs()  # an update recorded before gathers no weights: recapture

    @torch.no_grad()
    def sync_acting(self) -> None:
        """Copy ``policy``'s parameters and normalizer statistics into the acting copy, in place (a
        recorded step keeps reading the same tensors)."""
        if self.acting is not self.policy:
            acting = self.acting.state_dict(keep_vars=True)
            for name, value in self.policy.state_dict(keep_vars=True).items():
                acting[name].copy_(value)

    def swap_storage(self) -> None:
        """Collect the next rollout into the other storage (after :meth:`lag_acting`); the one just
        filled keeps its data, and its recorded update, for the update in flight."""
        spare, spare_graph = self._spare
        self._spare = (self.storage, self._graph)
        self.storage, self._graph = spare, spare_graph

    @torch.no_grad()
    def act(self, obs: ObsGroups) -> torch.Tensor:
        """Sample actions ``[N, A]`` for ``obs`` and remember what the policy did for the next
        :meth:`process_env_step`."""
        actor_state, critic_state = self.states
        dist, actor_state = self.acting.act(obs[POLICY], actor_state)
        actions = dist.sample()
        values, critic_state = self.acting.value(critic_obs(obs), critic_state)
        self.states = (actor_state, critic_state)
        self._transition = Transition(
            obs, actions, dist.mean, dist.stddev, dist.log_prob(actions).sum(-1), values, critic_state
        )
        return actions

    @torch.no_grad()
    def process_env_step(self, result: StepResult) -> torch.Tensor:
        """Store the step (flags, reward and final observations on this device), then restart the
        memory of ended envs. Returns the done mask ``[N]``."""
        self.storage.add(self._transition, result)  # critic_state before the reset: V(s_final) continues it
        done, self.states = end_step(result.terminated, result.truncated, self.states)  # type: ignore[assignment]
        self._transition = None
        return done

    # ------------------------------------------------------------------ targets
    @torch.no_grad()
    def final_values(self, terminal: TerminalRows, values: torch.Tensor) -> torch.Tensor:
        """The value standing for ``V(s_final)`` in each terminal row ``[K]``, per bootstrap mode.

        In ``exact`` mode: one batched critic pass over the ``K`` final observations, normalized like
        every other observation, a recurrent critic starting from the state stored before the reset.
        """

        return bootstrap_values(self.cfg.timeout_bootstrap, values, terminal.step, terminal.env_id,
                                lambda: _value_of_final(self.acting, terminal))

    @torch.no_grad()
    def compute_returns(self, last_obs: ObsGroups, revalue: bool = False) -> dict[str, float]:
        """Close the rollout and fill its ``advantages`` / ``returns``; return statistics of its ends.

        ``revalue``: take the rollout again with ``policy``, the one the next update starts from,
        instead of the acting copy that collected it (:meth:`lag_acting`). Every value of the
        targets (stored, last and final) is then ``policy``'s critic's, as without the copy, and
        ``policy``'s actor becomes the update's proximal policy (:meth:`_to_proximal`).
        """
        storage = self.storage
        data = storage.data
        terminal = storage.finish()
        critic = self.policy if revalue else self.acting
        values = data["values"]
        if revalue and critic is not self.acting:
            values.copy_(critic.value(critic_obs(data["obs"]).flatten(0, 1), None)[0].view_as(values))
            self._to_proximal(data)
        fell, truncated = data["terminated"], data["truncated"]
        last_values = critic.value(critic_obs(last_obs), self.states[1])[0]
        advantages, returns, timeout_values = value_targets(
            self.cfg.timeout_bootstrap, data["rewards"], values, last_values, fell, truncated,
            terminal.step if terminal is not None else None, terminal.env_id if terminal is not None else None,
            lambda: _value_of_final(critic, terminal), self.cfg.gamma, self.cfg.lam,
        )
        if self.cfg.normalize_advantage and not self.cfg.normalize_advantage_per_mini_batch:
            advantages = normalize_global(advantages)
        storage.set_returns(advantages, returns)

        booted = timeout_values.numel()
        stats = {"episodes/terminated": float(fell.sum()), "episodes/truncated_only": float(booted),
                 "timeout_bootstrap/mean": 0.0}
        if booted and self.cfg.timeout_bootstrap != "none":
            stats["timeout_bootstrap/mean"] = float(self.cfg.gamma * timeout_values.mean())
        return stats

    def _to_proximal(self, data: TensorDict) -> None:
        """Make ``policy`` the proximal policy of the update of a rollout that the acting copy, one
        update behind, collected (decoupled PPO: Hilton, Cobbe and Schulman 2021, "Batch size-invariance
        for policy optimization").

        ``action_mean``, ``action_std`` and ``log_probs`` ``[T, N(, A)]`` become ``policy``'s, and
        ``importance_weights`` ``[T, N]`` the ratio ``pi_prox(a | o) / pi_behaviour(a | o)`` of each
        stored action. The clip and the KL of the learning-rate schedule then measure how far this
        update moves the policy, as without the copy, and the weight corrects the lag: measured
        from the behaviour policy instead, the KL of the update before counts twice and drives the
        adaptive learning rate to its floor."""
        dist, _ = self.policy.act(data["obs"][POLICY].flatten(0, 1), None)
        log_probs = dist.log_prob(data["actions"].flatten(0, 1)).sum(-1).view_as(data["log_probs"])
        data["importance_weights"].copy_((log_probs - data["log_probs"]).exp())
        data["log_probs"].copy_(log_probs)
        data["action_mean"].copy_(dist.mean.view_as(data["action_mean"]))
        data["action_std"].copy_(dist.stddev.view_as(data["action_std"]))

    def update_normalizers(self) -> None:
        """Move the observation normalizers with this rollout's observations (over every rank).

        Once per iteration, after the update: every value of a rollout (stored, last and final) and
        every ratio of its update share one normalization. With symmetry on, the mirrored
        observations count too: the networks are trained on them, and statistics of a rollout and
        its mirror image normalize a mirrored observation as its original (a mirror-symmetric mean
        and std), so an equivariant policy stays equivariant after normalization.
        """
        obs = self.storage.data["obs"]
        policy_obs, value_obs = obs[POLICY].flatten(0, 1), critic_obs(obs).flatten(0, 1)
        self.policy.update_normalizers(policy_obs, value_obs, distributed.global_moments)
        if self.cfg.uses_symmetry:
            mirrored_policy, mirrored_value = self._mirror_inputs(obs)
            self.policy.update_normalizers(
                mirrored_policy.flatten(0, 1), mirrored_value.flatten(0, 1), distributed.global_moments
            )

    # ------------------------------------------------------------------ update
    def update(self, generator: torch.Generator | None = None) -> dict[str, float]:
        """``num_learning_epochs`` x ``num_mini_batches`` gradient steps; mean losses and the final lr."""
        return self.update_stats(self.launch_update(generator))

    def launch_update(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """The gradient steps of :meth:`update`, queued on the current stream without a host sync;
        returns their losses ``[num_learning_epochs * num_mini_batches, 5]`` on the device (value,
        surrogate, entropy, kl, symmetry per mini-batch), for :meth:`update_stats`."""
        cfg, storage = self.cfg, self.storage
        graphed = cfg.cuda_graph and self._tensor_lr and not storage.is_recurrent and not distributed.is_distributed()
        if graphed and (self._graph is None or self._graph.storage is not storage):
            self._graph = _GraphedStep(self, storage)
        losses = []  # per mini-batch [value, surrogate, entropy, kl, symmetry], read back once at the end
        # every epoch's order up front, drawn on the device: graph replays then queue without a host sync
        orders, size = storage.permutations(
            cfg.num_learning_epochs if cfg.shuffle == "every_epoch" else 1, cfg.num_mini_batches, generator
        )
        orders = orders.expand(cfg.num_learning_epochs, -1)  # "once": the one order for every epoch
        for order in orders:
            if graphed:
                for i in range(cfg.num_mini_batches):
                    losses.append(self._graph.replay(order[i * size : (i + 1) * size]))
            else:
                for batch, states, starts in storage.mini_batches(cfg.num_mini_batches, order=order):
                    losses.append(self._step(batch, states, starts))
        losses = torch.stack(losses)
        if cfg.schedule == "adaptive" and cfg.adaptive_every == "update":
            self._adapt_learning_rate(losses[-cfg.num_mini_batches :, 3].mean())  # the last epoch's KL, on device
        return losses

    def update_stats(self, losses: torch.Tensor) -> dict[str, float]:
        """Mean losses and the learning rate of a :meth:`launch_update` (reads them to the host)."""
        cfg = self.cfg
        value, surrogate, entropy, kl, symmetry = losses.mean(0).tolist()
        stats = {
            "loss/value": value,
            "loss/surrogate": surrogate,
            "loss/entropy": entropy,
            "policy/kl": kl,
            "policy/learning_rate": self.learning_rate,
        }
        if cfg.uses_symmetry:
            stats["loss/symmetry"] = symmetry
        return stats

    def _mirror_inputs(self, obs: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
        """The mirror images of the actor's and the critic's inputs of ``obs`` (``[..., D]`` each)."""
        sym = self.symmetry
        mirrored_policy = sym.mirror_group(POLICY, obs[POLICY])
        if CRITIC in obs.keys():
            return mirrored_policy, sym.mirror_group(CRITIC, obs[CRITIC])
        return mirrored_policy, mirrored_policy

    def loss(
        self, batch: TensorDict, states: tuple[State, State] = (None, None), starts: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The PPO loss of a mini-batch (``[B]`` feed-forward, ``[T, B]`` recurrent, as
        :meth:`RolloutStorage.mini_batches` yields it): ``(loss, terms)``, ``terms`` holding the 0-dim
        ``value``, ``surrogate``, ``entropy`` (all three with their gradient), ``kl`` and ``symmetry``
        (without; ``symmetry`` is 0 when neither symmetry option is on).

        With ``symmetry_augmentation`` every term is the mean over the ``2 B`` samples of the batch
        and of its mirror image; ``kl`` (the learning-rate schedule's measure) stays on the batch
        itself. With ``symmetry_loss_coef`` the loss adds ``coef * symmetry``, the mirror loss.
        """
        cfg, sym = self.cfg, self.symmetry
        obs = batch["obs"]
        policy_obs, value_obs = obs[POLICY], critic_obs(obs)
        actions, old_log_probs = batch["actions"], batch["log_probs"]
        adv, returns, old_values = batch["advantages"], batch["returns"], batch["values"]
        weights = batch.get("importance_weights", None)  # a lagged rollout's (:meth:`_to_proximal`)
        n = policy_obs.shape[0]  # the batch's own samples come first
        if cfg.normalize_advantage_per_mini_batch:  # over this rank's mini-batch, its mirror image left out
            adv = (adv - adv.mean()) / (adv.std() + ADVANTAGE_EPS)
        if cfg.symmetry_augmentation:
            # The mirrored sample (M o, M a) is a step of the mirrored rollout, which the mirrored
            # behaviour policy pi_old(M^-1 . | M^-1 .) took: its probability of M a at M o is
            # pi_old(a | o), the stored one. So the importance ratio pi(M a | M o) / pi_old(a | o)
            # reuses the stored log-prob, and in a mirror-symmetric task that policy's advantage and
            # return at (M o, M a) equal the stored ones at (o, a); the value clip keeps V_old(o),
            # the old estimate of the same state's value. Recomputing pi_old(M a | M o) instead
            # would weight M a as if the old policy had drawn it, biasing the gradient wherever
            # the old policy is not yet symmetric.
            mirrored_policy, mirrored_value = self._mirror_inputs(obs)
            policy_obs = torch.cat([policy_obs, mirrored_policy])
            value_obs = torch.cat([value_obs, mirrored_value])
            actions = torch.cat([actions, sym.mirror_actions(actions)])
            old_log_probs, adv, returns, old_values = (x.repeat(2) for x in (old_log_probs, adv, returns, old_values))
            weights = None if weights is None else weights.repeat(2)
        # the weights' bfloat16 copies are made afresh each call (no autocast cache): a recorded
        # update replays the casts with the step's new weights
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=cfg.bf16_update, cache_enabled=False):
            dist, values = self.policy.evaluate(policy_obs, value_obs, states, starts)
        log_probs = dist.log_prob(actions).sum(-1)
        entropy = dist.entropy().sum(-1).mean()

        with torch.no_grad():
            # how far the update moved the policy from the one that collected the batch, on its own samples
            mean, std = (dist.mean[:n], dist.stddev[:n]) if cfg.symmetry_augmentation else (dist.mean, dist.stddev)
            kl = _gaussian_kl(batch["action_mean"], batch["action_std"], mean, std).mean()

        ratio = torch.exp(log_probs - old_log_probs)
        clipped_gain = torch.min(adv * ratio, adv * ratio.clamp(1 - cfg.clip_param, 1 + cfg.clip_param))
        surrogate = -(clipped_gain if weights is None else weights * clipped_gain).mean()
        if cfg.use_clipped_value_loss:
            clipped = old_values + (values - old_values).clamp(-cfg.clip_param, cfg.clip_param)
            value_loss = torch.max((values - returns) ** 2, (clipped - returns) ** 2).mean()
        else:
            value_loss = ((values - returns) ** 2).mean()
        loss = surrogate + cfg.value_loss_coef * value_loss - cfg.entropy_coef * entropy

        symmetry_loss = torch.zeros((), device=loss.device)
        if cfg.uses_symmetry:
            mean = dist.mean
            if cfg.symmetry_augmentation:
                mean, mirrored_mean = mean[:n], mean[n:]
            else:
                mirrored_mean = self.policy.act_inference(sym.mirror_group(POLICY, obs[POLICY]))[0]
            # The gradient flows through mu(M o) only: the mean at the visited state o is what the
            # advantages shaped, so the mirror loss carries it over to the mirror image instead of
            # also pulling the data-backed action towards the (unvisited) mirrored one.
            symmetry_loss = (mirrored_mean - sym.mirror_actions(mean).detach()).square().mean()
            if cfg.symmetry_loss_coef > 0:
                loss = loss + cfg.symmetry_loss_coef * symmetry_loss
        terms = {"value": value_loss, "surrogate": surrogate, "entropy": entropy, "kl": kl,
                 "symmetry": symmetry_loss.detach()}
        return loss, terms

    def _step(self, batch, states: tuple[State, State], starts: torch.Tensor | None) -> torch.Tensor:
        """One gradient step on a mini-batch; returns ``[value loss, surrogate, entropy, kl, symmetry]`` on device."""
        cfg = self.cfg
        loss, terms = self.loss(batch, states, starts)
        kl = terms["kl"]
        distributed.all_reduce_mean_(kl)  # one learning-rate decision for all ranks
        if cfg.schedule == "adaptive" and cfg.adaptive_every == "mini_batch":
            self._adapt_learning_rate(kl)

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        distributed.average_gradients_(self.policy.parameters())
        self._clip_gradients()
        self.optimizer.step()
        return torch.stack([terms[k] for k in ("value", "surrogate", "entropy", "kl", "symmetry")]).detach()

    def _clip_gradients(self) -> None:
        """Scale the gradients so that each clipped set's norm is at most ``max_grad_norm``: the whole
        policy's, or the actor's and the critic's each (``clip_grad_per_network``)."""
        for params in self._clip_groups:
            nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm)

    def _adapt_learning_rate(self, kl: torch.Tensor) -> None:
        """Divide the learning rate by 1.5 when KL > 2 x target, multiply when 0 < KL < target / 2."""
        cfg = self.cfg
        lower = (self.lr / 1.5).clamp_min(cfg.min_learning_rate)
        higher = (self.lr * 1.5).clamp_max(cfg.max_learning_rate)
        grow = (kl > 0.0) & (kl < cfg.desired_kl / 2.0)
        self.lr.copy_(torch.where(kl > 2.0 * cfg.desired_kl, lower, torch.where(grow, higher, self.lr)))
        self._set_optimizer_lr()

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "learning_rate": self.learning_rate}

    def check_state_dict(self, state: dict) -> None:
        """Raise ``ValueError`` unless :meth:`load_state_dict` can load ``state`` whole; changes nothing."""
        if not isinstance(state, dict) or not {"optimizer", "learning_rate"} <= set(state):
            raise ValueError("the PPO state needs 'optimizer' and 'learning_rate'")
        saved = state["optimizer"]
        saved_groups = [list(g["params"]) for g in saved["param_groups"]]
        params = [g["params"] for g in self.optimizer.param_groups]
        if [len(g) for g in saved_groups] != [len(g) for g in params]:
            raise ValueError(f"the optimizer state has parameter groups of sizes {[len(g) for g in saved_groups]}, "
                             f"this policy's optimizer {[len(g) for g in params]}")
        for index, param in zip((i for g in saved_groups for i in g), (p for g in params for p in g)):
            for name, value in saved["state"].get(index, {}).items():
                if torch.is_tensor(value) and value.dim() and value.shape != param.shape:
                    raise ValueError(f"optimizer {name} of parameter {index} has shape {tuple(value.shape)}, "
                                     f"the parameter {tuple(param.shape)}")

    def _forget_graphs(self) -> None:
        self._graph = None
        if self._spare is not None:
            self._spare = (self._spare[0], None)

    def load_state_dict(self, state: dict) -> None:
        self._forget_graphs()  # the optimizer's state tensors are replaced: recapture
        self.optimizer.load_state_dict(state["optimizer"])
        self.lr.fill_(state["learning_rate"])
        self._set_optimizer_lr()

    def reset_optimizer(self) -> None:
        """A fresh optimizer for fine-tuning a loaded policy: no moments, and with the adaptive
        schedule the learning rate starts at ``min_learning_rate`` (with ``fixed``, the configured one).

        Adam's first steps move every weight by about the learning rate whatever the gradient's
        size (its moments start at zero), which throws a trained, low-noise policy far off: from
        the shipped G1 policy at 1e-3 the first iteration's KL was 409 and the tracking error went
        from 0.05 to 0.37 m/s. Starting low, the schedule grows the rate 1.5x per mini-batch (per
        update with ``adaptive_every="update"``) while the KL stays under half its target, so it
        finds its level within about one iteration (a dozen).
        """
        self._forget_graphs()  # the captured step holds the old state tensors
        self.optimizer.state.clear()
        start = self.cfg.min_learning_rate if self.cfg.schedule == "adaptive" else self.cfg.learning_rate
        self.lr.fill_(start)
        self._set_optimizer_lr()


def _value_of_final(critic: ActorCritic, terminal: TerminalRows) -> torch.Tensor:
    """``V(s_final)`` ``[K]``: one batched critic pass from the recurrent state stored before the reset."""
    return critic.value(critic_obs(terminal.obs), terminal.critic_state)[0]


class _GraphedStep:
    """:meth:`PPO._step` captured once as a CUDA graph over the storage's own buffers.

    The graph gathers its mini-batch from the flattened rollout with a static index tensor, so a
    replay costs one index copy and one launch. Capture needs warm-up steps; the learning state
    (parameters, Adam moments and step, learning rate) is restored afterwards, so they never count.
    """

    def __init__(self, ppo: PPO, storage: RolloutStorage) -> None:
        self.storage = storage
        flat = storage.data.reshape(-1)  # views of the storage tensors, rewritten every rollout
        size = flat.batch_size[0] // ppo.cfg.num_mini_batches
        self.index = torch.zeros(size, dtype=torch.long, device=storage.device)
        params = list(ppo.policy.parameters())
        saved_params = [p.detach().clone() for p in params]
        saved_lr = ppo.lr.clone()
        saved_state = {p: {k: v.clone() for k, v in st.items()} for p, st in ppo.optimizer.state.items()}

        def step() -> torch.Tensor:
            return ppo._step(_gather(flat, self.index), (None, None), None)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(side)
        ppo.optimizer.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = step()

        with torch.no_grad():
            for p, saved in zip(params, saved_params):
                p.copy_(saved)
            ppo.lr.copy_(saved_lr)
            ppo._set_optimizer_lr()
            for p, st in ppo.optimizer.state.items():
                for k, v in st.items():
                    if torch.is_tensor(v):
                        v.copy_(saved_state[p][k]) if p in saved_state else v.zero_()

    def replay(self, index: torch.Tensor) -> torch.Tensor:
        self.index.copy_(index)
        self.graph.replay()
        return self.out.clone()


def _gather(data: TensorDict, index: torch.Tensor) -> TensorDict:
    """Rows ``index`` of every leaf of ``data`` (batch ``[B]``), with ``index_select``: no host sync."""
    out = {
        key: _gather(value, index) if isinstance(value, type(data)) else value.index_select(0, index)
        for key, value in data.items()
    }
    return type(data)(out, batch_size=[index.shape[0]], device=data.device)


ADVANTAGE_EPS = 1e-8
"""Added to the std when advantages are normalized."""


def normalize_global(x: torch.Tensor, eps: float = ADVANTAGE_EPS) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` with mean and (unbiased) std over every element on every rank."""
    moments = torch.stack([x.new_tensor(x.numel(), dtype=torch.float64), x.double().sum(), x.double().square().sum()])
    n, total, total_sq = distributed.all_reduce_sum_(moments)
    mean = total / n
    var = (total_sq - n * mean * mean) / (n - 1).clamp_min(1.0)
    return (x - mean.to(x.dtype)) / (var.clamp_min(0.0).sqrt().to(x.dtype) + eps)


def _gaussian_kl(mu0: torch.Tensor, std0: torch.Tensor, mu1: torch.Tensor, std1: torch.Tensor) -> torch.Tensor:
    """``KL(N(mu0, std0) || N(mu1, std1))`` summed over the action dim: ``[B, A]`` -> ``[B]``."""
    return (
        torch.log(std1 / std0) + (std0.square() + (mu0 - mu1).square()) / (2.0 * std1.square()) - 0.5
    ).sum(-1)
