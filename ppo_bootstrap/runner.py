"""The on-policy Runner: collect a rollout, compute exact value targets, update, log, checkpoint."""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import functools
import math
import os
import random
import signal
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ppo_bootstrap import checkpoint, disk, distributed, run_lock
from ppo_bootstrap.env import POLICY, ObsGroups, StepResult, VecEnv, critic_obs
from ppo_bootstrap.episode import (
    FlagWatch,
    check_contract,
    check_finite,
    declared_time_limit,
    obs_layout,
    recover_non_finite,
)
from ppo_bootstrap.modules.actor_critic import ActorCritic, PolicyConfig
from ppo_bootstrap.ppo import PPO, PPOConfig
from ppo_bootstrap.symmetry import env_symmetry


class LogSums:
    """Sums of the scalars of ``info["log"]`` over a rollout, read once at its end.

    An env logs the same keys at every step (the G1 task logs about 45): their tensors are stacked
    and added as one vector, two kernel launches per step instead of one per key, and read with one
    host synchronisation. Python numbers are summed on the host; a step with other tensor keys
    folds the running vector into per-key sums and starts a new one.
    """

    def __init__(self) -> None:
        self._keys: tuple[str, ...] = ()
        self._vector: torch.Tensor | None = None
        self._done: list[tuple[tuple[str, ...], torch.Tensor]] = []  # vectors of earlier key sets
        self._host: dict[str, float] = {}

    def add(self, log: dict[str, Any]) -> None:
        keys = tuple(k for k, v in log.items() if isinstance(v, torch.Tensor))
        for key, value in log.items():
            if not isinstance(value, torch.Tensor):
                self._host[key] = self._host.get(key, 0.0) + float(value)
        if not keys:
            return
        # float32 as the env logs them (a cast per key would cost the launch the stack saves)
        values = [v.reshape(()) if v.dtype == torch.float32 else v.reshape(()).float() for v in map(log.get, keys)]
        if keys != self._keys or self._vector is None or values[0].device != self._vector.device:
            if self._vector is not None:
                self._done.append((self._keys, self._vector))
            self._keys, self._vector = keys, torch.zeros(len(keys), device=values[0].device)
        self._vector += torch.stack(values)

    def totals(self) -> dict[str, float]:
        """``{key: sum over the steps that logged it}``; one host synchronisation per key set."""
        out = dict(self._host)
        vectors = self._done + ([(self._keys, self._vector)] if self._vector is not None else [])
        for keys, vector in vectors:
            for key, value in zip(keys, vector.tolist()):
                out[key] = out.get(key, 0.0) + value
        return out


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
        console: print a progress block per iteration.
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
    """

    num_steps_per_env: int = 24
    save_interval: int = 50
    log_dir: str | None = None
    seed: int = 0
    torch_threads: int | None = None
    validate_env_output: bool = True
    console: bool = True
    non_finite_obs: Literal["error", "reset"] = "error"
    max_iterations: int | None = None
    ppo: PPOConfig = field(default_factory=PPOConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)

    def __post_init__(self) -> None:
        if self.num_steps_per_env < 1:
            raise ValueError(f"num_steps_per_env must be >= 1, got {self.num_steps_per_env}")
        if self.save_interval < 0:
            raise ValueError(f"save_interval must be >= 0, got {self.save_interval}")
        if self.non_finite_obs not in ("error", "reset"):
            raise ValueError(f"non_finite_obs must be 'error' or 'reset', got {self.non_finite_obs!r}")
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


class Runner:
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
        self.flag_watch = FlagWatch(declared_time_limit(env))
        policy_dim = self.obs[POLICY].shape[-1]
        critic_dim = critic_obs(self.obs).shape[-1]
        self.policy = ActorCritic(policy_dim, critic_dim, env.num_actions, self.cfg.policy).to(self.device)
        distributed.broadcast_module_(self.policy)
        symmetry = env_symmetry(env) if self.cfg.ppo.uses_symmetry else None
        self.alg = PPO(self.policy, self.cfg.ppo, self.device, symmetry=symmetry)
        self.alg.init_storage(self.cfg.num_steps_per_env, env.num_envs, self.obs, env.num_actions)
        self.iteration = 0
        self.total_steps = 0
        self.normalizers_warm = False  # the warm-up rollout has run (it is not counted in total_steps)
        self.metadata: dict[str, Any] = {}
        """What the checkpoint records of the task (e.g. ``{"id": ..., "env": {...}}``), so that
        evaluation, playback and resume need no flag to rebuild it."""
        self.recent_episodes: collections.deque[tuple[float, float]] = collections.deque(maxlen=100)
        self.episode_return = torch.zeros(env.num_envs, device=self.device)
        self.episode_length = torch.zeros(env.num_envs, device=self.device)
        self._writer = None
        self._set_threads()

    def _set_threads(self) -> None:
        threads = self.cfg.torch_threads
        if self.device.type != "cpu" or threads == 0:
            return
        threads = threads or max(1, min(4, (os.cpu_count() or 2) // 2))
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
            if self.cfg.console and self.rank == 0:
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
        ends: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # per step: done, return, length
        info_sums = LogSums()
        n_broken = 0
        for _ in range(self.cfg.num_steps_per_env):
            actions = alg.act(self.obs)
            result: StepResult = env.step(actions.to(self.env_device))
            recover, validate = self.cfg.non_finite_obs == "reset", self.cfg.validate_env_output
            if validate or recover:  # the contract before any repair; only its ids check costs a host sync
                check_contract(env.num_envs, result, self.obs_layout, self.env_device, ids=validate)
            self.flag_watch.flags(result.info, result.truncated)
            if recover:
                last_obs = {k: v.to(result.reward.device) for k, v in self.obs.items()}
                result, broken = recover_non_finite(result, last_obs, env.reset_envs)
                n_broken += broken.numel()
            if validate:
                check_finite(result)
            result = self._on_device(result)
            done = alg.process_env_step(result)

            keep = (~done).to(torch.float32)
            self.episode_return += result.reward
            self.episode_length += 1
            self.flag_watch.lengths(self.episode_length, result.truncated)
            ends.append((done, self.episode_return.clone(), self.episode_length.clone()))
            self.episode_return *= keep
            self.episode_length *= keep
            info_sums.add(result.info.get("log", {}))
            self.obs = self._to_device(result.obs)
        self.flag_watch.report()
        ended_returns, ended_lengths = self._ended_episodes(ends)
        self.recent_episodes.extend(zip(ended_returns.tolist(), ended_lengths.tolist()))
        self.total_steps += self.cfg.num_steps_per_env * env.num_envs
        n = float(ended_returns.numel())
        stats = {f"env/{k}": v / self.cfg.num_steps_per_env for k, v in info_sums.totals().items()}
        stats["episodes/ended"] = n
        stats["episodes/non_finite_resets"] = float(n_broken)
        if n:
            stats["episodes/mean_return"] = float(ended_returns.sum()) / n
            stats["episodes/mean_length"] = float(ended_lengths.sum()) / n
        return stats

    @staticmethod
    def _ended_episodes(ends: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Return and length ``[E]`` of every episode that ended in the rollout, from the per-step
        ``(done [N], return [N], length [N])`` records (one host sync per rollout)."""
        done = torch.stack([d for d, _, _ in ends])
        return torch.stack([r for _, r, _ in ends])[done], torch.stack([n for _, _, n in ends])[done]

    # ------------------------------------------------------------------ training
    last_checkpoint: Path | None = None
    """The file the last :meth:`save` of this process wrote."""

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
        removed at the start. The run folder is locked while ``learn`` runs
        (:func:`ppo_bootstrap.run_lock.claim_run_dir`).

        Raises:
            ValueError: no ``iterations`` and no ``cfg.max_iterations``.
            ~ppo_bootstrap.run_lock.RunDirInUseError: another live training writes ``log_dir``.
            ~ppo_bootstrap.disk.RunWriteError: the disk refused a checkpoint, or the run folder
                vanished or turned read-only (log writes on a full disk only warn).
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
        started = time.perf_counter()
        if self.cfg.log_dir and self.rank == 0:
            checkpoint.remove_stale_temporaries(self.cfg.log_dir)
        folder = self.cfg.log_dir if self.rank == 0 else None  # one training per run folder: a second one refuses
        with _StopOnSignal(lambda: self.last_checkpoint) as stop, run_lock.claim_run_dir(folder, self):
            stopped = False
            if iterations > 0 and not self.normalizers_warm and self.cfg.policy.obs_normalization:
                self._warm_up_normalizers()
                stopped = self._stop_requested(stop, "the normalizer warm-up")
            for _ in range(0 if stopped else iterations):
                stop.reassert()
                t0 = time.perf_counter()
                stats = self._collect()
                stats.update(self.alg.compute_returns(self.obs))
                t1 = time.perf_counter()
                update = self.alg.update(self.generator)
                stats.update(update)
                self.alg.update_normalizers()
                self._check_finite(update)
                t2 = time.perf_counter()
                self.iteration += 1
                stats["perf/collection_s"] = t1 - t0
                stats["perf/learning_s"] = t2 - t1
                stats["perf/steps_per_s"] = self.cfg.num_steps_per_env * self.env.num_envs * self.world_size / (t2 - t0)
                stats["policy/mean_action_std"] = float(self.alg.storage.data["action_std"].mean())
                if self.recent_episodes:
                    returns, lengths = zip(*self.recent_episodes)
                    stats["episodes/mean_return_100"] = sum(returns) / len(returns)
                    stats["episodes/mean_length_100"] = sum(lengths) / len(lengths)
                elapsed = time.perf_counter() - started
                done_here = self.iteration - start_iteration
                stats["perf/elapsed_s"] = elapsed
                stats["perf/eta_s"] = elapsed / done_here * (iterations - done_here)
                self._log(stats, start_iteration + iterations)
                self.last_stats = stats
                if self.cfg.log_dir and self.cfg.save_interval and self.iteration % self.cfg.save_interval == 0:
                    self.save(Path(self.cfg.log_dir) / f"model_{self.iteration}.pt")
                if self._stop_requested(stop, f"iteration {self.iteration}"):
                    break
            if self.cfg.log_dir and (self.iteration > start_iteration or self.interrupted):
                self.save(Path(self.cfg.log_dir) / f"model_{self.iteration}.pt")
                if self.interrupted and self.rank == 0:
                    print(f"checkpoint: {self.last_checkpoint}", flush=True)

    def _stop_requested(self, stop: "_StopOnSignal", after: str) -> bool:
        """Whether a signal asked any rank to stop (all ranks stop together, or the next collective would hang)."""
        if distributed.all_reduce_sum_(torch.tensor(float(stop.requested), device=self.device)).item() == 0:
            return False
        self.interrupted = True
        if self.rank == 0:
            print(f"stopping after {after} on {stop.signal_name}", flush=True)
        return True

    def _check_finite(self, update: dict[str, float]) -> None:
        """Raise if the update left NaN or inf in the policy (one fused check, one host sync) or in its
        losses (an overflowed loss clips its gradient to nothing: the update did not happen)."""
        tensor = checkpoint.first_non_finite(self.policy.state_dict())
        loss = next((key for key, value in update.items() if not math.isfinite(value)), None)
        if tensor is None and loss is None:
            return
        what = f"policy tensor {tensor!r}" if tensor is not None else f"its {loss} ({update[loss]})"
        raise FloatingPointError(
            f"iteration {self.iteration + 1}: the update left NaN or inf in {what} (rewards or observations too "
            f"large for float32, or too high a learning rate?); not saved, the last checkpoint is "
            f"{self.last_checkpoint or 'none'}"
        )

    def _warm_up_normalizers(self) -> None:
        """One rollout of the initial policy whose only use is observation statistics.

        Normalizers move after each update, so without this the first update would see raw
        observations (joint velocities of tens of rad/s) and its large first steps would drive the
        adaptive learning rate to its floor before training starts.
        """
        steps = self.total_steps
        self._collect()
        self.total_steps = steps  # no learning happened: the warm-up rollout is not a training step
        self.recent_episodes.clear()
        self.alg.update_normalizers()
        self.normalizers_warm = True

    def _log(self, stats: dict[str, float], final_iteration: int) -> None:
        if self.rank != 0:
            return
        if self.cfg.log_dir:  # metrics.jsonl and TensorBoard; a full disk warns once (ppo_bootstrap.disk)
            self._writer = self._writer or disk.RunLog(self.cfg.log_dir, lambda: self.last_checkpoint)
            self._writer.write(self.iteration, self.total_steps, stats)
        if self.cfg.console:
            print(format_progress(self.iteration, final_iteration, self.total_steps, stats), flush=True)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        env_state = self.env.state_dict() if hasattr(self.env, "state_dict") else None
        return {
            "iteration": self.iteration,
            "total_steps": self.total_steps,
            "normalizers_warm": self.normalizers_warm,
            "world_size": self.world_size,
            "env_device": str(self.env_device),  # a resume on another device type draws the envs anew
            "policy": self.policy.state_dict(),
            "ppo": self.alg.state_dict(),
            "config": dataclasses.asdict(self.cfg),
            **({"task": self.metadata} if self.metadata else {}),
            "obs": self.obs,
            "states": self.alg.states,
            "episode_return": self.episode_return,
            "episode_length": self.episode_length,
            "recent_episodes": list(self.recent_episodes),
            "env": env_state,
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "numpy": np.random.get_state(),
                "python": random.getstate(),
                "generator": self.generator.get_state(),
            },
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write a checkpoint atomically: a crash mid-save leaves the previous file at ``path`` intact.

        Under ``torch.distributed`` only rank 0 writes (all ranks hold the same learning state).
        """
        if self.rank != 0:
            return
        try:
            self.last_checkpoint = checkpoint.save_atomic(self.state_dict(), path)
        except disk.RunWriteError as err:  # the disk refused it: say what is still there
            err.add(f"the last checkpoint is {self.last_checkpoint or 'none written by this process'}")
            raise

    def load(self, path: str | os.PathLike, load_optimizer: bool = True) -> None:
        """Restore a checkpoint, all or nothing.

        Single process, saved by a single process, with the same task, env count, env device and
        env model: training continues exactly where it stopped (RNG states, observations,
        recurrent states, and env state when the env provides ``state_dict``/``load_state_dict``).
        Where any of these differs (another world size or ``num_envs``, 4,096 GPU envs resumed as
        64 CPU ones, an env whose ``check_state_dict`` refuses the saved state): the learning state
        (policy, normalizers, optimizer, learning rate, iteration) is restored, the envs continue
        from their current state, and one printed line says what differed. A policy-only
        checkpoint (``policy`` and ``config``, as ``docs/checkpoints`` ships) loads the network and
        the counters for fine-tuning with a fresh optimizer, and says so; envs and RNG go on as they are.

        Everything is checked before anything changes: the file (:func:`ppo_bootstrap.checkpoint.read`:
        damage, checksum, NaN/inf), the network's shapes (a checkpoint of another task whose network
        does not fit is named with both task ids), the optimizer state and the RNG states.

        Raises:
            FileNotFoundError: no file at ``path``.
            ~ppo_bootstrap.checkpoint.CheckpointError: the file is damaged or does not fit this
                runner, in one line naming it; the runner is unchanged.
        """
        ckpt = checkpoint.read(path, self.device)
        if checkpoint.is_rsl_rl(ckpt):
            self._load_rsl_rl(path, ckpt, load_optimizer)
            return
        checkpoint.check_fits(path, ckpt["policy"], self.policy.state_dict(), "this runner's network",
                              tasks=(checkpoint.task_id(ckpt), self.metadata.get("id")))
        if not checkpoint.is_full(ckpt):
            self._load_policy_only(path, ckpt)
            return
        differs = self._resume_differs(ckpt)
        exact = differs is None
        try:
            if load_optimizer:
                self.alg.check_state_dict(ckpt["ppo"])
            if exact:
                self._check_resume(ckpt)
        except (ValueError, KeyError, TypeError) as err:
            raise checkpoint.CheckpointError(path, str(err)) from err
        # Nothing has changed so far. The env goes first: it is the one part that may still refuse.
        if exact and ckpt["env"] is not None and hasattr(self.env, "load_state_dict"):
            self.env.load_state_dict(ckpt["env"])
        self.policy.load_state_dict(ckpt["policy"])
        if load_optimizer:
            self.alg.load_state_dict(ckpt["ppo"])
        self.iteration = ckpt["iteration"]
        self.total_steps = ckpt["total_steps"]
        self.metadata = self.metadata or ckpt.get("task") or {}  # the env this runner was given wins over the file's record
        self.normalizers_warm = bool(ckpt.get("normalizers_warm", ckpt["total_steps"] > 0))
        if not exact:
            if self.rank == 0:
                print(f"resumed {os.fspath(path)} without its env state ({differs}): the policy, normalizers"
                      f"{', optimizer' if load_optimizer else ''} and iteration count continue, the envs start "
                      "from their own state", flush=True)
            return
        self.obs = ckpt["obs"]
        self.alg.states = ckpt["states"]
        self.episode_return = ckpt["episode_return"]
        self.episode_length = ckpt["episode_length"]
        self.recent_episodes.clear()
        self.recent_episodes.extend(tuple(e) for e in ckpt.get("recent_episodes", ()))
        rng = ckpt["rng"]
        torch.set_rng_state(rng["torch"].cpu())
        if rng["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in rng["cuda"]])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        self.generator.set_state(rng["generator"].cpu())

    def _resume_differs(self, ckpt: dict[str, Any]) -> str | None:
        """What keeps ``ckpt`` from continuing exactly on this runner's env (``None``: nothing); changes nothing."""
        saved_world, saved_task, now_task = ckpt.get("world_size", 1), checkpoint.task_id(ckpt), self.metadata.get("id")
        if saved_world != 1 or self.world_size != 1:
            return f"saved by {saved_world} process(es), this run has {self.world_size}"
        if saved_task and now_task and saved_task != now_task:
            return f"trained on {saved_task}, this run is {now_task}"
        saved_device = ckpt.get("env_device")
        if saved_device is not None and torch.device(saved_device).type != self.env_device.type:
            return f"saved with envs on {saved_device}, this run's are on {self.env_device}"
        saved_envs, num_envs = ckpt["episode_return"].shape[0], self.env.num_envs
        if saved_envs != num_envs:
            return f"saved with {saved_envs} envs, this run has {num_envs}"
        saved, current = ({g: tuple(v.shape) for g, v in obs.items()} for obs in (ckpt["obs"], self.obs))
        if saved != current:
            return f"its observation groups {saved} differ from this env's {current}"
        if ckpt["env"] is not None and hasattr(self.env, "check_state_dict"):
            try:
                self.env.check_state_dict(ckpt["env"])
            except ValueError as err:
                return str(err)
        return None

    def _check_resume(self, ckpt: dict[str, Any]) -> None:
        """Raise ``ValueError`` unless the RNG states of ``ckpt`` (whose settings match) can be restored."""
        rng = ckpt["rng"]
        for name, now in (("torch", torch.get_rng_state()), ("generator", self.generator.get_state())):
            if not torch.is_tensor(rng[name]) or rng[name].shape != now.shape:
                raise ValueError(f"its {name} RNG state is malformed")

    def _load_rsl_rl(self, path: str | os.PathLike, ckpt: dict[str, Any], load_optimizer: bool) -> None:
        from ppo_bootstrap import rsl_rl

        state = rsl_rl.policy_state(path, ckpt, self.policy)
        ppo = rsl_rl.optimizer_state(path, ckpt, self.policy, self.alg.optimizer) if load_optimizer else None
        if ppo is not None:
            try:
                self.alg.check_state_dict(ppo)
            except (ValueError, KeyError, TypeError) as err:
                raise checkpoint.CheckpointError(path, str(err)) from err
        self.policy.load_state_dict(state)
        if ppo is not None:
            self.alg.load_state_dict(ppo)
        else:
            self.alg.reset_optimizer()
        self.iteration = int(ckpt.get("iter", 0))  # rsl-rl-lib's own count, which its file names carry
        self.total_steps = 0  # rsl-rl-lib does not record it
        self.normalizers_warm = True  # the file's normalizers come with its policy
        if self.rank == 0:
            what = "its Adam state" if ppo is not None else "a fresh optimizer"
            print(f"loaded {os.fspath(path)}: rsl-rl-lib {rsl_rl.layout(ckpt)} checkpoint (networks, normalizers, "
                  f"noise std) at iteration {self.iteration}, with {what}; envs and RNG go on as they are", flush=True)

    def _load_policy_only(self, path: str | os.PathLike, ckpt: dict[str, Any]) -> None:
        self.policy.load_state_dict(ckpt["policy"])
        self.alg.reset_optimizer()
        self.iteration = int(ckpt.get("iteration", 0))
        self.total_steps = int(ckpt.get("total_steps", 0))
        self.normalizers_warm = True  # the file's normalizers come with its policy
        self.metadata = self.metadata or ckpt.get("task") or {}  # the env this runner was given wins over the file's record
        if self.rank == 0:
            print(f"loaded {os.fspath(path)}: policy only (no optimizer, env or RNG state); fine-tuning from "
                  f"iteration {self.iteration} with a fresh optimizer", flush=True)

    def export_onnx(self, path: str | os.PathLike) -> None:
        """Export the deterministic actor (normalizer included) to ONNX.

        Feed-forward: input ``obs`` ``[B, D]`` -> ``actions`` ``[B, A]``. Recurrent: inputs ``obs``
        and ``state_in`` ``[S, B, H]`` -> ``actions`` and ``state_out``.
        """
        from ppo_bootstrap.export import export_actor_onnx

        export_actor_onnx(self.policy, self.obs[POLICY].shape[-1], path)


class _StopOnSignal:
    """Turns the first SIGINT / SIGTERM into a request to stop; a second one exits at once.

    The second signal writes one line naming the last checkpoint to stderr and raises
    ``SystemExit(128 + signum)``: no traceback, and a checkpoint write in progress removes its
    temporary on the way out. Libraries may replace the handler, in Python or in native code (where
    Python never hears of it); :meth:`reassert`, once per iteration, installs it again and warns once
    per signal naming the replacement. The previous handlers come back on exit.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, last_checkpoint: Callable[[], Path | None] = lambda: None) -> None:
        self.requested = False
        self.signal_name = ""
        self._last_checkpoint = last_checkpoint
        self._previous: dict[int, Any] = {}
        self._native: dict[int, int | None] = {}  # the C-level handler behind ours, where readable
        self._warned: set[int] = set()

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.requested:  # a second signal: stop now
            last = self._last_checkpoint() or "none written by this process"
            os.write(2, f"second {name}: stopping at once; the last checkpoint is {last}\n".encode())  # no buffered I/O in a handler
            raise SystemExit(128 + signum)
        self.requested = True
        self.signal_name = name

    def _install(self, sig: int) -> Any:
        previous = signal.signal(sig, self._handle)
        self._native[sig] = _native_handler(sig)
        return previous

    def __enter__(self) -> "_StopOnSignal":
        if threading.current_thread() is threading.main_thread():  # handlers can only live there
            for sig in self.SIGNALS:
                self._previous[sig] = self._install(sig)
        return self

    def reassert(self) -> None:
        """Install the handler again where a library replaced it; warn once per signal, naming the replacement."""
        for sig in self._previous:
            current, native = signal.getsignal(sig), self._native[sig]
            if current != self._handle:
                replaced_by = _handler_name(current)
            elif native is None:  # the C level cannot be read here: install again, unseen
                replaced_by = None
            elif _native_handler(sig) != native:
                replaced_by = "native code (a handler installed outside Python)"
            else:
                continue
            self._install(sig)
            if replaced_by is not None and sig not in self._warned:
                self._warned.add(sig)
                warnings.warn(f"the {signal.Signals(sig).name} handler was replaced by {replaced_by}; the Runner "
                              "installed its own again, so a stop request still ends training after the iteration",
                              RuntimeWarning, stacklevel=3)

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _handler_name(handler: Any) -> str:
    if handler is None:
        return "native code (a handler installed outside Python)"
    if isinstance(handler, signal.Handlers):
        return handler.name
    return f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', repr(handler))}"


@functools.cache
def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sigaction.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    return libc


def _native_handler(signum: int) -> int | None:
    """The address of the process's C-level handler for ``signum`` (libc ``sigaction``; the handler
    is the first field of ``struct sigaction`` on Linux and macOS), or ``None`` where unreadable."""
    try:
        buf = ctypes.create_string_buffer(512)  # larger than any struct sigaction
        if _libc().sigaction(signum, None, buf) != 0:
            return None
    except (OSError, AttributeError, TypeError):
        return None
    return ctypes.c_void_p.from_buffer(buf).value or 0


def read_metrics(log_dir: str | os.PathLike) -> list[dict[str, float]]:
    """The rows of ``log_dir/metrics.jsonl`` in iteration order, one per iteration.

    A run resumed from a checkpoint older than its last logged iteration logs those iterations
    again; the later row of an iteration is the one the resumed run continued from, so it wins.
    A row cut off by a full disk or a killed writer is skipped, with a warning.
    Each row gains ``train_s``: the Runner's collection and update seconds summed up to and
    including it (start-up, kernel compilation and checkpoint writes are not in it).
    """
    rows = {int(row["iteration"]): row for row in disk.read_rows(Path(log_dir) / disk.METRICS)}  # torn rows skipped
    train_s = 0.0
    out = []
    for iteration in sorted(rows):
        row = rows[iteration]
        train_s += row["perf/collection_s"] + row["perf/learning_s"]
        out.append({**row, "train_s": train_s})
    return out


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def format_progress(iteration: int, final_iteration: int, total_steps: int, stats: dict[str, float]) -> str:
    """The console block printed after each iteration, in rsl_rl's shape: what the iteration cost,
    how the episodes end (falls apart from timeouts) and what the value target added at timeouts,
    then the env's own logs and the run's clock."""
    ended = stats["episodes/ended"]
    falls, timeouts = stats["episodes/terminated"], stats["episodes/truncated_only"]
    per_end = f" (per ended episode: {falls / ended:.2f} falls, {timeouts / ended:.2f} timeouts)" if ended else ""
    rows = [
        ("computation", f"{stats['perf/steps_per_s']:,.0f} steps/s (collection {stats['perf/collection_s']:.2f} s, "
                        f"learning {stats['perf/learning_s']:.2f} s)"),
        ("mean action std", f"{stats['policy/mean_action_std']:.3f}" if "policy/mean_action_std" in stats else "-"),
    ]
    if "episodes/mean_return_100" in stats:
        rows += [("mean return (last 100 episodes)", f"{stats['episodes/mean_return_100']:.3f}"),
                 ("mean length (last 100 episodes)", f"{stats['episodes/mean_length_100']:.1f} steps")]
    rows += [
        ("episodes ended this iteration", f"{ended:.0f}: {falls:.0f} falls, {timeouts:.0f} timeouts{per_end}"),
        ("timeout bootstrap gamma*V(s_final)", f"{stats['timeout_bootstrap/mean']:.3f} (mean over this iteration's timeouts)"),
        ("value / surrogate loss", f"{stats['loss/value']:.4f} / {stats['loss/surrogate']:.4f}"),
        ("entropy / kl / learning rate", f"{stats['loss/entropy']:.3f} / {stats['policy/kl']:.4f} / {stats['policy/learning_rate']:.2e}"),
    ]
    env_rows = [(k.removeprefix("env/"), f"{v:.4f}") for k, v in stats.items() if k.startswith("env/")]
    clock = [("total env steps", f"{total_steps:,}"),
             ("iteration time", f"{stats['perf/collection_s'] + stats['perf/learning_s']:.2f} s")]
    if "perf/elapsed_s" in stats:
        clock += [("elapsed", _clock(stats["perf/elapsed_s"])), ("ETA", _clock(stats["perf/eta_s"]))]
    label = max(len(name) for name, _ in rows + env_rows + clock) + 2
    width = max(72, label + 40)
    lines = [f" Learning iteration {iteration}/{final_iteration} ".center(width, "#")]
    lines += [f"{name:>{label}}: {value}" for name, value in rows]
    if env_rows:
        lines.append(" env logs, mean per policy step (Episode_Termination/*: ends per step) ".center(width, "-"))
        lines += [f"{name:>{label}}: {value}" for name, value in env_rows]
    lines.append("-" * width)
    lines += [f"{name:>{label}}: {value}" for name, value in clock]
    return "\n".join(lines)
