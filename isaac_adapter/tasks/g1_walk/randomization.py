"""Domain randomization of the G1 walk task: one definition for every physics.

:class:`RandomizationCfg` (the task config's ``randomization`` group) says what is drawn and from
which range; :func:`draw_physics` draws the physical parameters for every env, and each simulator
writes them into its own model through the task's seam (``_write_physics_params``): MuJoCo on CPU
into per-simulation model fields of its batch, MuJoCo Warp into per-world model arrays, Isaac Lab
through its articulation's setters. Pushes go through ``_push_root_velocity``; observation noise
and the action delay are the task's own (:class:`~.task.G1WalkTask`).

Physical parameters are drawn per episode, at the reset of the ended envs only (every env is drawn,
the ended rows kept, so the random stream does not depend on which envs ended); observation noise
every policy step. Everything is off by default: no field set, no random number drawn, so a task
without randomization runs the random stream and the physics it ran before this module existed.

Where the names and ranges come from (the anchors' own configs, read for their values):

* Isaac Lab's locomotion velocity task (``velocity_env_cfg.py``): ``push_robot`` sets the base's
  planar velocity by U(-0.1, 0.1) m/s per axis every 10-15 s; ``base_com`` shifts the base's centre
  of mass by up to 5 cm in x, y and 1 cm in z; the policy group's uniform noise is base angular
  velocity +-0.2, projected gravity +-0.05, joint positions +-0.01, joint velocities +-1.5 (before
  the term's scale), the critic none.
* mjlab's velocity task (``velocity_env_cfg.py``): ``foot_friction`` sets the foot geoms' friction
  to U(0.3, 1.2) (absolute), ``push_robot`` kicks the base by up to 0.5 m/s in x, y every 1-3 s; the
  same policy noise as Isaac Lab's, with the privileged (critic) group uncorrupted.
* MuJoCo Playground's G1 joystick task (``g1/randomize.py``): foot-floor pair friction U(0.4, 1.0),
  joint friction loss x U(0.5, 2.0), armature x U(1.0, 1.05), every link's mass x U(0.9, 1.1).

Of a drawn mass only the mass, its inertia (scaled with it: the link's density changes, not its
shape) and the subtree masses the centre-of-mass computation reads follow it; MuJoCo's other
constants derived at compile time (``body_invweight0``, ``dof_invweight0``, which set how soft a
constraint is) stay the nominal model's, as Playground's batched models keep them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import torch

#: The terms of the policy observation, in its column order (``terms.policy_obs``, then the clock);
#: the keys :attr:`RandomizationCfg.obs_noise` accepts.
POLICY_TERMS = ("ang_vel", "gravity", "command", "joint_pos", "joint_vel", "last_action", "clock")

#: The physical parameters, in drawing order, and the shape of one env's draw: ``()`` one value,
#: ``"links"`` one per link (every body but the world), ``"joints"`` one per actuated joint, 3 one per axis.
PHYSICS_PARAMS = {
    "friction": (),
    "link_mass_scale": "links",
    "base_com_offset": 3,
    "armature_scale": "joints",
    "joint_friction_scale": "joints",
    "kp_scale": "joints",
    "kd_scale": "joints",
}

# ranges whose low end must be >= 0 (a friction coefficient, or a scale of a positive quantity)
_NON_NEGATIVE = ("friction", "link_mass_scale", "armature_scale", "joint_friction_scale", "kp_scale", "kd_scale")


def _as_range(name: str, value: object) -> tuple[float, float] | None:
    """``value`` as a ``(low, high)`` tuple of floats, or ``None``; raises naming ``name`` otherwise."""
    if value is None:
        return None
    if not (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise ValueError(f"randomization.{name} must be None or (low, high), got {value!r}")
    lo, hi = float(value[0]), float(value[1])
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ValueError(f"randomization.{name} must be finite (low, high) with low <= high, got {(lo, hi)}")
    return lo, hi


@dataclass
class RandomizationCfg:
    """What the G1 walk task randomizes and from which uniform ranges; every field off by default.

    A range is ``(low, high)``, drawn uniformly; ``None`` leaves that quantity as the model has it.

    Attributes:
        friction: the foot-ground sliding friction coefficient, absolute, one draw per env for both
            feet (mjlab 0.3-1.2 on the foot geoms; Playground 0.4-1.0 on the foot-floor pairs).
        link_mass_scale: every link's mass (and inertia) times a factor, each link its own draw
            (Playground 0.9-1.1).
        base_com_offset: m added to the base's centre of mass, each axis its own draw (Isaac Lab
            +-0.05 in x, y, +-0.01 in z; one range for the three axes here).
        armature_scale: every actuated joint's armature times a factor (Playground 1.0-1.05).
        joint_friction_scale: every actuated joint's friction loss times a factor (Playground 0.5-2.0).
        kp_scale, kd_scale: every position servo's stiffness and damping times a factor, each joint
            its own draw (Isaac Lab's ``randomize_actuator_gains`` scales both the same way).
        push_interval_s: s between two pushes of an env, drawn again after every push (Isaac Lab
            10-15 s, mjlab 1-3 s); needs ``push_velocity``.
        push_velocity: m/s added to the base's world-frame x and y velocity at a push, each axis its
            own draw (Isaac Lab +-0.1, mjlab +-0.5); needs ``push_interval_s``.
        obs_noise: half-width of uniform noise added to a policy observation term, by the term's
            name (:data:`POLICY_TERMS`), in the term's own units before its observation scale (Isaac
            Lab and mjlab: ``ang_vel`` 0.2, ``gravity`` 0.05, ``joint_pos`` 0.01, ``joint_vel`` 1.5).
            The critic's observation stays clean (asymmetric actor-critic), as in both.
        action_delay_steps: ``(low, high)`` policy steps by which the physics lags the policy's
            action, a whole number per episode in ``[low, high]``; 0 or 1 (a delay of 1: the joints
            are driven by the previous step's action).
    """

    friction: tuple[float, float] | None = None
    link_mass_scale: tuple[float, float] | None = None
    base_com_offset: tuple[float, float] | None = None
    armature_scale: tuple[float, float] | None = None
    joint_friction_scale: tuple[float, float] | None = None
    kp_scale: tuple[float, float] | None = None
    kd_scale: tuple[float, float] | None = None
    push_interval_s: tuple[float, float] | None = None
    push_velocity: tuple[float, float] | None = None
    obs_noise: dict[str, float] = field(default_factory=dict)
    action_delay_steps: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field; normalises ranges to tuples of floats."""
        for name in (*PHYSICS_PARAMS, "push_interval_s", "push_velocity"):
            setattr(self, name, _as_range(name, getattr(self, name)))
        for name in _NON_NEGATIVE:
            value = getattr(self, name)
            if value is not None and value[0] < 0:
                raise ValueError(f"randomization.{name} must be >= 0, got {value}")
        if (self.push_interval_s is None) != (self.push_velocity is None):
            raise ValueError("randomization.push_interval_s and push_velocity go together: set both or neither, "
                             f"got {self.push_interval_s} and {self.push_velocity}")
        if self.push_interval_s is not None and not self.push_interval_s[0] > 0:
            raise ValueError(f"randomization.push_interval_s must be > 0 s, got {self.push_interval_s}")
        if not isinstance(self.obs_noise, dict):
            raise ValueError(f"randomization.obs_noise must be a mapping term: half-width, got {self.obs_noise!r}")
        for term, width in self.obs_noise.items():
            if term not in POLICY_TERMS:
                raise ValueError(f"randomization.obs_noise: no policy observation term {term!r}; "
                                 f"terms: {', '.join(POLICY_TERMS)}")
            if isinstance(width, bool) or not isinstance(width, (int, float)) or not (width >= 0 and math.isfinite(width)):
                raise ValueError(f"randomization.obs_noise.{term} must be a finite number >= 0, got {width!r}")
        delay = self.action_delay_steps
        if not (isinstance(delay, (tuple, list)) and len(delay) == 2
                and all(isinstance(d, int) and not isinstance(d, bool) for d in delay) and 0 <= delay[0] <= delay[1] <= 1):
            raise ValueError(f"randomization.action_delay_steps must be whole (low, high) with 0 <= low <= high <= 1, "
                             f"got {delay!r}")
        self.action_delay_steps = (int(delay[0]), int(delay[1]))
        self.obs_noise = {k: float(v) for k, v in self.obs_noise.items()}

    @property
    def physics(self) -> tuple[str, ...]:
        """The physical parameters drawn (of :data:`PHYSICS_PARAMS`, in its order)."""
        return tuple(name for name in PHYSICS_PARAMS if getattr(self, name) is not None)

    @property
    def pushes(self) -> bool:
        return self.push_interval_s is not None

    @property
    def noisy(self) -> bool:
        return any(width > 0 for width in self.obs_noise.values())

    @property
    def delayed(self) -> bool:
        return self.action_delay_steps[1] > 0

    @property
    def enabled(self) -> bool:
        return bool(self.physics) or self.pushes or self.noisy or self.delayed


def as_randomization(value: object) -> RandomizationCfg:
    """``value`` as a :class:`RandomizationCfg`: one already, or a mapping of its fields (a stored
    config read back from YAML or JSON); fields this version does not know are an error."""
    if isinstance(value, RandomizationCfg):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"randomization must be a RandomizationCfg or a mapping of its fields, got {value!r}")
    known = {f.name for f in fields(RandomizationCfg)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"randomization: no field {unknown[0]!r}; fields: {', '.join(sorted(known))}")
    return RandomizationCfg(**value)


def draw_physics(
    cfg: RandomizationCfg, n: int, num_links: int, num_joints: int, generator: torch.Generator, device: torch.device
) -> dict[str, torch.Tensor]:
    """One draw of every enabled physical parameter for ``n`` envs: ``{name: [n, ...]}`` float32
    (``[n]`` friction, ``[n, L]`` link mass scales, ``[n, 3]`` base CoM offset, ``[n, J]`` per-joint scales)."""
    out = {}
    for name in cfg.physics:
        lo, hi = getattr(cfg, name)
        shape = PHYSICS_PARAMS[name]
        size = {(): (n,), "links": (n, num_links), "joints": (n, num_joints), 3: (n, 3)}[shape]
        out[name] = lo + (hi - lo) * torch.rand(size, device=device, generator=generator)
    return out


def policy_noise_width(cfg: RandomizationCfg, widths: dict[str, int], scales: dict[str, float]) -> list[float]:
    """The half-width of the noise on every column of the policy observation ``[D]``: ``widths`` is
    each term's column count in order, ``scales`` the observation scale a term is multiplied by
    (noise is in the term's units, added before the scale)."""
    return [cfg.obs_noise.get(term, 0.0) * scales.get(term, 1.0) for term, k in widths.items() for _ in range(k)]


def robust_randomization() -> RandomizationCfg:
    """The ranges a G1 owner would train a policy for the real robot with (``G1-Walk-Robust-v0``):
    foot friction 0.3-1.2 (mjlab's), link masses +-10 % and joint friction x 0.5-2.0 (Playground's),
    base CoM +-3 cm, armature x 1.0-1.05, PD gains +-10 %, a 0.5 m/s kick per axis every 5-10 s, the
    policy noise of Isaac Lab and mjlab, and a delay of 0 or 1 policy step."""
    return RandomizationCfg(
        friction=(0.3, 1.2),
        link_mass_scale=(0.9, 1.1),
        base_com_offset=(-0.03, 0.03),
        armature_scale=(1.0, 1.05),
        joint_friction_scale=(0.5, 2.0),
        kp_scale=(0.9, 1.1),
        kd_scale=(0.9, 1.1),
        push_interval_s=(5.0, 10.0),
        push_velocity=(-0.5, 0.5),
        obs_noise={"ang_vel": 0.2, "gravity": 0.05, "joint_pos": 0.01, "joint_vel": 1.5},
        action_delay_steps=(0, 1),
    )
