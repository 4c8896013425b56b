"""CPU MuJoCo and Isaac Lab (Newton / MuJoCo-Warp) move the G1 alike from the same state.

Run through ``scripts/isaaclab_tier.sh`` (it builds the G1 USD and sets ``ISAACSIM_ASSET_ROOT``). The
cases are the clean ones of ``benchmarks/sim_parity.py`` that need no policy rollout: the nominal pose
released at rest 1 m up (no contact: joints, drives, integrator), held on the floor for 0.5 s
(contact stiffness at rest) and dropped from 5 cm (contact stiffness and damping in an impact). Both
simulators get the same start state and the same joint targets.

Tolerances, from ``python benchmarks/sim_parity.py compare`` on the converted model (after / before the
converter disabled self-collisions and gave the floor-paired geoms priority over the floor):

* at rest in the air, one policy step: pelvis angular velocity 0.000 / 0.544 rad/s, joint velocity
  rms 0.000 / 0.230 rad/s (the pelvis sphere overlapped the hip capsules, the elbows the wrists);
* standing, 0.2-0.5 s: pelvis height 0.7210 / 0.7172 m (MuJoCo 0.7210), deepest foot penetration
  0.3154 / 0.4933 mm (MuJoCo 0.3153: solref 0.008 mixed with the floor's 0.02 was 0.014);
* 5 cm drop: peak foot normal force 3412 / 2369 N (MuJoCo 3412), pelvis height after 1 s
  0.2 / 21 mm apart.
"""

from __future__ import annotations

import numpy as np
import pytest



@pytest.fixture(scope="module")
def parity():
    from isaac_adapter.app.bench import sim_parity

    return sim_parity.run_compare(None)


def _rows(parity, case):
    return {row["case"]: row for row in parity["table"]}[case]


def test_at_rest_in_the_air_nothing_moves_the_joints(parity):
    for case in ("rest_fall 1 step", f"rest_fall {10} steps"):
        row = _rows(parity, case)
        assert row["ang_vel"] < 0.01, row
        assert row["jvel_rms"] < 0.01, row
        assert row["root_z_mm"] < 0.05, row
    mj, il = parity["records"]["mujoco"]["rest_fall"], parity["records"]["isaaclab"]["rest_fall"]
    assert not mj["contacts"].any() and not il["contacts"].any()


def test_standing_contact_stiffness_matches(parity):
    stand = parity["stand"]
    (z_mj, z_il), (pen_mj, pen_il) = stand["root_z_m"], stand["foot_min_dist_mm"]
    assert abs(z_mj - z_il) < 5e-5, stand  # 0.05 mm; the soft floor (solref 0.014) sat 0.5-3.8 mm lower
    assert pen_mj < -0.1 and abs(pen_mj - pen_il) < 0.05, stand  # mm; before: 0.18 mm deeper
    fz_mj, fz_il = np.array(stand["Fz_left_right_N"][0]), np.array(stand["Fz_left_right_N"][1])
    np.testing.assert_allclose(fz_il, fz_mj, rtol=0.01)
    np.testing.assert_allclose(fz_mj.sum(), stand["weight_N"], rtol=0.05)  # 3 % above: still settling
    last = _rows(parity, "stand 25 steps")
    assert last["n_mj"] == last["n_il"] and last["jvel_rms"] < 0.01, last


def test_drop_impact_matches(parity):
    drop = parity["drop"]
    peak_mj, peak_il = drop["peak_Fz_N"]
    assert peak_mj > 1000 and abs(peak_il - peak_mj) < 0.02 * peak_mj, drop  # before: 31 % lower
    assert drop["first_contact_step"][0] == drop["first_contact_step"][1], drop
    final_mj, final_il = drop["final_root_z_m"]
    assert abs(final_mj - final_il) < 1e-3, drop  # before: 21 mm apart
