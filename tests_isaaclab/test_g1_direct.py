"""The G1 walking task as a real Isaac Lab ``DirectRLEnv`` (``G1WalkDirectEnv``), kit-less on CPU.

Run through ``scripts/isaaclab_tier.sh`` (it builds the G1 USD and sets ``ISAACSIM_ASSET_ROOT``).

The end-of-episode arithmetic is the same code as the MuJoCo env's; what these tests prove is that it
survives Isaac Lab's own step loop (its ``episode_length_buf``, its decimation, its reset of the ended
ids after computing their final observation). The fall signals are scripted on top of the real robot
state: from a chosen episode step on, an env reads tilted, sliding sideways or low; every other
env reads upright and still, so each end step is known in advance:

* tilt: grace 0.4 s, so at 50 Hz a tilt from step 19, 20 or 21 ends the episode at 20, 20, 21;
* lateral velocity: grace 0.7 s, from step 34, 35, 36 -> 35, 35, 36;
* height: checked from step 1;
* the same in seconds at decimation 2 (100 Hz) and 5 (40 Hz);
* the time limit as ``truncated`` at exactly ``episode_length_s / policy_dt`` steps, a fall on that
  very step reported as both (cause: the fall).
"""

from __future__ import annotations

import math

import pytest
import torch

from ppo_bootstrap.episode import final_rows, validate_step

from isaac_adapter.tasks.g1_walk import G1WalkConfig, causes
from isaac_adapter.tasks.g1_walk.config import steps_from_seconds

TILTED = [math.cos(math.radians(35)), math.sin(math.radians(35)), 0.0, 0.0]  # 70 deg roll: tilt_xy 0.883


def build(num_envs: int, decimation: int = 4, episode_length_s: float = 20.0, reset_by_mask: bool = True,
          joint_pos_noise: float = 0.0, policy_obs_frames: int = 1):
    from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env

    task = G1WalkConfig(num_envs=num_envs, device="cpu", decimation=decimation, episode_length_s=episode_length_s,
                        joint_pos_noise=joint_pos_noise, policy_obs_frames=policy_obs_frames)
    return make_g1_direct_env(task, reset_by_mask=reset_by_mask)


def script(env, plan: dict[int, tuple[str, int]]) -> None:
    """``plan[env_id] = (signal, from_step)``: that env reads the signal from that episode step on;
    every env otherwise reads upright, 0.75 m high and still."""
    base = env.unwrapped
    real = type(base)._read_robot_state

    def scripted(self):
        s = real(self)
        n = s.root_pos_w.shape[0]
        s.root_pos_w[:, 2] = 0.75
        s.root_quat_w[:] = torch.tensor([1.0, 0.0, 0.0, 0.0])
        s.root_lin_vel_w.zero_()
        step = self.episode_length_buf
        for env_id, (signal, from_step) in plan.items():
            if env_id >= n or int(step[env_id]) < from_step:
                continue
            if signal == "tilt":
                s.root_quat_w[env_id] = torch.tensor(TILTED)
            elif signal == "lateral":
                s.root_lin_vel_w[env_id] = torch.tensor([0.0, 1.5, 0.0])
            elif signal == "height":
                s.root_pos_w[env_id, 2] = 0.1
        return s

    base._read_robot_state = scripted.__get__(base)


def end_steps(env, max_steps: int) -> dict[int, tuple[int, bool, bool, int]]:
    """First end of every env: ``{env: (episode step, terminated, truncated, cause)}``."""
    env.reset()
    found: dict[int, tuple[int, bool, bool, int]] = {}
    for t in range(1, max_steps + 1):
        res = env.step(torch.zeros(env.num_envs, env.num_actions))
        validate_step(env.num_envs, res)
        cause = res.info["extras"]["termination_cause"]
        for i in final_rows(res)[0].tolist():
            found.setdefault(i, (t, bool(res.terminated[i]), bool(res.truncated[i]), int(cause[i])))
        if len(found) == env.num_envs:
            break
    return found


@pytest.mark.parametrize("decimation", [2, 4, 5])
def test_grace_windows_end_at_the_boundary_steps(decimation):
    dt = 0.005 * decimation
    tilt, lateral = steps_from_seconds(0.4, dt), steps_from_seconds(0.7, dt)
    assert (decimation, tilt, lateral) in {(2, 40, 70), (4, 20, 35), (5, 16, 28)}
    plan = {
        0: ("tilt", tilt - 1), 1: ("tilt", tilt), 2: ("tilt", tilt + 1),
        3: ("lateral", lateral - 1), 4: ("lateral", lateral), 5: ("lateral", lateral + 1),
        6: ("height", 1),
    }
    env = build(len(plan), decimation)
    try:
        script(env, plan)
        found = end_steps(env, lateral + 5)
    finally:
        env.close()
    expected = {
        0: tilt, 1: tilt, 2: tilt + 1, 3: lateral, 4: lateral, 5: lateral + 1, 6: 1,
    }
    assert {i: v[0] for i, v in found.items()} == expected
    assert all(v[1] and not v[2] for v in found.values())  # falls, no timeouts
    cause = {i: v[3] for i, v in found.items()}
    assert [cause[i] for i in range(7)] == [causes.CAUSE_TILT] * 3 + [causes.CAUSE_LATERAL] * 3 + [causes.CAUSE_HEIGHT]


@pytest.mark.parametrize("reset_by_mask", [True, False])
def test_time_limit_is_truncation_and_a_fall_on_that_step_is_both(reset_by_mask):
    env = build(3, 4, episode_length_s=1.0, reset_by_mask=reset_by_mask)  # 50 policy steps
    try:
        script(env, {1: ("height", 50), 2: ("height", 10)})
        found = end_steps(env, 55)
    finally:
        env.close()
    assert found[0] == (50, False, True, causes.CAUSE_TIMEOUT)
    assert found[1] == (50, True, True, causes.CAUSE_HEIGHT)
    assert found[2] == (10, True, False, causes.CAUSE_HEIGHT)


@pytest.mark.parametrize("reset_by_mask", [True, False])
def test_final_obs_is_pre_reset_and_only_ended_envs_reset(reset_by_mask):
    env = build(4, 4, episode_length_s=20.0, reset_by_mask=reset_by_mask)
    try:
        script(env, {1: ("height", 5)})
        env.reset()
        base = env.unwrapped
        for _ in range(4):
            env.step(torch.zeros(4, env.num_actions))
        joints_before = base.state.joint_pos.clone()
        res = env.step(torch.zeros(4, env.num_actions))
        validate_step(4, res)
        # by mask: the dense form, no ids from the adapter; by ids: the sparse form
        assert (res.final_env_ids is None) == reset_by_mask
        ids, final = final_rows(res)
        assert ids.tolist() == [1]
        # final obs: the terminal snapshot's observation, not the respawned one
        torch.testing.assert_close(final["policy"], base.terminal_observations(ids)["policy"])
        assert int(base.episode_length_buf[1]) == 0 and (base.episode_length_buf[[0, 2, 3]] == 5).all()
        # the other envs' joints moved continuously (no respawn); env 1 is back at the nominal pose
        assert (base.state.joint_pos[[0, 2, 3]] - joints_before[[0, 2, 3]]).abs().max() < 0.2
        torch.testing.assert_close(base.state.joint_pos[1], base.nominal_joint_pos, atol=1e-4, rtol=0)
    finally:
        env.close()


@pytest.mark.parametrize("reset_by_mask", [True, False])
def test_the_policys_history_goes_through_isaac_labs_step_and_restarts_for_the_ended_env(reset_by_mask):
    from isaac_adapter.tasks.g1_walk import terms

    frames = 3
    env = build(4, 4, episode_length_s=20.0, reset_by_mask=reset_by_mask, policy_obs_frames=frames)
    try:
        script(env, {1: ("height", 5)})
        base = env.unwrapped
        width = terms.policy_frame_width(env.num_actions, clock=False)
        obs = env.reset()
        assert obs["policy"].shape == (4, frames * width) and base.cfg.observation_space == frames * width
        seen = [obs["policy"][:, :width]]
        for t in range(5):
            actions = 0.1 * torch.sin(torch.arange(4 * env.num_actions, dtype=torch.float32).view(4, -1) + t)
            res = env.step(actions)
            seen.append(res.obs["policy"][:, :width])
        ids, final = final_rows(res)
        assert ids.tolist() == [1]
        now = res.obs["policy"].split(width, dim=-1)
        for k in range(1, frames):
            # envs 0, 2, 3: the frames they acted on, newest first; env 1 respawned: its first frame throughout
            torch.testing.assert_close(now[k][[0, 2, 3]], seen[-1 - k][[0, 2, 3]], rtol=0, atol=0)
            torch.testing.assert_close(now[k][1], now[0][1], rtol=0, atol=0)
            # its final observation: the ended episode's history
            torch.testing.assert_close(final["policy"][0, k * width:(k + 1) * width], seen[-1 - k][1], rtol=0, atol=0)
        torch.testing.assert_close(final["policy"], base.terminal_observations(ids)["policy"])
    finally:
        env.close()


def test_observation_layout_is_the_mujoco_tasks_and_runner_trains():
    """Isaac Lab pins MuJoCo 3 (through Newton), the MuJoCo backends need MuJoCo 4, so the two cannot
    share a process: the layout is checked against the task's formula, and policies cross simulators
    as checkpoints."""
    from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig

    env = build(4, 4)
    try:
        obs = env.reset()
        j, f = 29, 2
        assert obs["policy"].shape == (4, 9 + 3 * j)  # ang vel, gravity, command, joint pos, vel, last action
        assert obs["critic"].shape == (4, 9 + 3 * j + 3 + 1 + 2 * f + j)  # + lin vel, height, contact, air time, torque
        # spawned upright at the nominal pose with no joint noise: gravity (0, 0, -1), joint offsets 0
        torch.testing.assert_close(obs["policy"][:, 3:6], torch.tensor([0.0, 0.0, -1.0]).expand(4, 3), atol=1e-4, rtol=0)
        assert obs["policy"][:, 9 : 9 + j].abs().max() < 1e-4
        cfg = RunnerConfig(num_steps_per_env=8, console=False, save_interval=0,
                           ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=1),
                           policy=PolicyConfig(actor_hidden=(32,), critic_hidden=(32,)))
        runner = Runner(env, cfg)
        runner.learn(2)
        assert runner.iteration == 2 and all(torch.isfinite(p).all() for p in runner.policy.parameters())
    finally:
        env.close()


def test_a_run_on_a_new_env_continues_isaac_labs_step_counter(tmp_path):
    """Isaac Lab's env saves no state of its own, so a resume builds a new env whose
    ``common_step_counter`` (the clock of its curricula) is 0; the Runner sets it to the steps the
    checkpoint's training took: the normalizer warm-up and one iteration, 8 + 8."""
    from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig

    cfg = RunnerConfig(num_steps_per_env=8, console=False, save_interval=0,
                       ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=1),
                       policy=PolicyConfig(actor_hidden=(32,), critic_hidden=(32,)))
    path = tmp_path / "model_1.pt"
    env = build(4, 4)
    try:
        runner = Runner(env, cfg)
        runner.learn(1)
        assert runner.env_steps == env.unwrapped.common_step_counter == 16
        runner.save(path)
    finally:
        env.close()
    env = build(4, 4)
    try:
        assert env.unwrapped.common_step_counter == 0
        runner = Runner(env, cfg)
        runner.load(path)
        assert env.unwrapped.common_step_counter == runner.env_steps == 16
        runner.learn(1)
        assert env.unwrapped.common_step_counter == 24
    finally:
        env.close()


def test_the_reset_by_mask_steps_as_the_reset_by_ids():
    """The two reset paths are one task: with the same actions and a held command, every step's
    observations, rewards, flags and final observations agree (a fall at step 5, a time limit at 50).
    The spawn noise is off and the command held because the two paths draw from the task's generator
    on different steps (by mask a step draws whether or not an env ended, by ids only when one did)."""
    runs = []
    for reset_by_mask in (True, False):
        env = build(3, 4, episode_length_s=1.0, reset_by_mask=reset_by_mask)
        try:
            script(env, {1: ("height", 5)})
            gen = torch.Generator().manual_seed(0)
            env.reset()
            steps = [env.unwrapped.set_commands(torch.tensor([[0.5, 0.0, 0.2]]).expand(3, 3))]
            for _ in range(52):
                res = env.step(0.3 * torch.randn(3, env.num_actions, generator=gen))
                validate_step(3, res)
                ids, final = final_rows(res)
                steps.append((res.obs, res.reward, res.terminated, res.truncated, ids, final))
            runs.append(steps)
        finally:
            env.close()
    ends = [step[4].tolist() for step in runs[0][1:]]
    assert ends[4] == [1] and ends[9] == [1] and ends[49] == [0, 1, 2]
    torch.testing.assert_close(runs[0], runs[1], atol=1e-5, rtol=1e-5)


def test_the_solver_runs_with_the_mujoco_models_options():
    """The solver Newton builds gets the G1 model's integrator, cone and solver (implicitfast,
    pyramidal, Newton, or the task's ``solver``) and its tolerance; the iteration budget stays Isaac
    Lab's converged 100 and 50 (the model's 5 and 8 made a step three times slower on Newton) unless
    the task sets one, which then reaches it with the model's line search, without MuJoCo Warp's line
    per world at the limit."""
    from isaaclab_newton.physics import NewtonManager

    from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env

    # mjtSolver: 1 CG, 2 Newton
    for solver, iterations, expected, solver_id in ((None, None, (100, 50), 2), (None, 3, (3, 8), 2),
                                                    ("cg", 20, (20, 8), 1)):
        task = G1WalkConfig(num_envs=2, device="cpu", joint_pos_noise=0.0, solver=solver, solver_iterations=iterations)
        env = make_g1_direct_env(task)
        try:
            env.reset()
            opt = NewtonManager._solver.mjw_model.opt
            assert (int(opt.iterations), int(opt.ls_iterations)) == expected
            # the model's 1e-8, raised by MuJoCo Warp to its float32 floor (as on the project's Warp backend)
            assert float(opt.tolerance.numpy()[0]) == pytest.approx(1e-6)
            assert (int(opt.integrator), int(opt.cone), int(opt.solver)) == (3, 0, solver_id)  # implicitfast, pyramidal
            # a budget the task sets is meant to be reached: no line printed from every world that does
            assert bool(opt.warn_overflow) is (iterations is None)
        finally:
            env.close()


def test_a_non_finite_state_ends_that_env_alone_as_a_blow_up_and_it_restarts_finite():
    """A physics state that turned NaN in one env (here written into its joint velocities) is found
    at the step: that env alone ends, truncated with the cause of its own (never a fall, never a
    time limit), its post-reset observation is finite, and it steps on finite, as do the others."""
    from isaac_adapter.isaaclab.robot import as_torch

    env = build(3, 4)
    try:
        env.reset()
        base = env.unwrapped
        zeros = torch.zeros(3, env.num_actions)
        env.step(zeros)
        velocity = as_torch(base.robot.data.joint_vel)[1:2].clone().fill_(float("nan"))
        base.robot.write_joint_velocity_to_sim_index(velocity=velocity, env_ids=torch.tensor([1]))
        res = env.step(zeros)
        assert res.truncated.tolist() == [False, True, False] and not res.terminated.any()
        assert int(res.info["extras"]["termination_cause"][1]) == causes.CAUSE_NON_FINITE
        assert all(torch.isfinite(group).all() for group in res.obs.values())
        assert torch.isfinite(res.reward).all()
        for _ in range(10):
            res = env.step(zeros)
            validate_step(3, res)
            assert not (res.terminated | res.truncated).any()
            assert all(torch.isfinite(group).all() for group in res.obs.values())
    finally:
        env.close()


def test_the_state_read_from_base_data_is_isaac_labs_derived_state():
    """``_read_robot_state`` reads only Isaac Lab's base data (link poses, centre-of-mass velocities
    and offsets), which a recorded CUDA graph may hold, and derives the link velocities and the
    whole-body centre of mass itself: they equal Isaac Lab's own derived properties (the ones
    Isaac Lab refuses inside a capture), on a robot tumbling under random actions."""
    from isaac_adapter.isaaclab.robot import as_torch

    env = build(4, 4)
    try:
        base = env.unwrapped
        env.reset()
        gen = torch.Generator().manual_seed(1)
        for _ in range(25):
            env.step(0.8 * torch.randn(4, env.num_actions, generator=gen))
        state, d, origins = base._read_robot_state(), base.robot.data, base.scene.env_origins
        mass = as_torch(d.body_mass).double()
        com = (as_torch(d.body_com_pos_w).double() * mass.unsqueeze(-1)).sum(1) / mass.sum(1, keepdim=True)
        feet = base._foot_index
        expected = {
            "root_pos_w": as_torch(d.root_link_pos_w) - origins,
            "root_quat_w": as_torch(d.root_link_quat_w)[:, [3, 0, 1, 2]],
            "root_lin_vel_w": as_torch(d.root_link_lin_vel_w),
            "root_ang_vel_w": as_torch(d.root_link_ang_vel_w),
            "foot_pos_w": as_torch(d.body_link_pos_w)[:, feet] - origins.unsqueeze(1),
            "foot_lin_vel_w": as_torch(d.body_link_lin_vel_w)[:, feet],
            "com_pos_w": (com - origins.double()).float(),
        }
        assert as_torch(d.root_link_ang_vel_w).abs().max() > 0.1  # the robots do move
        for name, value in expected.items():
            torch.testing.assert_close(getattr(state, name), value.float(), atol=2e-5, rtol=1e-5, msg=name)
    finally:
        env.close()


@pytest.mark.parametrize("reset_by_mask", [True, False])
def test_a_step_graph_that_cannot_be_recorded_is_refused_in_one_line(reset_by_mask):
    """``cuda_graph`` records on CUDA with the reset by mask only; elsewhere the first step says why,
    before anything is recorded, and the env steps on eagerly once the flag is off."""
    env = build(2, 4, reset_by_mask=reset_by_mask)
    try:
        base = env.unwrapped
        env.reset()
        base.cuda_graph = True
        expected = r"^cuda_graph: a step is recorded only on CUDA; this env runs on cpu" if reset_by_mask else \
            r"^cuda_graph: the reset by ids .* build the env with reset_by_mask=True"
        with pytest.raises(ValueError, match=expected):
            env.step(torch.zeros(2, env.num_actions))
        base.cuda_graph = False
        validate_step(2, env.step(torch.zeros(2, env.num_actions)))
    finally:
        env.close()


def test_compiling_the_physics_ahead_leaves_the_steps_as_they_were():
    """``warp_compile_workers``: the env runs one physics step with Warp's launches recorded instead
    of run, compiles the modules it named side by side, and puts back what Newton's Python kept of
    that step (its pending model changes, swapped state buffers, step count, contact caches). The
    steps after are then the same to the bit as an env's built without it: with nothing put back,
    the drives' new gains never reached the solver and the root height after five steps was 0.7035
    against 0.7381 m."""
    from isaac_adapter.isaaclab.g1_direct import PRELOADED_MODULES, make_g1_direct_env

    actions = 0.3 * torch.sin(torch.arange(4 * 29, dtype=torch.float32).reshape(4, 29))
    runs = []
    for workers in (2, 0):
        env = make_g1_direct_env(G1WalkConfig(num_envs=4, device="cpu", joint_pos_noise=0.0, warp_compile_workers=workers))
        try:
            base = env.unwrapped
            assert (base.compiled_modules > 0) == (workers > 0)
            assert set(base.preloaded_modules) == (set(PRELOADED_MODULES) if workers else set())
            env.reset()
            for _ in range(5):
                env.step(actions[:, :env.num_actions])
            s = base._read_robot_state()
            runs.append(torch.cat([s.root_pos_w, s.root_quat_w, s.joint_pos, s.joint_vel], dim=-1))
        finally:
            env.close()
    assert torch.equal(runs[0], runs[1]), (runs[0] - runs[1]).abs().max()


PRELOAD_CHECK = """
import sys
import torch
import warp as wp
from isaac_adapter.backends.warp_stream import preload_modules
from isaac_adapter.isaaclab.g1_direct import PRELOADED_MODULES, make_g1_direct_env
from isaac_adapter.tasks.g1_walk import G1WalkConfig

loaded = preload_modules(PRELOADED_MODULES + (sys.argv[1],), "cpu", 2)
env = make_g1_direct_env(G1WalkConfig(num_envs=2, device="cpu"))
env.reset()
env.step(torch.zeros(2, env.num_actions))
ctx = wp.get_device("cpu").context
print("LOADED", ",".join(sorted(loaded)))
print("REPLACED", ",".join(sorted(n for n, ex in loaded.items() if wp.get_module(n).execs.get((ctx, 1)) is not ex)))
"""


def test_the_preloaded_modules_are_the_ones_the_build_and_the_step_launch():
    """With ``warp_compile_workers`` the env loads ``PRELOADED_MODULES`` side by side before Isaac Lab
    builds it; that saves compiling only if the build and the step then launch those very variants.
    In a fresh process (where each module holds only its import-time kernels), after a build and a
    step, every listed module's loaded variant is still the one the preload loaded. Newton's MuJoCo
    solver kernels, which the list leaves out, are preloaded here too and come out replaced: the
    build adds a kernel to their module, so a preload of them is compiled again."""
    import subprocess
    import sys

    from isaac_adapter.isaaclab.g1_direct import PRELOADED_MODULES

    left_out = "newton._src.solvers.mujoco.kernels"
    out = subprocess.run([sys.executable, "-c", PRELOAD_CHECK, left_out], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) if " " in line else (line, "") for line in out.stdout.splitlines()
                 if line.startswith(("LOADED", "REPLACED")))
    assert set(lines["LOADED"].split(",")) == {*PRELOADED_MODULES, left_out}
    assert lines["REPLACED"] == left_out
