"""The Runner's checkpoints: what it saves, and how it loads its own files, policy-only files and
rsl-rl-lib's (:class:`RunnerCheckpoints`, a part of :class:`~ppo_bootstrap.runner.Runner`)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from ppo_bootstrap import checkpoint


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
            "world_size": self.world_size,
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
        self.last_checkpoint = checkpoint.save_atomic(self.state_dict(), path)

    def load(self, path: str | os.PathLike, load_optimizer: bool = True) -> None:
        """Restore a checkpoint, all or nothing.

        Single process, saved by a single process: training continues exactly where it stopped
        (RNG states, observations, recurrent states, and env state when the env provides
        ``state_dict``/``load_state_dict``); that needs the same ``num_envs``. Any other world size,
        before or now: the learning state (policy, normalizers, optimizer, learning rate, iteration)
        is restored on every rank and the envs continue from their current state. A policy-only
        checkpoint (``policy`` and ``config``, as ``docs/checkpoints`` ships) loads the network and
        the counters for fine-tuning with a fresh optimizer, and says so; envs and RNG go on as they are.

        Everything is checked before anything changes: the file (:func:`ppo_bootstrap.checkpoint.read`:
        damage, checksum, NaN/inf), the network's shapes, the optimizer state, ``num_envs`` and the
        observation groups, and the env state through the env's ``check_state_dict(state)`` where
        it has one.

        Raises:
            FileNotFoundError: no file at ``path``.
            ~ppo_bootstrap.checkpoint.CheckpointError: the file is damaged or does not fit this
                runner, in one line naming it; the runner is unchanged.
        """
        ckpt = checkpoint.read(path, self.device)
        if checkpoint.is_rsl_rl(ckpt):
            self._load_rsl_rl(path, ckpt, load_optimizer)
            return
        checkpoint.check_fits(path, ckpt["policy"], self.policy.state_dict(), "this runner's network")
        if not checkpoint.is_full(ckpt):
            self._load_policy_only(path, ckpt)
            return
        exact = ckpt.get("world_size", 1) == 1 and self.world_size == 1
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
            return
        self.obs = ckpt["obs"]
        self.alg.states = ckpt["states"]
        self.episodes.returns, self.episodes.lengths = ckpt["episode_return"], ckpt["episode_length"]
        self.episodes.recent.clear()
        self.episodes.recent.extend(tuple(e) for e in ckpt.get("recent_episodes", ()))
        checkpoint.set_rng_state(ckpt["rng"], self.generator)

    def _check_resume(self, ckpt: dict[str, Any]) -> None:
        """Raise ``ValueError`` unless ``ckpt`` can continue exactly on this env; changes nothing."""
        saved_envs, num_envs = ckpt["episode_return"].shape[0], self.env.num_envs
        if saved_envs != num_envs:
            raise ValueError(f"it was saved with {saved_envs} envs, this env has {num_envs}: exact resume needs "
                             "the same num_envs")
        saved, current = ({g: tuple(v.shape) for g, v in obs.items()} for obs in (ckpt["obs"], self.obs))
        if saved != current:
            raise ValueError(f"its observation groups {saved} differ from this env's {current}")
        checkpoint.check_rng_state(ckpt["rng"], self.generator)
        if ckpt["env"] is not None and hasattr(self.env, "check_state_dict"):
            self.env.check_state_dict(ckpt["env"])

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
