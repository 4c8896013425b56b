"""The 29-DoF Unitree G1 as an Isaac Lab articulation, on the USD that ``isaac_adapter.isaaclab.assets``
builds from the MuJoCo model.

Two sets of joint drives:

* ``"task"``: the drives of the MuJoCo model the project's G1 task trains on (servo stiffness, damping,
  armature, friction loss and torque limits read from the compiled MJCF). The Isaac Lab G1 task then
  moves the same robot as the MuJoCo backends, so a policy moves between simulators.
* ``"isaaclab"``: Isaac Lab's own ``G1_CFG`` actuator groups (legs 150-200, ankles 20, arms 40),
  re-keyed to the 29 joint names. What ``Isaac-Velocity-Flat-G1`` uses by default.

Nothing here imports Isaac Lab at module import time, so the module can be read (and its errors
raised) without it.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

ASSET_ROOT_ENV = "ISAACSIM_ASSET_ROOT"
BUILD_FIX = f"build it with: python -m isaac_adapter.isaaclab.assets DIR, then export {ASSET_ROOT_ENV}=DIR"
# Isaac Lab's G1_MINIMAL_CFG path under ISAACLAB_NUCLEUS_DIR, so its own tasks find our USD unchanged.
G1_USD = "Isaac/IsaacLab/Robots/Unitree/G1/g1_minimal.usd"

# Isaac Lab's G1_CFG drives (kp, kd, effort limit) per joint group, with the 29-DoF joint names.
_ISAACLAB_GROUPS: dict[str, dict[str, Any]] = {
    "legs": dict(
        joint_names_expr=[".*_hip_yaw_joint", ".*_hip_roll_joint", ".*_hip_pitch_joint", ".*_knee_joint", "waist_.*_joint"],
        stiffness={".*_hip_yaw_joint": 150.0, ".*_hip_roll_joint": 150.0, ".*_hip_pitch_joint": 200.0,
                   ".*_knee_joint": 200.0, "waist_.*_joint": 200.0},
        damping=5.0, joint_effort_limit=300.0,
    ),
    "feet": dict(
        joint_names_expr=[".*_ankle_pitch_joint", ".*_ankle_roll_joint"],
        stiffness=20.0, damping=2.0, joint_effort_limit=20.0,
    ),
    "arms": dict(
        joint_names_expr=[".*_shoulder_.*_joint", ".*_elbow_joint", ".*_wrist_.*_joint"],
        stiffness=40.0, damping=10.0, joint_effort_limit=300.0,
    ),
}  # fmt: skip


FOOT_CONTACT_FORCE_N = 1.0  # a foot pushing on the ground with more than this is in contact


def as_torch(x: Any) -> Any:
    """Isaac Lab 3 data arrays (Warp-backed proxies) as torch tensors, without a copy."""
    import torch

    return x.torch if hasattr(x, "torch") else torch.as_tensor(x)


def quat_wxyz(quat_xyzw: Any) -> Any:
    """``[..., 4]`` quaternions ``(w, x, y, z)`` (the project's convention) from Isaac Lab 3's ``(x, y, z, w)``."""
    # a roll, not an index list: a list index is uploaded to the GPU on every call, a host sync
    return quat_xyzw.roll(1, dims=-1)


def root_quat_wxyz(data: Any) -> Any:
    """``[N, 4]`` root orientation ``(w, x, y, z)`` from the root's pose, base data that a recorded CUDA
    graph may read (Isaac Lab refuses its derived properties inside a capture)."""
    return quat_wxyz(as_torch(data.root_link_pose_w)[:, 3:7])


def feet_in_contact(sensor: Any, feet: Any) -> Any:
    """``[N, F]`` bool: the contact sensor's bodies ``feet`` push on something with more than
    :data:`FOOT_CONTACT_FORCE_N`. ``feet``: a long tensor on the sensor's device (a Python list
    would be uploaded, a host sync, on every call) or a list."""
    return as_torch(sensor.data.net_forces_w)[:, feet].norm(dim=-1) > FOOT_CONTACT_FORCE_N


class IsaacLabSetupError(RuntimeError):
    """Isaac Lab, its Python or the local asset root is missing; the message says what to run."""


def require_isaaclab() -> None:
    """Raise :class:`IsaacLabSetupError` unless Isaac Lab 3 can be imported here."""
    import sys

    if sys.version_info[:2] != (3, 12):
        raise IsaacLabSetupError(
            f"Isaac Lab 3.0 needs Python 3.12, this is {sys.version.split()[0]}: "
            "run scripts/isaaclab_tier.sh, which builds a Python 3.12 environment with it"
        )
    try:
        import isaaclab  # noqa: F401
    except ImportError as err:
        raise IsaacLabSetupError(
            f"Isaac Lab is not installed ({err}): pip install 'isaaclab==3.0.0' in a Python 3.12 "
            "environment, or run scripts/isaaclab_tier.sh"
        ) from None


@functools.cache
def _task_model(model_variant: str) -> Any:
    """The task's compiled MuJoCo G1 (read only here): drives, pose and contact pairs come from it,
    and an env's build asks for it several times."""
    from isaac_adapter.tasks.g1_walk.assets import build_g1_model

    return build_g1_model(model_variant, sim_dt=0.005)


def asset_root() -> Path:
    """The local asset root Isaac Lab resolves its asset paths in (``$ISAACSIM_ASSET_ROOT``).

    Raises:
        IsaacLabSetupError: the variable is unset or the G1 USD is not under it.
    """
    root = os.environ.get(ASSET_ROOT_ENV)
    if not root:
        raise IsaacLabSetupError(f"{ASSET_ROOT_ENV} is not set, so Isaac Lab cannot find the G1 USD; {BUILD_FIX}")
    if not (Path(root) / G1_USD).is_file():
        raise IsaacLabSetupError(f"{ASSET_ROOT_ENV}={root} has no {G1_USD}; {BUILD_FIX}")
    return Path(root)


def check_g1_usd(root: Path, model_variant: str = "menagerie_mjx") -> None:
    """Raise :class:`IsaacLabSetupError` unless the G1 USD under ``root`` holds a prim for every
    collision geom of the MuJoCo model's contact pairs (what :func:`author_self_collisions` needs)."""
    from pxr import Usd

    from isaac_adapter.tasks.g1_walk.assets import contact_pairs

    stage = Usd.Stage.Open(str(root / G1_USD))
    missing = sorted(contact_pairs(_task_model(model_variant).model).geoms - {p.GetName() for p in stage.Traverse()})
    if missing:
        raise IsaacLabSetupError(f"{root / G1_USD} lacks the MuJoCo model's collision geoms {missing}; {BUILD_FIX}")


def task_drives(model_variant: str) -> dict[str, dict[str, float]]:
    """Per-joint drives of the project's MuJoCo G1 ``model_variant``: ``{quantity: {joint: value}}`` for
    ``stiffness``, ``damping``, ``armature``, ``friction`` and ``joint_effort_limit``.

    MuJoCo position servos are ``kp * (target - q) - kv * qdot``; Isaac Lab's implicit drive is the
    same law, so stiffness = kp and damping = kv (plus any joint damping).
    """
    g1 = _task_model(model_variant)
    m = g1.model
    drives: dict[str, dict[str, float]] = {k: {} for k in ("stiffness", "damping", "armature", "friction", "joint_effort_limit")}
    for i, name in enumerate(g1.joint_names):
        joint = int(m.actuator_trnid[i, 0])
        dof = int(m.jnt_dofadr[joint])
        kp, kv = float(m.actuator_gainprm[i, 0]), -float(m.actuator_biasprm[i, 2])
        drives["stiffness"][name] = kp
        drives["damping"][name] = kv + float(m.dof_damping[dof])
        drives["armature"][name] = float(m.dof_armature[dof])
        drives["friction"][name] = float(m.dof_frictionloss[dof])
        limit = m.jnt_actfrcrange[joint] if m.jnt_actfrclimited[joint] else m.actuator_forcerange[i]
        drives["joint_effort_limit"][name] = float(max(abs(limit[0]), abs(limit[1]))) or 1e6
    return drives


def g1_articulation_cfg(
    drives: str = "task",
    model_variant: str = "menagerie_mjx",
    prim_path: str = "{ENV_REGEX_NS}/Robot",
    joint_pos: dict[str, float] | None = None,
    root_height: float | None = None,
    self_collisions: bool = False,
) -> Any:
    """An ``ArticulationCfg`` of the local G1 USD.

    Args:
        drives: ``"task"`` (the MuJoCo model's drives, per joint) or ``"isaaclab"`` (G1_CFG's groups).
        model_variant: the MuJoCo G1 whose drives ``"task"`` copies.
        joint_pos: default joint positions by name or regex (default: the task model's nominal pose).
        root_height: spawn height of the pelvis (m); default: the task model's nominal height.
        self_collisions: collide as the MuJoCo model does (:func:`author_self_collisions`); False
            collides with the floor alone, as Isaac Lab's G1.
    """
    require_isaaclab()
    import isaaclab.sim as sim_utils
    from isaaclab.actuators import ImplicitActuatorCfg
    from isaaclab.assets.articulation import ArticulationCfg

    usd = asset_root() / G1_USD
    if drives == "task":
        per_joint = task_drives(model_variant)
        actuators = {"joints": ImplicitActuatorCfg(joint_names_expr=[".*"], **per_joint)}
    elif drives == "isaaclab":
        actuators = {name: ImplicitActuatorCfg(armature=0.01, **group) for name, group in _ISAACLAB_GROUPS.items()}
    else:
        raise ValueError(f"drives must be 'task' or 'isaaclab', got {drives!r}")
    spawn = {"func": functools.partial(spawn_with_self_collisions, model_variant=model_variant)} if self_collisions else {}
    nominal_height, nominal_joints = nominal_pose(model_variant)
    joint_pos = nominal_joints if joint_pos is None else joint_pos
    root_height = nominal_height if root_height is None else root_height
    return ArticulationCfg(
        prim_path=prim_path,
        spawn=sim_utils.UsdFileCfg(usd_path=str(usd), activate_contact_sensors=True, **spawn),
        init_state=ArticulationCfg.InitialStateCfg(pos=(0.0, 0.0, root_height), joint_pos=joint_pos, joint_vel={".*": 0.0}),
        soft_joint_pos_limit_factor=0.9,
        actuators=actuators,
    )


def author_self_collisions(stage: Any, robot_path: str, model_variant: str = "menagerie_mjx") -> int:
    """Give the G1 USD under ``robot_path`` the self-collisions of the MuJoCo model it came from.

    The converted USD collides only with the floor (self-collisions off, as Isaac Lab's G1): its legs
    pass through each other, and a policy trained on it trips on MuJoCo, where the swing foot strikes
    the other leg. This turns self-collisions on and authors ``physics:filteredPairs`` on every robot
    collider pair that is not one of the MJCF's ``<pair>``s, so exactly those collide. The foot boxes
    and linkage braces, which strike the other leg but never the floor in the MJCF, become colliders;
    keeping them off the ground is :func:`filter_from_ground`'s (Newton resolves a filtered pair
    within one imported asset, and the ground is imported apart from the robot). Authored before the
    robot is imported into the physics (:func:`spawn_with_self_collisions`). Returns the colliders' count.
    """
    from pxr import Sdf, Usd, UsdPhysics

    from isaac_adapter.tasks.g1_walk.assets import contact_pairs

    pairs = contact_pairs(_task_model(model_variant).model)
    root = stage.GetPrimAtPath(robot_path)
    if not root.IsValid():
        raise ValueError(f"no robot prim at {robot_path}")
    prims = {p.GetName(): p for p in Usd.PrimRange(root) if p.GetName() in pairs.geoms}
    missing = sorted(pairs.geoms - prims.keys())
    if missing:
        raise IsaacLabSetupError(f"the G1 USD at {robot_path} lacks the MuJoCo model's collision geoms {missing}; {BUILD_FIX}")
    # a self-only collider outranks the floor colliders (the converter gave them a priority), so a contact
    # with it takes its condim, the MJCF's for those pairs (1: frictionless); contacts between two
    # floor colliders mix as MuJoCo's geoms do (condim 3, the larger friction), unlike their pairs
    priority = 1 + max(int(p.GetAttribute("mjc:priority").Get() or 0) for name, p in prims.items()
                       if name in pairs.floor and p.HasAttribute("mjc:priority"))
    for name in sorted(pairs.self_only):
        prim = prims[name]
        UsdPhysics.CollisionAPI.Apply(prim)
        prim.CreateAttribute("mjc:condim", Sdf.ValueTypeNames.Int).Set(pairs.self_condim)
        prim.CreateAttribute("mjc:priority", Sdf.ValueTypeNames.Int).Set(priority)
    names = sorted(prims)
    for i, name in enumerate(names):
        rest = [prims[other].GetPath() for other in names[i + 1:] if frozenset((name, other)) not in pairs.self_pairs]
        UsdPhysics.FilteredPairsAPI.Apply(prims[name]).CreateFilteredPairsRel().SetTargets(rest)
    roots = [p for p in Usd.PrimRange(root) if p.HasAPI(UsdPhysics.ArticulationRootAPI)]
    if not roots:
        raise ValueError(f"no articulation root under {robot_path}")
    for prim in roots:
        prim.CreateAttribute("newton:selfCollisionEnabled", Sdf.ValueTypeNames.Bool).Set(True)
        prim.CreateAttribute("physxArticulation:enabledSelfCollisions", Sdf.ValueTypeNames.Bool).Set(True)
    return len(names)


def filter_from_ground(builder: Any, model_variant: str = "menagerie_mjx") -> int:
    """Keep the colliders that strike only the robot (foot boxes, linkage braces) off the ground.

    ``builder`` is Newton's ``ModelBuilder`` with every world replicated and not yet finalized (an
    Isaac Lab ``MODEL_INIT`` callback, as its own Newton articulation configures the builder there);
    the ground is the world-shared colliders. Returns the number of pairs filtered.
    """
    from newton import ShapeFlags

    from isaac_adapter.tasks.g1_walk.assets import contact_pairs

    self_only = contact_pairs(_task_model(model_variant).model).self_only
    collides = int(ShapeFlags.COLLIDE_SHAPES)
    ground = [i for i, world in enumerate(builder.shape_world) if world == -1 and builder.shape_flags[i] & collides]
    shapes = [i for i, label in enumerate(builder.shape_label) if label.rsplit("/", 1)[-1] in self_only]
    for shape in shapes:
        for plane in ground:
            builder.add_shape_collision_filter_pair(min(plane, shape), max(plane, shape))
    return len(shapes) * len(ground)


def spawn_with_self_collisions(prim_path: str, cfg: Any, *args: Any, model_variant: str = "menagerie_mjx",
                               **kwargs: Any) -> Any:
    """Isaac Lab's USD spawner, then :func:`author_self_collisions` on what it spawned: the clone
    plan imports the robot into Newton as the scene is made, before an env's ``_setup_scene``."""
    from isaaclab.sim.spawners.from_files import spawn_from_usd

    prim = spawn_from_usd(prim_path, cfg, *args, **kwargs)
    author_self_collisions(prim.GetStage(), str(prim.GetPath()), model_variant)
    return prim


def nominal_pose(model_variant: str = "menagerie_mjx") -> tuple[float, dict[str, float]]:
    """The MuJoCo task's nominal pose (the keyframe its backends spawn in): pelvis height (m) and
    ``{joint: rad}``."""
    g1 = _task_model(model_variant)
    return float(g1.nominal_qpos[2]), {name: float(q) for name, q in zip(g1.joint_names, g1.nominal_qpos[7:])}
