"""The on-policy Runner: collect a rollout, compute exact value targets, update, log, checkpoint."""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ppo_bootstrap import checkpoint, distributed, run_lock
from ppo_bootstrap.env import POLICY, ObsGroups, StepResult, VecEnv, critic_obs
from ppo_bootstrap.episode_checks import StepChecks, declared_time_limit, obs_layout
from ppo_bootstrap.logger import ConsoleMode, EpisodeStats, LogSums, Logger, console_mode, format_progress, read_metrics
from ppo_bootstrap.modules.actor_critic import ActorCritic, PolicyConfig
from ppo_bootstrap.ppo import PPO, PPOConfig
from ppo_bootstrap.runner_checkpoints import RunnerCheckpoints
from ppo_bootstrap.signals import StopOnSignal
from ppo_bootstrap.symmetry import env_symmetry

__all__ = ["LogSums", "Runner", "RunnerConfig", "format_progress", "read_metrics", "seed_everything"]


@dataclass
class RunnerConfig:
    """Everything the Runner needs besides the env.

    Attributes:
        num_steps_per_env: rollout length ``T`` per iteration.
        save_interval: write ``model_<iteration>.pt`` into ``log_dir`` every this many iterations
            (and after the last one); 0 disables periodic checkpoints.
        log_dir: TensorBoard logs, ``metrics.jsonl`` (one JSON object of statistics per iteration,
            appended, so a resumed run continues the curve) and checkpoints; ``None`` writes nothing.
        seed: seeds torch, numpy and ``random`` at construction.
        validate_env_output: check every step against the env contract (shapes, dtypes, devices,
            flags, ``final_env_ids``, observation groups and widths against ``reset()``'s, then
            NaN/inf) and raise naming field and env ids. Costs host syncs per step. Off, with
            ``non_finite_obs="reset"``, the checks that need no sync still run before the repair.
            Either way the Runner warns once (:class:`~ppo_bootstrap.episode.FlagWatch`) where
            ``info["time_outs"]`` differs from ``truncated`` or an env runs past its declared
            ``max_episode_length`` without ``truncated`` (one sync per rollout).
        console: the block printed per iteration (:mod:`ppo_bootstrap.logger`): ``"compact"`` (or
            ``True``) about 18 lines, ``"full"`` every statistic and env log, ``"off"`` (``False``) none.
        torch_threads: CPU threads for torch when the learner runs on the CPU. ``None``: half the
            cores, at most 4, since a small network gains nothing from more and an env stepping
            on the other cores loses (the default intra-op pool made a 64-env run 23x slower on a
            loaded 2-core machine); ``0``: leave torch's setting alone.
        non_finite_obs: what a non-finite observation, reward or final observation does.
            ``"error"`` (default): raise :class:`~ppo_bootstrap.episode.EpisodeProtocolError`
            naming field and env ids, before any update. ``"reset"``: once the step keeps the
            contract, end those episodes as a blow-up (see :mod:`ppo_bootstrap.episode`), restart
            the envs through ``env.reset_envs(env_ids)`` and count them (``episodes/non_finite_resets``).
        max_iterations: how many iterations :meth:`Runner.learn` runs when it is called without a
            number; ``None``: ``learn`` needs one.
        overlap_update: collect each rollout while the update of the one before it trains (on CUDA
            in a second stream, where a small batch of envs leaves the GPU idle between physics
            kernels). Each rollout is then acted by the policy one update behind the one that trains
            on it. The policy and critic the update starts from take the rollout again: the critic
            values it for its targets, and the actor is the update's proximal policy (decoupled
            PPO), from which the clip and the KL schedule measure the update's step, each sample
            weighted by its action's probability under it over that under the acting policy. An
            iteration is logged and saved when its update ends, and its checkpoint is written with
            the next rollout already collected (a resume does not train on that rollout).
            Feed-forward policies, one process.
    """

    num_steps_per_env: int = 24
    save_interval: int = 50
    log_dir: str | None = None
    seed: int = 0
    torch_threads: int | None = None
    validate_env_output: bool = True
    console: ConsoleMode | bool = "compact"
    non_finite_obs: Literal["error", "reset"] = "error"
    max_iterations: int | None = None
    overlap_update: bool = False
    ppo: PPOConfig = field(default_factory=PPOConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)

    def __post_init__(self) -> None:
        if self.num_steps_per_env < 1:
            raise ValueError(f"num_steps_per_env must be >= 1, got {self.num_steps_per_env}")
        if self.save_interval < 0:
            raise ValueError(f"save_interval must be >= 0, got {self.save_interval}")
        if self.non_finite_obs not in ("error", "reset"):
            raise ValueError(f"non_finite_obs must be 'error' or 'reset', got {self.non_finite_obs!r}")
        self.console = console_mode(self.console)
        if not isinstance(self.overlap_update, bool):
            raise ValueError(f"overlap_update must be True or False, got {self.overlap_update!r}")
        if self.overlap_update and self.policy.recurrent:
            raise ValueError(f"overlap_update needs a feed-forward policy (the acting copy carries no recurrent "
                             f"state), got policy.recurrent={self.policy.recurrent!r}: set one of them off")
        n = self.max_iterations
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ValueError(f"max_iterations must be an integer >= 0 or None, got {self.max_iterations!r}")

    @classmethod
    def from_rsl_rl(cls, agent_cfg: Any, **overrides: Any) -> RunnerConfig:
        """The configuration that trains as rsl-rl-lib's ``OnPolicyRunner`` would with ``agent_cfg``.

        ``agent_cfg``: Isaac Lab's ``RslRlOnPolicyRunnerCfg`` (``isaaclab_rl.rsl_rl``) or its
        ``to_dict()``, as rsl-rl-lib 3.x to 5.x define it; ``overrides``: fields of this class
        set as given (e.g. ``log_dir``). The field-by-field mapping is in :mod:`ppo_bootstrap.rsl_rl`.

        Raises:
            ~ppo_bootstrap.rsl_rl.RslRlConfigError: one line naming the first field that cannot be
                honoured (an unknown name, RND, distillation, another algorithm, an unsupported value).
        """
        from ppo_bootstrap.rsl_rl import runner_config_kwargs

        return cls(**{**runner_config_kwargs(agent_cfg), **overrides})


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Runner(RunnerCheckpoints):
    """Trains a :class:`~ppo_bootstrap.modules.actor_critic.ActorCritic` on a :class:`~ppo_bootstrap.env.VecEnv` with PPO.

    Example::

        runner = Runner(env, RunnerConfig(log_dir="runs/g1"))
        runner.learn(1500)
        runner.export_onnx("policy.onnx")

    When ``cfg.ppo`` asks for symmetry (``symmetry_augmentation`` or ``symmetry_loss_coef``), the
    env must offer its mirror as the attribute ``symmetry`` (a :class:`~ppo_bootstrap.symmetry.Symmetry`),
    itself or through its ``unwrapped`` env; the Runner raises a one-line ``ValueError`` otherwise.
    """

    def __init__(self, env: VecEnv, cfg: RunnerConfig | None = None, device: str | torch.device | None = None) -> None:
        self.env = env
        self.cfg = cfg or RunnerConfig()
        self.env_device = torch.device(env.device)
        self.device = torch.device(device) if device is not None else self.env_device
        self.rank, self.world_size = distributed.rank(), distributed.world_size()
        # Ranks explore with different noise; the parameters are made identical by the broadcast below.
        seed_everything(self.cfg.seed + self.rank)
        # One mini-batch order everywhere keeps the ranks' updates in lock step.
        self.generator = torch.Generator().manual_seed(self.cfg.seed)

        self.obs = self._to_device(env.reset())
        if self.cfg.non_finite_obs == "reset" and not callable(getattr(env, "reset_envs", None)):
            raise ValueError("non_finite_obs='reset' needs an env with reset_envs(env_ids) -> observation rows")
        if POLICY not in self.obs:
            raise ValueError(f"env.reset() must return a {POLICY!r} observation group, got {sorted(self.obs)}")
        self.obs_layout = obs_layout(self.obs)  # every step's groups and widths must match reset()'s
        if distributed.is_distributed():  # the fingerprint walks the env's config: only where ranks compare it
            distributed.check_ranks_agree(distributed.setup_fingerprint(env, self.cfg, self.obs_layout))
        self.step_checks = StepChecks(env.num_envs, self.obs_layout, self.env_device, self.cfg.validate_env_output,
                                      env.reset_envs if self.cfg.non_finite_obs == "reset" else None,
                                      declared_time_limit(env))
        self.flag_watch = self.step_checks.flag_watch
        policy_dim = self.obs[POLICY].shape[-1]
        critic_dim = critic_obs(self.obs).shape[-1]
        self.policy = ActorCritic(policy_dim, critic_dim, env.num_actions, self.cfg.policy).to(self.device)
        distributed.broadcast_module_(self.policy)
        symmetry = env_symmetry(env) if self.cfg.ppo.uses_symmetry else None
        self.alg = PPO(self.policy, self.cfg.ppo, self.device, symmetry=symmetry)
        self.alg.init_storage(self.cfg.num_steps_per_env, env.num_envs, self.obs, env.num_actions)
        if self.cfg.overlap_update:
            if self.world_size > 1:
                raise ValueError("overlap_update runs in one process: set overlap_update=False for a "
                                 f"{self.world_size}-process training")
            self.alg.lag_acting()
        self.iteration = 0
        self.total_steps = 0
        self.normalizers_warm = False  # the warm-up rollout has run (it is not counted in total_steps)
        self.env_steps = 0
        """Calls of ``env.step`` in this training, the warm-up rollout's included: the env's own step
        counter (Isaac Lab's ``common_step_counter``, the clock of its curricula) as of the last
        rollout. A resume without the env's state sets the env's counter to it
        (:func:`ppo_bootstrap.checkpoint.env_steps`)."""
        self.metadata: dict[str, Any] = {}
        """What the checkpoint records of the task (e.g. ``{"id": ..., "env": {...}}``), so that
        evaluation, playback and resume need no flag to rebuild it."""
        self.episodes = EpisodeStats(env.num_envs, self.device)
        self.logger = Logger(self.cfg.log_dir, self.cfg.console, self.rank, lambda: self.last_checkpoint)
        self.signals = StopOnSignal(lambda: self.last_checkpoint)
        """SIGINT / SIGTERM handling of :meth:`learn`; enter it around more (export, evaluation) to keep
        a second signal clean there too, and set its ``resume_hint`` to say how to resume."""
        self._set_threads()

    def _set_threads(self) -> None:
        threads = self.cfg.torch_threads
        if self.device.type != "cpu" or threads == 0:
            return
        threads = threads or max(1, min(4, (os.cpu_count() or 2) // 2))
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
            if self.cfg.console != "off" and self.rank == 0:
                print(f"Runner: torch uses {threads} CPU thread(s) (RunnerConfig.torch_threads)", flush=True)

    # ------------------------------------------------------------------ collection
    def _to_device(self, obs: ObsGroups) -> ObsGroups:
        return {k: v.to(self.device) for k, v in obs.items()}

    def _on_device(self, result: StepResult) -> StepResult:
        """Reward and flags on the learner's device (storage moves the final rows itself)."""
        return dataclasses.replace(
            result,
            reward=result.reward.to(self.device),
            terminated=result.terminated.to(self.device),
            truncated=result.truncated.to(self.device),
        )

    @torch.no_grad()
    def _collect(self) -> dict[str, float]:
        """One rollout into the algorithm's storage; returns episode statistics of this rollout."""
        env, alg = self.env, self.alg
        alg.start_rollout()
        info_sums = LogSums()
        n_broken = 0
        for _ in range(self.cfg.num_steps_per_env):
            actions = alg.act(self.obs)
            result: StepResult = env.step(actions.to(self.env_device))
            result, broken = self.step_checks(result, self.obs)
            n_broken += broken
            result = self._on_device(result)
            done = alg.process_env_step(result)
            self.flag_watch.lengths(self.episodes.step(result.reward, done), result.truncated)
            info_sums.add(result.info.get("log", {}))
            self.obs = self._to_device(result.obs)
        self.flag_watch.report()
        self.total_steps += self.cfg.num_steps_per_env * env.num_envs
        self.env_steps += self.cfg.num_steps_per_env
        stats = {f"env/{k}": v for k, v in info_sums.means(self.cfg.num_steps_per_env).items()}
        return {**stats, **self.episodes.end_rollout(), "episodes/non_finite_resets": float(n_broken)}

    @property
    def episode_return(self) -> torch.Tensor:
        """Return of each env's episode in progress ``[N]`` (:attr:`episodes`)."""
        return self.episodes.returns

    @property
    def episode_length(self) -> torch.Tensor:
        """Length of each env's episode in progress ``[N]`` (:attr:`episodes`)."""
        return self.episodes.lengths

    @property
    def recent_episodes(self) -> collections.deque[tuple[float, float]]:
        """``(return, length)`` of the last 100 ended episodes (:attr:`episodes`)."""
        return self.episodes.recent

    # ------------------------------------------------------------------ training
    def learn(self, iterations: int | None = None) -> None:
        """Run ``iterations`` more PPO iterations (continuing the count after :meth:`load`);
        ``None``: ``cfg.max_iterations`` of them.

        SIGINT or SIGTERM, from the normalizer warm-up on, ends training cleanly after the rollout
        or iteration in progress: the checkpoint ``model_<iteration>.pt`` is written to ``log_dir``
        and ``learn`` returns with :attr:`interrupted` set. A second signal exits at once, without a
        traceback: one line on stderr names the last checkpoint, and the exit status is 128 + the
        signal number (130 for SIGINT, 143 for SIGTERM). A library (a simulator's runtime) that
        replaces the handler, in Python or in native code, is overruled at the next iteration with
        a warning naming it. Temporaries that killed checkpoint writes left in ``log_dir`` are
        removed at the start.

        Raises:
            ValueError: no ``iterations`` and no ``cfg.max_iterations``.
            FloatingPointError: an update left NaN or inf in the policy or its losses; names the
                tensor or loss. Nothing of that update is saved.
        """
        if iterations is None:
            if self.cfg.max_iterations is None:
                raise ValueError("learn() needs a number of iterations: pass one or set RunnerConfig.max_iterations")
            iterations = self.cfg.max_iterations
        self.policy.train()
        self.interrupted = False
        start_iteration = self.iteration
        self.logger.start(self.iteration, iterations)
        if self.cfg.log_dir and self.rank == 0:
            checkpoint.remove_stale_temporaries(self.cfg.log_dir)
        folder = self.cfg.log_dir if self.rank == 0 else None  # one training per run folder: a second one refuses
        with self.signals.training() as stop, run_lock.claim_run_dir(folder, self):
            stopped = False
            self.alg.sync_acting()  # a load() since the last learn() changed the policy
            if iterations > 0 and not self.normalizers_warm and self.cfg.policy.obs_normalization:
                self._warm_up_normalizers()
                stopped = self._stop_requested(stop, "the normalizer warm-up")
            iterate = self._learn_overlapped if self.cfg.overlap_update else self._learn_in_turn
            iterate(0 if stopped else iterations, stop)
            if self.cfg.log_dir and (self.iteration > start_iteration or self.interrupted):
                self.save(Path(self.cfg.log_dir) / f"model_{self.iteration}.pt")
            if self.interrupted and self.rank == 0:
                print(self.signals.resume_lines(), flush=True)

    def _learn_in_turn(self, iterations: int, stop: StopOnSignal) -> None:
        """:meth:`learn`'s iterations, each collecting a rollout and then updating on it."""
        for _ in range(iterations):
            stop.reassert()
            t0 = time.perf_counter()
            stats = self._collect()
            stats.update(self.alg.compute_returns(self.obs))
            t1 = time.perf_counter()
            update = self.alg.update(self.generator)
            stats.update(update)
            self.alg.update_normalizers()
            checkpoint.check_update_finite(self.policy.state_dict(), update, self.iteration + 1, self.last_checkpoint)
            t2 = time.perf_counter()
            self.iteration += 1
            stats["perf/collection_s"] = t1 - t0
            stats["perf/learning_s"] = t2 - t1
            stats["perf/steps_per_s"] = self.cfg.num_steps_per_env * self.env.num_envs * self.world_size / (t2 - t0)
            stats["policy/mean_action_std"] = float(self.alg.storage.data["action_std"].mean())
            if self._close_iteration(stats, stop):
                return

    def _learn_overlapped(self, iterations: int, stop: StopOnSignal) -> None:
        """:meth:`learn`'s iterations with each update beside the next collection
        (``RunnerConfig.overlap_update``). Rollout ``i`` is collected while the update of rollout
        ``i - 1`` runs, by the policy of update ``i - 2``; iteration ``i - 1`` is logged, checked and
        saved once its update has ended. Then the policy that update ``i`` starts from takes rollout
        ``i`` again (``PPO.compute_returns(revalue=True)``), so only the actions lag: stale values
        would bootstrap from a critic one update old and slow the values' propagation along the
        horizon, and a KL measured from the acting policy would count the update before twice."""
        alg = self.alg
        side = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        pending: dict[str, Any] | None = None  # the update in flight and its rollout's statistics
        ended: float | None = None  # when the last iteration ended: the next one's time runs from there
        alg.sync_acting()  # the normalizers' warm-up, if it ran, moved the policy's statistics
        for n in range(iterations + 1):
            if n < iterations:
                stop.reassert()
                t0 = time.perf_counter()
                stats = self._collect()
                stats["policy/mean_action_std"] = float(alg.storage.data["action_std"].mean())
                stats["perf/collection_s"] = time.perf_counter() - t0
            if pending is not None:
                if self._end_overlapped_update(pending, stop):
                    return  # a signal: the rollout just collected is not trained on
                ended = time.perf_counter()
            if n == iterations:
                return
            stats.update(alg.compute_returns(self.obs, revalue=True))
            alg.sync_acting()  # the next rollout acts with the policy of the update that just ended
            if side is not None:
                side.wait_stream(torch.cuda.current_stream(self.device))  # the targets, the acting copy
            with torch.cuda.stream(side):  # None (not CUDA): a no-op, the update runs in turn
                losses = alg.launch_update(self.generator)
                alg.update_normalizers()
            done = None if side is None else side.record_event()
            alg.swap_storage()
            pending = {"losses": losses, "done": done, "stats": stats, "since": t0 if ended is None else ended}

    def _end_overlapped_update(self, pending: dict[str, Any], stop: StopOnSignal) -> bool:
        """Wait for the update in flight, then log, check and save its iteration as :meth:`learn`
        does; returns whether a signal asked to stop."""
        t1 = time.perf_counter()
        if pending["done"] is not None:
            pending["done"].synchronize()
        update = self.alg.update_stats(pending["losses"])
        checkpoint.check_update_finite(self.policy.state_dict(), update, self.iteration + 1, self.last_checkpoint)
        t2 = time.perf_counter()
        self.iteration += 1
        stats = {**pending["stats"], **update}
        stats["perf/learning_s"] = t2 - t1  # the update's time not hidden behind the next collection
        stats["perf/steps_per_s"] = self.cfg.num_steps_per_env * self.env.num_envs / (t2 - pending["since"])
        return self._close_iteration(stats, stop)

    def _close_iteration(self, stats: dict[str, float], stop: StopOnSignal) -> bool:
        """Log the iteration just ended and save it when due; returns whether a signal asked to stop."""
        stats.update(self.episodes.recent_means())
        self.logger.log(self.iteration, self.total_steps, stats)
        self.last_stats = stats
        if self.cfg.log_dir and self.cfg.save_interval and self.iteration % self.cfg.save_interval == 0:
            self.save(Path(self.cfg.log_dir) / f"model_{self.iteration}.pt")
        return self._stop_requested(stop, f"iteration {self.iteration}")

    def _stop_requested(self, stop: StopOnSignal, after: str) -> bool:
        """Whether a signal asked any rank to stop (all ranks stop together, or the next collective would hang)."""
        if distributed.all_reduce_sum_(torch.tensor(float(stop.requested), device=self.device)).item() == 0:
            return False
        self.interrupted = True
        if self.rank == 0:
            print(f"stopping after {after} on {stop.signal_name}", flush=True)
        return True

    def _warm_up_normalizers(self) -> None:
        """One rollout of the initial policy whose only use is observation statistics.

        Normalizers move after each update, so without this the first update would see raw
        observations (joint velocities of tens of rad/s) and its large first steps would drive the
        adaptive learning rate to its floor before training starts.
        """
        steps = self.total_steps
        self._collect()
        self.total_steps = steps  # no learning happened: the warm-up rollout is not a training step
        self.episodes.recent.clear()
        self.alg.update_normalizers()
        self.normalizers_warm = True

    def export_onnx(self, path: str | os.PathLike) -> None:
        """Export the deterministic actor (normalizer included) to ONNX.

        Feed-forward: input ``obs`` ``[B, D]`` -> ``actions`` ``[B, A]``. Recurrent: inputs ``obs``
        and ``state_in`` ``[S, B, H]`` -> ``actions`` and ``state_out``.
        """
        from ppo_bootstrap.export import export_actor_onnx

        export_actor_onnx(self.policy, self.obs[POLICY].shape[-1], path)
