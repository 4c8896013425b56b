"""The on-policy Runner: collect a rollout, compute exact value targets, update, log, checkpoint."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ppo_bootstrap import checkpoint, distributed
from ppo_bootstrap.env import POLICY, ObsGroups, StepResult, VecEnv, critic_obs
from ppo_bootstrap.episode import recover_non_finite, validate_step
from ppo_bootstrap.modules.actor_critic import ActorCritic, PolicyConfig
from ppo_bootstrap.ppo import PPO, PPOConfig


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
        validate_env_output: check every step against the env contract (shapes, flags, final
            observations, NaN/inf) and raise naming field and env ids. Costs a host sync per step.
        console: print a progress block per iteration.
        non_finite_obs: what a non-finite observation, reward or final observation does.
            ``"error"`` (default): raise :class:`~ppo_bootstrap.episode.EpisodeProtocolError`
            naming field and env ids, before any update. ``"reset"``: end those episodes as a
            blow-up (see :mod:`ppo_bootstrap.episode`), restart the envs through
            ``env.reset_envs(env_ids)`` and count them (``episodes/non_finite_resets``).
    """

    num_steps_per_env: int = 24
    save_interval: int = 50
    log_dir: str | None = None
    seed: int = 0
    validate_env_output: bool = True
    console: bool = True
    non_finite_obs: Literal["error", "reset"] = "error"
    ppo: PPOConfig = field(default_factory=PPOConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)

    def __post_init__(self) -> None:
        if self.num_steps_per_env < 1:
            raise ValueError(f"num_steps_per_env must be >= 1, got {self.num_steps_per_env}")
        if self.save_interval < 0:
            raise ValueError(f"save_interval must be >= 0, got {self.save_interval}")
        if self.non_finite_obs not in ("error", "reset"):
            raise ValueError(f"non_finite_obs must be 'error' or 'reset', got {self.non_finite_obs!r}")


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
        policy_dim = self.obs[POLICY].shape[-1]
        critic_dim = critic_obs(self.obs).shape[-1]
        self.policy = ActorCritic(policy_dim, critic_dim, env.num_actions, self.cfg.policy).to(self.device)
        distributed.broadcast_module_(self.policy)
        self.alg = PPO(self.policy, self.cfg.ppo, self.device)
        self.alg.init_storage(self.cfg.num_steps_per_env, env.num_envs, self.obs, env.num_actions)
        self.iteration = 0
        self.total_steps = 0
        self.episode_return = torch.zeros(env.num_envs, device=self.device)
        self.episode_length = torch.zeros(env.num_envs, device=self.device)
        self._writer = None

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
        ended_return = torch.zeros((), device=self.device)
        ended_length = torch.zeros((), device=self.device)
        ended = torch.zeros((), device=self.device)
        info_sums: dict[str, Any] = {}
        n_broken = 0
        for _ in range(self.cfg.num_steps_per_env):
            actions = alg.act(self.obs)
            result: StepResult = env.step(actions.to(self.env_device))
            if self.cfg.non_finite_obs == "reset":
                last_obs = {k: v.to(result.reward.device) for k, v in self.obs.items()}
                result, broken = recover_non_finite(result, last_obs, env.reset_envs)
                n_broken += broken.numel()
            if self.cfg.validate_env_output:
                validate_step(env.num_envs, result)
            result = self._on_device(result)
            done = alg.process_env_step(result)

            keep = (~done).to(torch.float32)
            self.episode_return += result.reward
            self.episode_length += 1
            ended_return += (self.episode_return * done).sum()
            ended_length += (self.episode_length * done).sum()
            ended += done.sum()
            self.episode_return *= keep
            self.episode_length *= keep
            for key, value in result.info.get("log", {}).items():
                info_sums[key] = info_sums.get(key, 0.0) + value  # tensors stay on device until the end
            self.obs = self._to_device(result.obs)
        self.total_steps += self.cfg.num_steps_per_env * env.num_envs
        n = float(ended)
        stats = {f"env/{k}": float(v) / self.cfg.num_steps_per_env for k, v in info_sums.items()}
        stats["episodes/ended"] = n
        stats["episodes/non_finite_resets"] = float(n_broken)
        if n:
            stats["episodes/mean_return"] = float(ended_return) / n
            stats["episodes/mean_length"] = float(ended_length) / n
        return stats

    # ------------------------------------------------------------------ training
    def learn(self, iterations: int) -> None:
        """Run ``iterations`` more PPO iterations (continuing the count after :meth:`load`).

        SIGINT or SIGTERM ends training cleanly after the iteration in progress: the checkpoint
        ``model_<iteration>.pt`` is written to ``log_dir`` and ``learn`` returns with
        :attr:`interrupted` set. A second signal interrupts at once.
        """
        self.policy.train()
        self.interrupted = False
        start_iteration = self.iteration
        if iterations > 0 and self.total_steps == 0 and self.cfg.policy.obs_normalization:
            self._warm_up_normalizers()
        with _StopOnSignal() as stop:
            for _ in range(iterations):
                t0 = time.perf_counter()
                stats = self._collect()
                stats.update(self.alg.compute_returns(self.obs))
                t1 = time.perf_counter()
                stats.update(self.alg.update(self.generator))
                self.alg.update_normalizers()
                t2 = time.perf_counter()
                self.iteration += 1
                stats["perf/collection_s"] = t1 - t0
                stats["perf/learning_s"] = t2 - t1
                stats["perf/steps_per_s"] = self.cfg.num_steps_per_env * self.env.num_envs * self.world_size / (t2 - t0)
                self._log(stats, start_iteration + iterations)
                self.last_stats = stats
                if self.cfg.log_dir and self.cfg.save_interval and self.iteration % self.cfg.save_interval == 0:
                    self.save(Path(self.cfg.log_dir) / f"model_{self.iteration}.pt")
                # Every rank must stop at the same iteration, or the next collective would hang.
                if distributed.all_reduce_sum_(torch.tensor(float(stop.requested), device=self.device)).item() > 0:
                    self.interrupted = True
                    if self.rank == 0:
                        print(f"stopping after iteration {self.iteration} on {stop.signal_name}", flush=True)
                    break
        if self.cfg.log_dir and self.iteration > start_iteration:
            self.save(Path(self.cfg.log_dir) / f"model_{self.iteration}.pt")

    def _warm_up_normalizers(self) -> None:
        """One rollout of the initial policy whose only use is observation statistics.

        Normalizers move after each update, so without this the first update would see raw
        observations (joint velocities of tens of rad/s) and its large first steps would drive the
        adaptive learning rate to its floor before training starts.
        """
        self._collect()
        self.alg.update_normalizers()

    def _log(self, stats: dict[str, float], final_iteration: int) -> None:
        if self.rank != 0:
            return
        if self.cfg.log_dir:
            if self._writer is None:
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(log_dir=self.cfg.log_dir)
            for key, value in stats.items():
                self._writer.add_scalar(key, value, self.iteration)
            row = {"iteration": self.iteration, "total_steps": self.total_steps, "time": time.time(), **stats}
            with open(Path(self.cfg.log_dir) / "metrics.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
        if self.cfg.console:
            print(format_progress(self.iteration, final_iteration, self.total_steps, stats), flush=True)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        env_state = self.env.state_dict() if hasattr(self.env, "state_dict") else None
        return {
            "iteration": self.iteration,
            "total_steps": self.total_steps,
            "world_size": self.world_size,
            "policy": self.policy.state_dict(),
            "ppo": self.alg.state_dict(),
            "config": dataclasses.asdict(self.cfg),
            "obs": self.obs,
            "states": self.alg.states,
            "episode_return": self.episode_return,
            "episode_length": self.episode_length,
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
        checkpoint.save_atomic(self.state_dict(), path)

    def load(self, path: str | os.PathLike, load_optimizer: bool = True) -> None:
        """Restore a checkpoint.

        Single process, saved by a single process: training continues exactly where it stopped
        (RNG states, observations, recurrent states, and env state when the env provides
        ``state_dict``/``load_state_dict``). Any other world size, before or now: the learning state
        (policy, normalizers, optimizer, learning rate, iteration) is restored on every rank and
        the envs continue from their current state.
        """
        ckpt = checkpoint.read(path, self.device)
        self.policy.load_state_dict(ckpt["policy"])
        if load_optimizer:
            self.alg.load_state_dict(ckpt["ppo"])
        self.iteration = ckpt["iteration"]
        self.total_steps = ckpt["total_steps"]
        if ckpt.get("world_size", 1) != 1 or self.world_size != 1:
            return
        self.obs = ckpt["obs"]
        self.alg.states = ckpt["states"]
        self.episode_return = ckpt["episode_return"]
        self.episode_length = ckpt["episode_length"]
        if ckpt["env"] is not None and hasattr(self.env, "load_state_dict"):
            self.env.load_state_dict(ckpt["env"])
        rng = ckpt["rng"]
        torch.set_rng_state(rng["torch"].cpu())
        if rng["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in rng["cuda"]])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        self.generator.set_state(rng["generator"].cpu())

    def export_onnx(self, path: str | os.PathLike) -> None:
        """Export the deterministic actor (normalizer included) to ONNX.

        Feed-forward: input ``obs`` ``[B, D]`` -> ``actions`` ``[B, A]``. Recurrent: inputs ``obs``
        and ``state_in`` ``[S, B, H]`` -> ``actions`` and ``state_out``.
        """
        from ppo_bootstrap.export import export_actor_onnx

        export_actor_onnx(self.policy, self.obs[POLICY].shape[-1], path)


class _StopOnSignal:
    """Turns the first SIGINT / SIGTERM into a request to stop; restores the handlers on exit."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self.signal_name = ""
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:  # a second signal: stop now
            raise KeyboardInterrupt
        self.requested = True
        self.signal_name = signal.Signals(signum).name

    def __enter__(self) -> "_StopOnSignal":
        if threading.current_thread() is threading.main_thread():  # handlers can only live there
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def read_metrics(log_dir: str | os.PathLike) -> list[dict[str, float]]:
    """The rows of ``log_dir/metrics.jsonl`` in iteration order, one per iteration.

    A run resumed from a checkpoint older than its last logged iteration logs those iterations
    again; the later row of an iteration is the one the resumed run continued from, so it wins.
    Each row gains ``train_s``: the Runner's collection and update seconds summed up to and
    including it (start-up, kernel compilation and checkpoint writes are not in it).
    """
    rows: dict[int, dict[str, float]] = {}
    with open(Path(log_dir) / "metrics.jsonl") as f:
        for line in f:
            row = json.loads(line)
            rows[int(row["iteration"])] = row
    train_s = 0.0
    out = []
    for iteration in sorted(rows):
        row = rows[iteration]
        train_s += row["perf/collection_s"] + row["perf/learning_s"]
        out.append({**row, "train_s": train_s})
    return out


def format_progress(iteration: int, final_iteration: int, total_steps: int, stats: dict[str, float]) -> str:
    """The console block printed after each iteration."""
    width = 72
    title = f" iteration {iteration}/{final_iteration} "
    lines = [title.center(width, "#")]
    rows = [
        ("steps/s", f"{stats['perf/steps_per_s']:.0f}  (collect {stats['perf/collection_s']:.2f} s, learn {stats['perf/learning_s']:.2f} s)"),
        ("total env steps", f"{total_steps}"),
        ("value loss", f"{stats['loss/value']:.4f}"),
        ("surrogate loss", f"{stats['loss/surrogate']:.4f}"),
        ("entropy / kl / lr", f"{stats['loss/entropy']:.3f} / {stats['policy/kl']:.4f} / {stats['policy/learning_rate']:.2e}"),
        ("episodes ended", f"{stats['episodes/ended']:.0f}: {stats['episodes/terminated']:.0f} terminated, {stats['episodes/truncated_only']:.0f} timeouts"),
        ("timeout bootstrap (mean)", f"{stats['timeout_bootstrap/mean']:.3f}"),
    ]
    if "episodes/mean_return" in stats:
        rows.append(("episode return / length", f"{stats['episodes/mean_return']:.3f} / {stats['episodes/mean_length']:.1f}"))
    rows += [(k.removeprefix("env/"), f"{v:.4f}") for k, v in stats.items() if k.startswith("env/")]
    lines += [f"{name:>26}: {value}" for name, value in rows]
    return "\n".join(lines)
