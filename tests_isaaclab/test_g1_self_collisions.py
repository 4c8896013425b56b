"""The converted G1 collides with itself as the MuJoCo model's ``<pair>``s say (``G1WalkDirectEnv``).

Run through ``scripts/isaaclab_tier.sh``. The reference is the task's MuJoCo model: its 26 robot-robot
pairs and its floor pairs by geom name (``assets.contact_pairs``), and MuJoCo's own collision
detection for the contacts of one state.
"""

from __future__ import annotations

import re

import numpy as np
import pytest


def _geom(label: str) -> str:
    """A Newton shape label or MuJoCo-Warp geom name -> the MJCF geom name."""
    return re.sub(r"_\d+$", "", label.rsplit("/", 1)[-1])


@pytest.fixture(scope="module")
def side():
    from isaac_adapter.app.bench.sim_parity import IsaacSide

    return IsaacSide(2)


@pytest.fixture(scope="module")
def pairs():
    from isaac_adapter.tasks.g1_walk.assets import build_g1_model, contact_pairs

    return contact_pairs(build_g1_model("menagerie_mjx", 0.005).model)


def test_each_world_collides_exactly_the_mjcf_pairs(side, pairs):
    from isaaclab_newton.physics import NewtonManager

    m = NewtonManager.get_model()
    labels, world = m.shape_label, m.shape_world.numpy()
    for w in range(2):
        robot, ground = set(), set()
        for a, b in m.shape_contact_pairs.numpy():
            if world[a] == -1 and world[b] == w:
                ground.add(_geom(labels[b]))
            elif world[a] == w and world[b] == w:
                robot.add(frozenset((_geom(labels[a]), _geom(labels[b]))))
        assert robot == pairs.self_pairs
        assert ground == pairs.floor  # the foot boxes and linkage braces never touch the ground


def test_a_self_only_collider_gives_the_pairs_contact_dimension(side, pairs):
    mjm = side.solver.mj_model
    floor_priority = {int(mjm.geom_priority[g]) for g in range(mjm.ngeom) if _geom(mjm.geom(g).name) in pairs.floor}
    for g in range(mjm.ngeom):
        if _geom(mjm.geom(g).name) in pairs.self_only:
            assert int(mjm.geom_condim[g]) == pairs.self_condim == 1
            assert int(mjm.geom_priority[g]) > max(floor_priority)


def test_legs_rolled_into_each_other_touch_where_mujoco_says(side):
    """Both hips rolled inwards, 1 m up, held there for one policy step: the shins and foot boxes
    meet in both simulators, and the robot-robot contacts are MuJoCo's."""
    import mujoco

    from isaac_adapter.tasks.g1_walk.assets import build_g1_model

    g1 = build_g1_model("menagerie_mjx", 0.005)
    m = g1.model
    qpos = g1.nominal_qpos.copy()
    qpos[2] += 1.0
    for joint, roll in (("left_hip_roll_joint", -0.5), ("right_hip_roll_joint", 0.5)):
        qpos[7 + g1.joint_names.index(joint)] = roll
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    d.ctrl[:] = qpos[7:]
    for _ in range(4):
        mujoco.mj_step(m, d)
    mujoco.mj_forward(m, d)
    want = {frozenset((m.geom(c.geom1).name, m.geom(c.geom2).name)) for c in d.contact[: d.ncon] if c.dist < 0}
    assert frozenset(("left_shin_collision", "right_shin_collision")) in want

    rows = np.repeat(qpos[None], 2, 0)
    side.run(rows, np.zeros((2, m.nv)), np.repeat(qpos[None, None, 7:], 2, 0), 1)
    data, mjm = side.solver.mjw_data, side.solver.mj_model
    n = int(data.nacon.numpy()[0])
    geom, dist, world = data.contact.geom.numpy()[:n], data.contact.dist.numpy()[:n], data.contact.worldid.numpy()[:n]
    for w in range(2):
        got = {frozenset((_geom(mjm.geom(int(a)).name), _geom(mjm.geom(int(b)).name)))
               for (a, b), dd, ww in zip(geom, dist, world) if ww == w and dd < 0}
        assert got == want


def test_a_usd_without_the_collision_geoms_is_refused_in_one_line_before_anything_is_built(tmp_path, monkeypatch):
    import os
    import shutil

    from pxr import Usd

    from isaac_adapter.app.envs import check_sim
    from isaac_adapter.isaaclab.robot import ASSET_ROOT_ENV, G1_USD
    from isaac_adapter.tasks.registry import UsageError

    root = tmp_path / "assets"
    shutil.copytree(os.environ[ASSET_ROOT_ENV], root)
    stage = Usd.Stage.Open(str(root / G1_USD))
    for prim in list(stage.Traverse()):
        if prim.GetName() == "right_linkage_brace_collision":
            stage.RemovePrim(prim.GetPath())
    stage.GetRootLayer().Save()
    check_sim("isaaclab")  # the asset root as built passes
    monkeypatch.setenv(ASSET_ROOT_ENV, str(root))
    with pytest.raises(UsageError) as err:
        check_sim("isaaclab")
    message = str(err.value)
    assert "\n" not in message and "['right_linkage_brace_collision']" in message
    assert "python -m isaac_adapter.isaaclab.assets DIR" in message
