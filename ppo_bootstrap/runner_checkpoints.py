"""The Runner's checkpoints: what it saves, and how it loads its own files, policy-only files and
rsl-rl-lib's (:class:`RunnerCheckpoints`, a part of :class:`~ppo_bootstrap.runner.Runner`)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import torch

from ppo_bootstrap import checkpoint, disk


class RunnerCheckpoints:
    """:meth:`state_dict`, :meth:`save` and :meth:`load` of :class:`~ppo_bootstrap.runner.Runner`
    (which holds the env, policy, algorithm, counters and RNG they read and write)."""

    last_checkpoint: Path | None = None
    """The file the last :meth:`save` of this process wrote."""

    def state_dict(self) -> dict[str, Any]:
        env_state = self.env.state_dict() if hasattr(self.env, "state_dict") else None
        return {
            "iteration": self.iteration,
            "total_steps": self.total_steps,
            "normalizers_warm": self.normalizers_warm,
            "env_steps": self.env_steps,
            "world_size": self.world_size,
            "env_device": str(self.env_device),  # a resume on another device type draws the envs anew
            "policy": self.policy.state_dict(),
            "ppo": self.alg.state_dict(),
            "config": dataclasses.asdict(self.cfg),
            **({"task": self.metadata} if self.metadata else {}),
            "obs": self.obs,
            "states": self.alg.states,
            "episode_return": self.episodes.returns,
            "episode_length": self.episodes.lengths,
            "recent_episodes": list(self.episodes.recent),
            "env": env_state,
            "rng": checkpoint.rng_state(self.generator),
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
        env model, from an env that saves its state (``state_dict``/``load_state_dict``): training
        continues exactly where it stopped (RNG states, observations, recurrent states, episode
        counters and the env's state).
        Where any of these differs (another world size or ``num_envs``, 4,096 GPU envs resumed as
        64 CPU ones, an env whose ``check_state_dict`` refuses the saved state, an env with no state
        to restore, as Isaac Lab's): the learning state
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
        if exact:  # an exact resume has the env's saved state and an env that loads it (_resume_differs)
            self.env.load_state_dict(ckpt["env"])
        self.policy.load_state_dict(ckpt["policy"])
        if load_optimizer:
            self.alg.load_state_dict(ckpt["ppo"])
        self.iteration = ckpt["iteration"]
        self.total_steps = ckpt["total_steps"]
        self.metadata = self.metadata or ckpt.get("task") or {}  # the env this runner was given wins over the file's record
        self.normalizers_warm = bool(ckpt.get("normalizers_warm", ckpt["total_steps"] > 0))
        self.env_steps = checkpoint.env_steps(ckpt)  # an exact resume's env restores its own counter with its state
        if not exact:
            clock = self._continue_env_clock()
            if self.rank == 0:
                print(f"resumed {os.fspath(path)} without its env state ({differs}): the policy, normalizers"
                      f"{', optimizer' if load_optimizer else ''} and iteration count continue, the envs start "
                      f"from their own state{clock}", flush=True)
            return
        self.obs = ckpt["obs"]
        self.alg.states = ckpt["states"]
        self.episodes.returns, self.episodes.lengths = ckpt["episode_return"], ckpt["episode_length"]
        self.episodes.recent.clear()
        self.episodes.recent.extend(tuple(e) for e in ckpt.get("recent_episodes", ()))
        checkpoint.set_rng_state(ckpt["rng"], self.generator)

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
        if ckpt["env"] is None or not hasattr(self.env, "load_state_dict"):
            # without the env's own state the saved observations and episode counters describe
            # episodes this env is not in (a rebuilt Isaac Lab env starts new ones)
            return "the env saves no state of its own (state_dict / load_state_dict) to continue from"
        if hasattr(self.env, "check_state_dict"):
            try:
                self.env.check_state_dict(ckpt["env"])
            except ValueError as err:
                return str(err)
        return None

    def _check_resume(self, ckpt: dict[str, Any]) -> None:
        """Raise ``ValueError`` unless the RNG states of ``ckpt`` (whose settings match) can be restored."""
        checkpoint.check_rng_state(ckpt["rng"], self.generator)

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
        self.env_steps = self.iteration * self.cfg.num_steps_per_env  # nor this: its iterations at this runner's length
        clock = self._continue_env_clock()
        if self.rank == 0:
            what = "its Adam state" if ppo is not None else "a fresh optimizer"
            print(f"loaded {os.fspath(path)}: rsl-rl-lib {rsl_rl.layout(ckpt)} checkpoint (networks, normalizers, "
                  f"noise std) at iteration {self.iteration}, with {what}; envs and RNG go on as they are{clock}",
                  flush=True)

    def _load_policy_only(self, path: str | os.PathLike, ckpt: dict[str, Any]) -> None:
        self.policy.load_state_dict(ckpt["policy"])
        self.alg.reset_optimizer()
        self.iteration = int(ckpt.get("iteration", 0))
        self.total_steps = int(ckpt.get("total_steps", 0))
        self.normalizers_warm = True  # the file's normalizers come with its policy
        self.env_steps = checkpoint.env_steps(ckpt)
        self.metadata = self.metadata or ckpt.get("task") or {}  # the env this runner was given wins over the file's record
        clock = self._continue_env_clock()
        if self.rank == 0:
            print(f"loaded {os.fspath(path)}: policy only (no optimizer, env or RNG state); fine-tuning from "
                  f"iteration {self.iteration} with a fresh optimizer{clock}", flush=True)

    def _continue_env_clock(self) -> str:
        """Set the env's step counter to :attr:`env_steps` where the env has one (Isaac Lab's
        ``common_step_counter``, the G1 tasks'), so that its curricula (reward ramps, Isaac Lab's
        ``modify_reward_weight``) go on from where the checkpoint's training left them rather than
        from their start. Returns the clause the load's line adds ("" where the env has none)."""
        env = getattr(self.env, "unwrapped", self.env)  # an adapter's env, or the env itself
        if type(getattr(env, "common_step_counter", None)) is not int:
            return ""
        env.common_step_counter = self.env_steps
        return f"; the env's step counter (its curricula's clock) continues at {self.env_steps}"
