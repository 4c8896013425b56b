"""Isaac Lab's own ``Isaac-Velocity-Flat-G1`` and ``-Rough-G1`` on the locally built G1 USD, adapted for ``Runner``.

Isaac Lab's G1 velocity tasks are written for the 37-DoF Isaac G1 USD from the asset server. On the
29-DoF G1 that ``isaac_adapter.isaaclab.assets`` builds, five overrides make the flat task run (each
measured kit-less on Newton / MuJoCo-Warp, on CPU and on an H200), and a sixth the rough one:

1. ``scene.robot``: the 29-DoF articulation (:func:`~isaac_adapter.isaaclab.robot.g1_articulation_cfg`);
2. the arm and torso deviation rewards re-keyed to the 29 joint names, the finger term dropped;
3. the contact sensor on ``Robot/.*``: the converted USD nests bodies (``Robot/Geometry/pelvis/...``),
   so Isaac Lab's ``Robot/[^/]*`` matches none;
4. no sky light (its HDR texture is a cloud path);
5. ``nconmax`` 32 contacts per world: the task's 10 is sized for the Isaac G1's capsule feet, and
   Newton warns that 44 contacts overflow the limit of 40 on this model;
6. rough task only: the height scanner on the nested torso body (``Robot/torso_link`` matches no body
   here), and ``njmax`` 320 constraint rows per world instead of the flat task's 200: on the
   generated terrain the H200 run (4,096 envs, 118 iterations) asked for up to 213 and MuJoCo-Warp
   dropped the rows above the limit. Its terrain needs no asset;
7. falls end the episode. The task's only fall term, ``base_contact``, waits for a contact on
   ``torso_link``, and the torso and knees of this model carry no collider, so no fall makes that
   contact. Seen on the H200: with
   ``base_contact`` alone a fallen robot lay on the floor to the time limit (484 iterations, every
   robot judged fell within 1.2 s); with the G1 task's training thresholds (0.25 m, tilt 0.8) the
   policy learned to settle at 0.26 m (424 iterations). So the flat task ends an episode below
   :attr:`G1WalkConfig.eval_success_height` (0.60 m, the height the evaluator calls a fall) and
   both tasks beyond the tilt of :attr:`G1WalkConfig.tilt_threshold` (``bad_orientation``). The
   height term is in world height, so on rough terrain only the tilt applies.
"""

from __future__ import annotations

import math
from typing import Any

from isaac_adapter.isaaclab.robot import asset_root, g1_articulation_cfg, require_isaaclab
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig

TASKS = ("Isaac-Velocity-Flat-G1", "Isaac-Velocity-Rough-G1")
NCONMAX = 32
# the converted USD nests the bodies; Isaac Lab's G1 has the torso right under Robot/
TORSO_IN_USD = "Geometry/pelvis/waist_yaw_link/waist_roll_link/torso_link"
# constraint rows per world, as measured for each task (item 6 above)
NJMAX = {"Isaac-Velocity-Flat-G1": 200, "Isaac-Velocity-Rough-G1": 320}


def fall_limit_angle(tilt_threshold: float) -> float:
    """The body tilt (rad from upright) at which ``tilt_xy = g_x^2 + g_y^2`` reaches ``tilt_threshold``:
    ``tilt_xy = sin^2(angle)``, so Isaac Lab's ``bad_orientation`` ends the episode where the G1 task does."""
    return math.asin(math.sqrt(tilt_threshold))


def velocity_g1_env_cfg(
    task: str = "Isaac-Velocity-Flat-G1",
    num_envs: int = 4096,
    device: str = "cuda:0",
    drives: str = "isaaclab",
    episode_length_s: float | None = None,
) -> Any:
    """The task's env cfg with the overrides of the module docstring and ``compute_final_obs``.

    Args:
        task: a registered Isaac Lab G1 velocity task id (:data:`TASKS`).
        drives: ``"isaaclab"`` (the task's G1_CFG gains) or ``"task"`` (the MuJoCo task's drives).
        episode_length_s: override of the task's 20 s (tests use short episodes to see timeouts).
    """
    if task not in TASKS:
        raise ValueError(f"unknown Isaac Lab G1 task {task!r}; choose from {TASKS}")
    require_isaaclab()
    asset_root()  # fail with the fix before Isaac Lab looks for cloud paths
    import isaaclab_tasks  # noqa: F401  (registers the tasks)
    from isaaclab.envs import mdp
    from isaaclab.managers import SceneEntityCfg, TerminationTermCfg
    from isaaclab_tasks.utils import parse_env_cfg

    cfg = parse_env_cfg(task, device=device, num_envs=num_envs)
    cfg.scene.robot = g1_articulation_cfg(drives=drives)
    rewards = cfg.rewards
    rewards.joint_deviation_arms.params["asset_cfg"] = SceneEntityCfg(
        "robot", joint_names=[".*_shoulder_.*_joint", ".*_elbow_joint", ".*_wrist_.*_joint"]
    )
    rewards.joint_deviation_torso.params["asset_cfg"] = SceneEntityCfg("robot", joint_names="waist_.*_joint")
    rewards.joint_deviation_fingers = None
    cfg.scene.contact_forces.prim_path = "{ENV_REGEX_NS}/Robot/.*"
    if getattr(cfg.scene, "height_scanner", None) is not None:  # the rough task scans from the torso
        cfg.scene.height_scanner.prim_path = "{ENV_REGEX_NS}/Robot/" + TORSO_IN_USD
    cfg.scene.sky_light = None
    falls = G1WalkConfig()
    cfg.terminations.bad_orientation = TerminationTermCfg(
        func=mdp.bad_orientation, params={"limit_angle": fall_limit_angle(falls.tilt_threshold)}
    )
    if task == "Isaac-Velocity-Flat-G1":  # world height means height above the floor only on flat ground
        cfg.terminations.root_height = TerminationTermCfg(
            func=mdp.root_height_below_minimum, params={"minimum_height": falls.eval_success_height}
        )
    cfg.sim.physics.solver_cfg.nconmax = NCONMAX
    cfg.sim.physics.solver_cfg.njmax = NJMAX[task]
    if episode_length_s is not None:
        cfg.episode_length_s = episode_length_s
    cfg.compute_final_obs = True
    return cfg


def registered_agent_cfg(task: str) -> Any:
    """The rsl_rl agent config Isaac Lab registers for ``task`` (its ``rsl_rl_cfg_entry_point``,
    ``G1FlatPPORunnerCfg`` for the flat G1), as Isaac Lab's ``train.py`` loads it."""
    require_isaaclab()
    import isaaclab_tasks  # noqa: F401  (registers the tasks)
    from isaaclab_tasks.utils.parse_cfg import load_cfg_from_registry

    return load_cfg_from_registry(task, "rsl_rl_cfg_entry_point")


def make_velocity_g1_env(
    task: str = "Isaac-Velocity-Flat-G1", clip_actions: float | None = None, env_cfg: Any = None, **cfg: Any
) -> Any:
    """Build the task (``cfg``: the arguments of :func:`velocity_g1_env_cfg`; or ``env_cfg``, one that
    function made and the caller changed) and wrap it as a :class:`ppo_bootstrap.env.VecEnv`
    (``IsaacLabVecEnv``, final observations from ``extras["final_obs"]``). ``clip_actions``: the
    registered agent config's (:func:`registered_agent_cfg`), as Isaac Lab's ``train.py`` hands it to
    ``RslRlVecEnvWrapper``; the G1 tasks register None, no clamp."""
    import gymnasium as gym

    from isaac_adapter.adapters.isaaclab import IsaacLabVecEnv

    if env_cfg is None:
        env_cfg = velocity_g1_env_cfg(task, **cfg)
    elif cfg:
        raise ValueError(f"give either env_cfg or the arguments of velocity_g1_env_cfg, not both ({sorted(cfg)})")
    return IsaacLabVecEnv(gym.make(task, cfg=env_cfg), clip_actions=clip_actions)
