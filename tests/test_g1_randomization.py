"""Domain randomization of the G1 walk task (``G1WalkConfig.randomization``) on MuJoCo CPU and on
MuJoCo Warp's CPU device: per-episode draws at the reset of the ended envs only, written into each
env's own model rows; pushes of the chosen envs by the drawn kick; noise on the actor's observation
only; the one-step action delay; reproducible draws; one line per bad setting."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from ppo_bootstrap import checkpoint
from ppo_bootstrap.env import CRITIC, POLICY
from ppo_bootstrap.overrides import OverrideError, apply_overrides

from isaac_adapter.tasks.g1_walk import terms
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig, stored_config, walk_config
from isaac_adapter.tasks.g1_walk.env import G1WalkEnv
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg, as_randomization, robust_randomization
from isaac_adapter.tasks.registry import checkpoint_walk_config

N = 4
PHYSICS = dict(friction=(0.3, 1.2), link_mass_scale=(0.8, 1.2), base_com_offset=(-0.05, 0.05),
               armature_scale=(1.0, 1.5), joint_friction_scale=(0.5, 2.0), kp_scale=(0.5, 1.5), kd_scale=(0.5, 1.5))


def _env(backend: str = "mujoco", seed: int = 0, **randomization) -> G1WalkEnv:
    cfg = G1WalkConfig(num_envs=N, seed=seed, physics_threads=1, randomization=RandomizationCfg(**randomization))
    env = G1WalkEnv(cfg, backend=backend)
    env.reset()
    return env


def _expected_fields(env: G1WalkEnv, row: int) -> dict[str, np.ndarray]:
    """Env ``row``'s model fields from its drawn parameters, worked out from the compiled model here."""
    m, p = env.backend.model, {k: v[row].double().numpy() for k, v in env.physics_params.items()}
    foot_pairs = [i for i in range(m.npair) if "foot" in mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_PAIR, i)
                  and "floor" in mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_PAIR, i)
                  and "right_foot_left" not in mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_PAIR, i)
                  and "left_foot_right" not in mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_PAIR, i)]
    friction = m.pair_friction.copy()
    friction[foot_pairs, :2] = p["friction"]
    mass = m.body_mass * np.concatenate([[1.0], p["link_mass_scale"]])
    ipos = m.body_ipos.copy()
    ipos[1] += p["base_com_offset"]  # the pelvis is body 1
    dofs = m.jnt_dofadr[m.actuator_trnid[:, 0]]
    armature, frictionloss = m.dof_armature.copy(), m.dof_frictionloss.copy()
    armature[dofs] *= p["armature_scale"]
    frictionloss[dofs] *= p["joint_friction_scale"]
    gain, bias = m.actuator_gainprm.copy(), m.actuator_biasprm.copy()
    gain[:, 0] *= p["kp_scale"]
    bias[:, 1] *= p["kp_scale"]
    bias[:, 2] *= p["kd_scale"]
    return {"pair_friction": friction, "body_mass": mass, "body_ipos": ipos, "dof_armature": armature,
            "dof_frictionloss": frictionloss, "actuator_gainprm": gain, "actuator_biasprm": bias,
            "body_subtreemass": np.array([mass[[c for c in range(m.nbody) if _in_subtree(m, b, c)]].sum()
                                          for b in range(m.nbody)])}


def _in_subtree(m: mujoco.MjModel, b: int, c: int) -> bool:
    while c != b and c != 0:
        c = int(m.body_parentid[c])
    return c == b


@pytest.mark.parametrize("backend", ["mujoco", "warp"])
def test_reset_draws_new_parameters_for_the_ended_envs_only(backend: str) -> None:
    if backend == "warp":
        pytest.importorskip("mujoco_warp")
    env = _env(backend, **PHYSICS)
    fields = list(_expected_fields(env, 0))
    tol = 1e-12 if backend == "mujoco" else 1e-5  # Warp keeps its model in float32
    for row in range(N):  # every env's model rows hold its own draw
        for name, want in _expected_fields(env, row).items():
            np.testing.assert_allclose(env.backend.physics_params(name)[row], want, rtol=tol, atol=tol, err_msg=name)
    before_params = {k: v.clone() for k, v in env.physics_params.items()}
    before_fields = {name: np.array(env.backend.physics_params(name)) for name in fields}
    before_state = env.backend.state()
    ended = torch.tensor([True, False, True, False])
    env._reset_idx(ended)
    after_state = env.backend.state()
    for name, value in env.physics_params.items():
        assert torch.equal(value[~ended], before_params[name][~ended]), name
        assert not torch.equal(value[ended], before_params[name][ended]), name
    for name in fields:
        now = env.backend.physics_params(name)
        assert np.array_equal(now[[1, 3]], before_fields[name][[1, 3]]), name
        for row in (0, 2):
            np.testing.assert_allclose(now[row], _expected_fields(env, row)[name], rtol=tol, atol=tol, err_msg=name)
    for name, value in after_state.as_dict().items():  # the envs that did not end: bit for bit
        assert torch.equal(value[~ended], getattr(before_state, name)[~ended]), name


@pytest.mark.parametrize("backend", ["mujoco", "warp"])
def test_a_push_changes_only_the_chosen_envs_root_velocity_by_the_kick(backend: str) -> None:
    if backend == "warp":
        pytest.importorskip("mujoco_warp")
    env = _env(backend, push_interval_s=(1.0, 2.0), push_velocity=(-0.5, 0.5))
    env.push_steps_left = torch.tensor([1, 30, 1, 30])  # envs 0 and 2 are due at the next step
    seen = {}
    push = env._push_root_velocity

    def recording(mask, delta):
        seen["before"] = env.backend.state()
        push(mask, delta)
        seen["after"] = env.backend.state()

    env._push_root_velocity = recording
    env.step(torch.zeros(N, env.num_actions))
    kick = env.last_push
    chosen = torch.tensor([True, False, True, False])
    assert torch.equal(kick[~chosen], torch.zeros(2, 3)) and (kick[chosen, :2] != 0).all() and (kick[:, 2] == 0).all()
    assert kick.abs().max() <= 0.5
    before, after = seen["before"], seen["after"]
    torch.testing.assert_close(after.root_lin_vel_w - before.root_lin_vel_w, kick, atol=1e-5, rtol=0)
    for name, value in after.as_dict().items():
        assert torch.equal(value[~chosen], getattr(before, name)[~chosen]), name
        if name not in ("root_lin_vel_w", "foot_lin_vel_w", "root_ang_vel_w"):
            assert torch.equal(value[chosen], getattr(before, name)[chosen]), name  # only velocities move
    assert torch.equal(env.state.root_lin_vel_w, after.root_lin_vel_w)  # the observation sees the kick
    assert (env.push_steps_left[chosen] >= 50).all() and (env.push_steps_left[chosen] <= 100).all()  # 1-2 s again
    assert torch.equal(env.push_steps_left[~chosen], torch.tensor([29, 29]))


def test_noise_reaches_the_actors_observation_and_not_the_critics() -> None:
    width = {"ang_vel": 0.2, "joint_pos": 0.1}
    env = _env(obs_noise=width)
    clean = env.observations_from(env.state, env.command, env.last_action, env.air_time)
    noisy = env._get_observations()
    assert torch.equal(noisy[CRITIC], clean[CRITIC])
    j = env.num_joints
    cols = {}
    start = 0
    for term, k in terms.policy_term_widths(j, clock=False).items():
        cols[term] = slice(start, start + k)
        start += k
    diff = noisy[POLICY] - clean[POLICY]
    # ang_vel's noise is in rad/s, before the observation's 0.25 scale
    assert (diff[:, cols["ang_vel"]].abs() <= 0.2 * env.cfg.obs_ang_vel_scale + 1e-7).all()
    assert (diff[:, cols["ang_vel"]].abs() > 0).all()
    assert (diff[:, cols["joint_pos"]].abs() <= 0.1 + 1e-7).all() and (diff[:, cols["joint_pos"]].abs() > 0).all()
    for term in ("gravity", "command", "joint_vel", "last_action"):
        assert torch.equal(diff[:, cols[term]], torch.zeros_like(diff[:, cols[term]])), term
    result = env.step(torch.zeros(N, env.num_actions))  # the step's observation too
    clean = env.observations_from(env.state, env.command, env.last_action, env.air_time)
    assert torch.equal(result.obs[CRITIC], clean[CRITIC]) and not torch.equal(result.obs[POLICY], clean[POLICY])


def test_a_delayed_action_drives_the_physics_one_step_late() -> None:
    env = _env(action_delay_steps=(1, 1))
    scale, nominal = env.cfg.action_scale, env.nominal_joint_pos
    a1 = torch.full((N, env.num_actions), 0.4)
    a2 = torch.full((N, env.num_actions), -0.3)
    env.step(a1)
    torch.testing.assert_close(env.joint_pos_target, nominal.expand(N, -1))  # a_0 is the reset's zero action
    env.step(a2)
    torch.testing.assert_close(env.joint_pos_target, nominal + scale * a1)
    ctrl = torch.from_numpy(np.array(env.backend._ctrl)).float()
    torch.testing.assert_close(ctrl, (nominal + scale * a1).expand(N, -1))
    # the policy observes its own last action, not the delayed one
    assert torch.equal(env.last_action, a2)
    undelayed = _env(action_delay_steps=(0, 0))
    undelayed.step(a1)
    torch.testing.assert_close(undelayed.joint_pos_target, nominal + scale * a1)


def test_draws_are_reproduced_by_the_seed_and_logged() -> None:
    rand = dict(PHYSICS, action_delay_steps=(0, 1), push_interval_s=(0.5, 1.0), push_velocity=(-0.5, 0.5))
    a, b, c = _env(seed=3, **rand), _env(seed=3, **rand), _env(seed=4, **rand)
    for name in a.physics_params:
        assert torch.equal(a.physics_params[name], b.physics_params[name])
        assert not torch.equal(a.physics_params[name], c.physics_params[name])
    assert torch.equal(a.action_delay, b.action_delay) and torch.equal(a.push_steps_left, b.push_steps_left)
    log = a.step(torch.zeros(N, a.num_actions)).info["log"]
    torch.testing.assert_close(log["Randomization/friction"], a.physics_params["friction"].mean())
    torch.testing.assert_close(log["Randomization/kp_scale"], a.physics_params["kp_scale"].mean())
    torch.testing.assert_close(log["Randomization/action_delay_steps"], a.action_delay.float().mean())
    # a checkpoint's state restores the draws into the model rows of a fresh env
    state = a.state_dict()
    d = _env(seed=9, **rand)
    d.load_state_dict(state)
    for name in ("pair_friction", "body_mass", "actuator_gainprm"):
        assert np.array_equal(d.backend.physics_params(name), a.backend.physics_params(name)), name


def test_off_by_default_draws_nothing_and_logs_nothing() -> None:
    assert not G1WalkConfig().randomization.enabled
    plain = _env()
    log = plain.step(torch.zeros(N, plain.num_actions)).info["log"]
    assert not [k for k in log if k.startswith("Randomization/")]
    assert plain.backend._batch.expanded("pair_friction") is None  # one shared model


def test_the_config_round_trips_through_a_checkpoints_record() -> None:
    cfg = walk_config(preset="robust")
    assert cfg.randomization == robust_randomization() and cfg.randomization.enabled
    recorded = dataclasses.asdict(cfg)
    recorded["randomization"] = {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in recorded["randomization"].items()}  # as YAML gives it back
    assert stored_config(recorded).randomization == cfg.randomization
    assert stored_config({}, preset="clock_fast_v2").randomization == RandomizationCfg()


def test_robust_v1_is_v0_kicked_as_often_as_the_robustness_gate_kicks_with_3_frames() -> None:
    from isaac_adapter.evaluation.gate import ROBUST_GATE_RANDOMIZATION

    v0, v1 = walk_config(preset="robust"), walk_config(preset="robust_v1")
    assert v1.randomization.push_interval_s == ROBUST_GATE_RANDOMIZATION.push_interval_s == (2.0, 4.0)
    assert v0.randomization.push_interval_s == (5.0, 10.0)
    assert (v0.policy_obs_frames, v1.policy_obs_frames) == (1, 3)
    # nothing else differs: every other range, reward and setting is v0's
    assert dataclasses.replace(v1, randomization=v0.randomization, policy_obs_frames=1) == v0
    # an override of the task still wins over the preset's
    assert walk_config(preset="robust_v1", policy_obs_frames=2).policy_obs_frames == 2


@pytest.mark.parametrize("override, field", [
    ("env.randomization.friction=[1.2, 0.4]", "randomization.friction must be finite (low, high) with low <= high"),
    ("env.randomization.friction=[-0.1, 0.4]", "randomization.friction must be >= 0"),
    ("env.randomization.link_mass_scale=[-0.5, 1.0]", "randomization.link_mass_scale must be >= 0"),
    ("env.randomization.kp_scale=[1.1, 0.9]", "randomization.kp_scale must be finite"),
    ("env.randomization.obs_noise={foo: 0.1}", "randomization.obs_noise: no policy observation term 'foo'"),
    ("env.randomization.obs_noise={joint_pos: -1}", "randomization.obs_noise.joint_pos must be a finite number >= 0"),
    ("env.randomization.obs_noise={clock: 0.1}", "randomization.obs_noise.clock: this task has no gait clock"),
    ("env.randomization.action_delay_steps=[0, 2]", "randomization.action_delay_steps must be whole"),
    ("env.randomization.push_velocity=[-0.5, 0.5]", "randomization.push_interval_s and push_velocity go together"),
])
def test_each_bad_setting_is_one_line_naming_its_field(override: str, field: str) -> None:
    with pytest.raises(OverrideError) as err:
        apply_overrides({"env": G1WalkConfig()}, [override])
    message = str(err.value)
    assert "\n" not in message and field in message and override.split("=")[0] in message


def test_paired_fields_are_set_together_on_one_command_line() -> None:
    """A push needs its interval and its speed; a task without pushes takes both in one command line,
    in either order, and one of them alone is still one line naming the pair."""
    pair = ["env.randomization.push_interval_s=[2, 4]", "env.randomization.push_velocity=[-0.5, 0.5]"]
    for overrides in (pair, pair[::-1]):
        cfg = apply_overrides({"env": walk_config(preset="clock_fast_v2")}, overrides)["env"]
        assert cfg.randomization.push_interval_s == (2.0, 4.0) and cfg.randomization.push_velocity == (-0.5, 0.5)
        assert cfg.randomization.pushes and cfg.randomization.friction is None
    with pytest.raises(OverrideError, match=r"^override env\.randomization\.push_interval_s=\[2, 4\]: "
                                            r"randomization\.push_interval_s and push_velocity go together"):
        apply_overrides({"env": walk_config(preset="clock_fast_v2")}, pair[:1])


ROBUST_CHECKPOINT = Path(__file__).resolve().parents[1] / "docs" / "checkpoints" / "g1_robust_s1_it1300.pt"


def test_a_checkpoint_is_evaluated_without_the_randomization_it_trained_under() -> None:
    """Evaluation judges the nominal world (as the walking gate does); the recorded randomization
    comes back only when asked for (play), and an override still sets one part of it."""
    recorded = checkpoint.read(str(ROBUST_CHECKPOINT))["task"]["env"]["randomization"]
    assert recorded["push_interval_s"] and recorded["obs_noise"]  # what it trained under
    assert checkpoint_walk_config(str(ROBUST_CHECKPOINT)).randomization == RandomizationCfg()
    kept = checkpoint_walk_config(str(ROBUST_CHECKPOINT), randomized=True).randomization
    assert kept == as_randomization(recorded) and kept.pushes and kept.obs_noise["joint_vel"] == 1.5
    one = checkpoint_walk_config(str(ROBUST_CHECKPOINT), randomization=RandomizationCfg(friction=(0.4, 0.4)))
    assert one.randomization == RandomizationCfg(friction=(0.4, 0.4))


def test_a_bad_setting_in_code_is_caught_at_construction() -> None:
    with pytest.raises(ValueError, match=r"randomization\.friction must be >= 0"):
        G1WalkConfig(randomization={"friction": (-1.0, 1.0)})
    with pytest.raises(ValueError, match=r"randomization: no field 'frction'"):
        G1WalkConfig(randomization={"frction": (0.5, 1.0)})


def test_model_params_on_a_device_copy_nothing_from_the_host_per_draw() -> None:
    """``ModelParams.to(device)`` (what the Warp backend does at build): ``values`` then copies no
    host tensor to that device. A CUDA graph cannot record such a copy (the randomized reset inside
    ``--cuda-graph-step`` failed on one), and outside a graph each is a host synchronisation. The
    meta device stands in for CUDA."""
    from host_copies import HostCopies

    from isaac_adapter.backends.layout import ModelParams

    env = _env(**PHYSICS)
    host = ModelParams(env.backend.model, env.backend._params.layout)
    params = {k: v.double() for k, v in env.physics_params.items()}
    expected = host.values(params)
    on_meta = ModelParams(env.backend.model, host.layout).to("meta")
    meta_params = {k: v.to("meta") for k, v in params.items()}
    with HostCopies() as mode:
        out = on_meta.values(meta_params)
    assert mode.seen == [] and set(out) == set(expected)
    assert all(v.device.type == "meta" and v.shape == expected[k].shape for k, v in out.items())
