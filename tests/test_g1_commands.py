"""G1 walk commands: the standing share, mid-episode resampling, held commands, and the command
settings a checkpoint is evaluated with (its recorded ones; the old ranges when it recorded none)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from test_g1_env_logic import make_env

from ppo_bootstrap import PPOConfig

from isaac_adapter.tasks import registry
from isaac_adapter.tasks.g1_walk.config import (
    LEGACY_BACKEND,
    LEGACY_COMMANDS,
    PRESETS,
    G1WalkConfig,
    RewardWeights,
    FAST_V1_STEPS_PER_ITERATION,
    clock_fast_config,
    clock_fast_v1_config,
    clock_fast_v2_config,
    clock_ramp_config,
    gait_clock_config,
    smooth_gait_config,
    stored_config,
    walk_config,
)
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg

SHIPPED = str(Path(__file__).resolve().parents[1] / "docs" / "checkpoints" / "g1_clock_it1296.pt")
OLD = {**LEGACY_COMMANDS, **LEGACY_BACKEND}  # what a checkpoint that recorded neither is read with


def trained_env(ckpt: dict) -> dict:
    """The env config a shipped checkpoint recorded, with the feet's collider it trained by: every
    one predates ``warp_box_box`` and trained by MuJoCo Warp's convex path (``LEGACY_BACKEND``),
    and predates ``randomization`` and ``model_self_collisions``, so trained without any
    randomization and with the model's self-collision pairs (their defaults), and predates
    ``warp_compile_workers`` and ``warp_compile_via``, compile settings that change no step (their
    defaults), ``policy_obs_frames``, so its policy saw one frame (the default), and ``solver``, so
    it trained with the model file's solver (None, the default)."""
    return {**LEGACY_BACKEND, "randomization": dataclasses.asdict(RandomizationCfg()), "model_self_collisions": True,
            "warp_compile_workers": 0, "warp_compile_via": "threads", "policy_obs_frames": 1, "solver": None,
            **ckpt["task"]["env"]}


def _resets(env, times: int) -> torch.Tensor:
    """Commands drawn by ``times`` resets of every env, ``[times * N, 3]``."""
    drawn = []
    for _ in range(times):
        env.reset()
        drawn.append(env.command.clone())
    return torch.cat(drawn)


def test_a_share_of_the_draws_stands_still_exactly() -> None:
    env, _ = make_env(256, rel_standing_envs=0.25)
    commands = _resets(env, 8)
    standing = (commands == 0).all(-1)
    assert 0.20 < standing.float().mean() < 0.30  # 2,048 draws at 0.25
    lo = torch.tensor([r[0] for r in (env.cfg.lin_vel_x_range, env.cfg.lin_vel_y_range, env.cfg.ang_vel_z_range)])
    hi = torch.tensor([r[1] for r in (env.cfg.lin_vel_x_range, env.cfg.lin_vel_y_range, env.cfg.ang_vel_z_range)])
    moving = commands[~standing]
    assert ((moving >= lo) & (moving <= hi)).all()
    # the widened ranges are used to their ends
    assert (moving.amin(0) < lo + 0.1).all() and (moving.amax(0) > hi - 0.1).all()


def test_no_standing_share_draws_the_stream_of_before() -> None:
    # rel_standing_envs 0 draws no extra numbers: the commands of before it existed
    old, _ = make_env(16, **LEGACY_COMMANDS)
    generator = torch.Generator().manual_seed(0)
    for _ in range(2):
        torch.rand(16, 29, generator=generator)  # _reset_idx draws the spawn noise first (0 here, drawn still)
        u = torch.rand(16, 3, generator=generator)  # then the commands
    old.reset(seed=0)
    old.reset()
    expected = torch.tensor([-0.5, -0.3, -0.5]) + u * torch.tensor([1.5, 0.6, 1.0])
    torch.testing.assert_close(old.command, expected)


def test_held_commands_survive_resets_and_resampling() -> None:
    env, _ = make_env(8, resampling_time_range=(0.1, 0.1))  # a new command every 5 steps
    env.set_commands(torch.tensor([0.3, 0.0, 1.0]))
    for _ in range(12):
        env.step(torch.zeros(8, 29))
        assert (env.command == torch.tensor([0.3, 0.0, 1.0])).all()


def test_resampling_changes_commands_mid_episode_on_schedule() -> None:
    env, _ = make_env(64, resampling_time_range=(0.1, 0.1), rel_standing_envs=0.0)  # 5 policy steps
    first = env.command.clone()
    for step in range(1, 11):
        env.step(torch.zeros(64, 29))
        changed = (env.command != first).any(-1)
        if step < 5:
            assert not changed.any(), step
        elif step == 5:
            assert changed.all()
            first = env.command.clone()
    assert (env.command_steps_left == 5).all()  # drawn again at step 10
    assert (env.episode_step == 10).all()  # no reset: a mid-episode change


def test_without_resampling_commands_change_only_at_resets() -> None:
    env, _ = make_env(8)
    first = env.command.clone()
    for _ in range(30):
        env.step(torch.zeros(8, 29))
    assert torch.equal(env.command, first)


def test_presets_and_the_smooth_gait_weights() -> None:
    assert set(PRESETS) == {"default", "gait_clock", "smooth_gait", "clock_ramp", "clock_fast", "clock_fast_v1",
                            "clock_fast_v2", "robust", "robust_v1", "clock_cpu"}
    smooth = smooth_gait_config(num_envs=3)
    clock = gait_clock_config(num_envs=3)
    assert smooth.gait_period_s == clock.gait_period_s == 0.8
    assert smooth.rewards.action_rate == -0.08 and smooth.rewards.ang_vel_xy == -0.2 and smooth.rewards.joint_vel == -1e-3
    # everything else is the clock task's
    differ = {k for k, v in dataclasses.asdict(smooth.rewards).items() if dataclasses.asdict(clock.rewards)[k] != v}
    assert differ == {"action_rate", "ang_vel_xy", "joint_vel"}
    assert dataclasses.replace(smooth, rewards=clock.rewards) == clock
    assert smooth_gait_config(action_rate=-0.05).rewards.action_rate == -0.05
    # the new weight is 0 in the existing recipes, so their rewards are unchanged
    assert RewardWeights().joint_vel == 0.0 and clock.rewards.joint_vel == 0.0
    assert walk_config(preset="smooth_gait", num_envs=2) == smooth_gait_config(num_envs=2)
    with pytest.raises(ValueError, match="preset"):
        walk_config(preset="fast")


def test_registry_ids_and_presets() -> None:
    spec = registry.get_task("G1-Walk-Smooth-v0")
    assert spec.is_g1_walk and spec.gait_clock and spec.config_preset == "smooth_gait"
    assert registry.get_task("G1-Walk-Clock-v0").config_preset == "gait_clock"
    assert registry.get_task("G1-Walk-Clock-Ramp-v0").config_preset == "clock_ramp"
    assert registry.get_task("G1-Walk-Clock-Fast-v0").config_preset == "clock_fast"
    assert registry.get_task("G1-Walk-Clock-Fast-v1").config_preset == "clock_fast_v1"
    assert registry.get_task("G1-Walk-Clock-Fast-v2").config_preset == "clock_fast_v2"
    assert registry.get_task("G1-Walk-Robust-v0").config_preset == "robust"
    assert registry.get_task("G1-Walk-Robust-v1").config_preset == "robust_v1"
    assert registry.get_task("G1-Walk-Robust-v1").symmetry == "both"  # as it was trained to both gates
    fast = {"G1-Walk-Clock-Fast-v1", "G1-Walk-Clock-Fast-v2", "G1-Walk-Robust-v0", "G1-Walk-Robust-v1"}
    assert all(spec.agent == registry.FAST_AGENT for spec in registry.TASKS.values() if spec.id in fast)
    assert registry.get_task("G1-Walk-Clock-CPU-v0").agent == registry.CPU_AGENT
    assert set(registry.FAST_AGENT) < set(registry.CPU_AGENT)
    cpu = {"G1-Walk-Clock-CPU-v0", "G1-Walk-Clock-CPU-Gate-v0"}
    assert all(not spec.agent for spec in registry.TASKS.values() if spec.id not in fast | cpu)
    assert registry.get_task("G1-Walk-v0").config_preset == "default"
    assert registry.get_task("Isaac-Velocity-Flat-G1").config_preset is None
    assert registry.DEFAULT_TASK == "G1-Walk-Clock-v0"
    # a run without --task: the CPU recipe where the physics runs on the CPU
    assert registry.default_task("mujoco", "auto") == registry.default_task("auto", "cpu") == "G1-Walk-Clock-CPU-v0"
    assert registry.default_task("warp", "cuda") == registry.default_task("auto", "cuda") == "G1-Walk-Clock-v0"


def test_clock_ramp_preset_is_what_the_first_time_to_walk_runs_trained_with() -> None:
    """G1-Walk-Clock-Ramp-v0 is the clock task plus the two smoothness ramps, exactly the task of the
    first runs that passed the gate (trained as G1-Walk-Clock-v0 with the ramps given on the command
    line, as ``docs/time_to_walk/clock_ramp_s0.json`` recorded each run's command)."""
    ramped = clock_ramp_config(num_envs=4096, device="cuda")
    clock = gait_clock_config(num_envs=4096, device="cuda")
    assert dataclasses.replace(ramped, reward_ramps=()) == clock
    # iterations 500-800 of 24 env steps (the warm-up rollout counted): -0.01 -> -0.15, -0.05 -> -0.2
    assert [(r.term, r.weight, r.start_step, r.end_step) for r in ramped.reward_ramps] == [
        ("action_rate", -0.15, 24 * 500, 24 * 800), ("ang_vel_xy", -0.2, 24 * 500, 24 * 800)]
    halfway = ramped.reward_weights(24 * 650)
    assert halfway["action_rate"] == pytest.approx(-0.08) and halfway["ang_vel_xy"] == pytest.approx(-0.125)
    runs = recorded_runs("clock_ramp_s0.json")
    assert runs
    for cmd in runs:
        assert cmd[cmd.index("--task") + 1] == "G1-Walk-Clock-v0" and "--num-steps-per-env" not in cmd
        assert trainer_env(cmd) == clock_ramp_config()
    assert clock_ramp_config(reward_ramps=()).reward_ramps == ()  # the ramps can be replaced


def recorded_runs(name: str) -> list[list[str]]:
    """The trainer commands a time-to-walk record (``docs/time_to_walk/NAME``) kept, one per run."""
    import json

    record = json.loads((Path(__file__).parents[1] / "docs" / "time_to_walk" / name).read_text())
    return [run["trainer_command"] for run in record["runs"]]


def trainer_env(cmd: list[str]) -> G1WalkConfig:
    """The G1 task a recorded ``examples/g1_walk.py`` command trained: its ``--task`` preset with its
    ``env.*`` overrides (``num_envs`` and ``device`` at their defaults)."""
    from ppo_bootstrap.overrides import apply_overrides

    preset = walk_config(preset=registry.get_task(cmd[cmd.index("--task") + 1]).config_preset)
    return apply_overrides({"env": preset}, [arg for arg in cmd if arg.startswith("env.")])["env"]


def trainer_agent(cmd: list[str]):
    """The agent settings a recorded command trained with: its task's own, then its ``agent.*`` overrides
    and ``--num-steps-per-env``."""
    from ppo_bootstrap import RunnerConfig
    from ppo_bootstrap.overrides import apply_overrides

    spec = registry.get_task(cmd[cmd.index("--task") + 1])
    agent = apply_overrides({"agent": RunnerConfig()}, [*spec.agent, *(a for a in cmd if a.startswith("agent."))])["agent"]
    if "--num-steps-per-env" in cmd:
        agent = dataclasses.replace(agent, num_steps_per_env=int(cmd[cmd.index("--num-steps-per-env") + 1]))
    return agent


@pytest.mark.parametrize("record, task_id, num_envs, steps_per_env, desired_kl", [
    ("clock_dt10_early_s1.json", "G1-Walk-Clock-v0", 4096, 24, 0.01),  # physics and ramps on the command line
    ("clock_fast_tf32_s012.json", "G1-Walk-Clock-Fast-v0", 4096, 24, 0.01),  # trained by the task id
    ("clock_fast_graph_8192x12_s012.json", "G1-Walk-Clock-Fast-v0", 8192, 12, 0.01),  # ramps at the same iterations
    ("clock_fast_kl2_4096x12_s12.json", "G1-Walk-Clock-Fast-v0", 4096, 12, 0.02),  # half the samples per iteration
])
def test_clock_fast_preset_is_what_the_time_to_walk_runs_trained_with(
        record: str, task_id: str, num_envs: int, steps_per_env: int, desired_kl: float) -> None:
    """G1-Walk-Clock-Fast-v0 is the clock task on 10 ms x 2 physics with the ramps over iterations
    250-550, exactly the task of the time-to-walk runs each record in ``docs/time_to_walk`` kept
    (the first trained as G1-Walk-Clock-v0 with the physics and the ramps given on the command line,
    the others by the id; the last two on 12-step iterations, their ramps given in env steps of
    those; the last with twice the default KL target, the rest of PPO at its defaults). The
    checkpoint kept from them, trained by the v1 id, recorded the same task in full."""
    fast = clock_fast_config(num_envs=4096, device="cuda")
    clock = gait_clock_config(num_envs=4096, device="cuda")
    # the policy still acts every 20 ms: 10 ms x 2 against the clock task's 5 ms x 4
    assert (fast.sim_dt, fast.decimation, clock.sim_dt, clock.decimation) == (0.01, 2, 0.005, 4)
    assert fast.policy_dt == pytest.approx(clock.policy_dt) and fast.max_episode_length == clock.max_episode_length
    assert dataclasses.replace(fast, sim_dt=0.005, decimation=4, reward_ramps=()) == clock
    # iterations 250-550 of 24 env steps: the weights of the later ramps, reached 250 iterations sooner
    assert [(r.term, r.weight, r.start_step, r.end_step) for r in fast.reward_ramps] == [
        ("action_rate", -0.15, 24 * 250, 24 * 550), ("ang_vel_xy", -0.2, 24 * 250, 24 * 550)]
    assert fast.reward_weights(24 * 400)["action_rate"] == pytest.approx(-0.08)
    assert fast.reward_weights(24 * 400) == clock_ramp_config().reward_weights(24 * 650)
    runs = recorded_runs(record)
    assert runs
    for cmd in runs:
        assert cmd[cmd.index("--task") + 1] == task_id and int(cmd[cmd.index("--num_envs") + 1]) == num_envs
        assert cmd[cmd.index("--symmetry") + 1] == "both"
        agent = trainer_agent(cmd)
        assert agent.num_steps_per_env == steps_per_env
        assert agent.ppo.desired_kl == desired_kl and agent.ppo.schedule == "adaptive"
        assert dataclasses.replace(agent.ppo, desired_kl=PPOConfig.desired_kl) == PPOConfig()  # the rest at its defaults
        # the same iterations 250-550, counted in env steps of this run's iterations
        ramps = tuple(dataclasses.replace(r, start_step=steps_per_env * 250, end_step=steps_per_env * 550)
                      for r in fast.reward_ramps)
        assert trainer_env(cmd) == dataclasses.replace(clock_fast_config(), reward_ramps=ramps)
    # the kept checkpoint of the recipe (12-step iterations, trained by the v1 id): the whole task it recorded
    ckpt = torch.load(Path(__file__).parents[1] / "docs" / "checkpoints" / "g1_ttw_v1_s2_it360.pt",
                      map_location="cpu", weights_only=False)
    recorded = trained_env(ckpt)
    ramps = tuple(dataclasses.replace(r, start_step=12 * 250, end_step=12 * 550) for r in fast.reward_ramps)
    preset = dataclasses.asdict(dataclasses.replace(clock_fast_config(num_envs=4096, device="cuda"),
                                                    reward_ramps=ramps, **LEGACY_BACKEND))
    assert set(preset) == set(recorded)
    assert {k: v for k, v in preset.items() if k != "seed"} == {k: v for k, v in recorded.items() if k != "seed"}


def test_clock_fast_v1_is_the_recipe_the_fastest_checkpoint_trained_with() -> None:
    """G1-Walk-Clock-Fast-v1 (env preset and agent settings) is what the half-samples runs trained
    as G1-Walk-Clock-Fast-v0 with 12 steps, desired_kl 0.02 and the ramps on the command line
    (``docs/time_to_walk/clock_fast_kl2_4096x12_s12.json``): that recipe, by one task id."""
    from ppo_bootstrap import RunnerConfig
    from ppo_bootstrap.overrides import apply_overrides

    spec = registry.get_task("G1-Walk-Clock-Fast-v1")
    agent = apply_overrides({"agent": RunnerConfig()}, list(spec.agent))["agent"]
    assert agent.num_steps_per_env == FAST_V1_STEPS_PER_ITERATION == 12 and agent.ppo.desired_kl == 0.02
    assert dataclasses.replace(agent, num_steps_per_env=24, ppo=PPOConfig()) == RunnerConfig()  # nothing else
    v1 = clock_fast_v1_config(num_envs=4096, device="cuda")
    # the same iterations 250-550 as the v0 recipe, counted in 12-step iterations
    assert [(r.term, r.weight, r.start_step, r.end_step) for r in v1.reward_ramps] == [
        ("action_rate", -0.15, 3000, 6600), ("ang_vel_xy", -0.2, 3000, 6600)]
    assert dataclasses.replace(v1, reward_ramps=()) == dataclasses.replace(clock_fast_config(num_envs=4096, device="cuda"),
                                                                           reward_ramps=())
    for cmd in recorded_runs("clock_fast_kl2_4096x12_s12.json"):
        assert cmd[cmd.index("--task") + 1] == "G1-Walk-Clock-Fast-v0"
        assert trainer_env(cmd) == clock_fast_v1_config()
        assert trainer_agent(cmd) == agent
    assert walk_config(preset="clock_fast_v1", rel_standing_envs=0.2).rel_standing_envs == 0.2
    assert clock_fast_v1_config(reward_ramps=()).reward_ramps == ()  # the ramps can be replaced


@pytest.mark.parametrize("runs", ["clock_fast_v1_angxy_0.4_alone.json", "clock_fast_v1_angxy_0.4_alone_s345.json"])
def test_clock_fast_v2_is_what_its_measured_runs_trained(runs: str) -> None:
    """G1-Walk-Clock-Fast-v2 is exactly what the runs its BENCHMARKS rows come from trained: the v1
    task id with the roll/pitch ramp given on the command line, as each JSON recorded it. Only the
    ``ang_vel_xy`` ramp's end weight differs from v1 (-0.4 against -0.2)."""
    import json

    from ppo_bootstrap.overrides import apply_overrides

    record = json.loads((Path(__file__).parents[1] / "docs" / "time_to_walk" / runs).read_text())
    v1 = clock_fast_v1_config(num_envs=4096, device="cuda")
    v2 = clock_fast_v2_config(num_envs=4096, device="cuda")
    for run in record["runs"]:
        cmd = run["trainer_command"]
        assert cmd[cmd.index("--task") + 1] == "G1-Walk-Clock-Fast-v1"
        overrides = [arg for arg in cmd if arg.startswith(("env.", "agent."))]
        assert apply_overrides({"env": v1}, overrides)["env"] == v2
    assert [(r.term, r.weight, r.start_step, r.end_step) for r in clock_fast_v2_config().reward_ramps] == [
        ("action_rate", -0.15, 3000, 6600), ("ang_vel_xy", -0.4, 3000, 6600)]
    assert dataclasses.replace(clock_fast_v2_config(), reward_ramps=()) == clock_fast_v1_config(reward_ramps=())
    assert walk_config(preset="clock_fast_v2") == clock_fast_v2_config()
    assert clock_fast_v2_config(reward_ramps=()).reward_ramps == ()  # the ramps can be replaced


@pytest.mark.parametrize("name, iteration", [("g1_ttw_v1_s2_it360.pt", 360)])
def test_the_checkpoints_trained_by_the_clock_fast_v1_id(name: str, iteration: int) -> None:
    """The shipped time-to-walk checkpoints were trained by ``--task G1-Walk-Clock-Fast-v1`` alone (no
    agent flags): each recorded the id, its env preset, and its agent settings (12 steps, desired_kl 0.02)."""
    ckpt = torch.load(Path(__file__).parents[1] / "docs" / "checkpoints" / name, map_location="cpu",
                      weights_only=False)
    assert ckpt["task"]["id"] == "G1-Walk-Clock-Fast-v1" and ckpt["iteration"] == iteration
    assert ckpt["total_steps"] == iteration * 12 * 4096
    v1 = dataclasses.asdict(clock_fast_v1_config(num_envs=4096, device="cuda", **LEGACY_BACKEND))
    assert {k: v for k, v in v1.items() if k != "seed"} == {k: v for k, v in trained_env(ckpt).items() if k != "seed"}
    assert ckpt["config"]["num_steps_per_env"] == FAST_V1_STEPS_PER_ITERATION
    assert ckpt["config"]["ppo"]["desired_kl"] == 0.02
    assert ckpt["config"]["ppo"]["symmetry_augmentation"] and ckpt["config"]["ppo"]["symmetry_loss_coef"] > 0


def test_stored_config_keeps_what_the_checkpoint_recorded() -> None:
    trained = dataclasses.asdict(smooth_gait_config(num_envs=4096, device="cuda", lin_vel_y_range=(-0.6, 0.6),
                                                    rel_standing_envs=0.2, episode_length_s=10.0))
    cfg = stored_config(trained, "gait_clock", num_envs=8)
    assert cfg.num_envs == 8 and cfg.device == "cpu"  # where and how many: not the checkpoint's
    assert cfg.lin_vel_y_range == (-0.6, 0.6) and cfg.rel_standing_envs == 0.2 and cfg.episode_length_s == 10.0
    assert cfg.rewards == smooth_gait_config().rewards


def test_stored_config_of_an_older_version_gets_the_old_command_settings() -> None:
    # recorded before rel_standing_envs, resampling and joint_vel existed: as the shipped checkpoint
    old = {k: v for k, v in dataclasses.asdict(gait_clock_config(**LEGACY_COMMANDS)).items()
           if k not in ("rel_standing_envs", "resampling_time_range", "solver_iterations", "ls_iterations")}
    del old["rewards"]["joint_vel"]
    old["lin_vel_x_range"] = list(old["lin_vel_x_range"])  # as read back from YAML
    cfg = stored_config(old, "gait_clock")
    assert cfg == gait_clock_config(**LEGACY_COMMANDS)
    # a checkpoint that recorded nothing: its variant with the ranges of its time
    assert stored_config({}, "default") == G1WalkConfig(**OLD)
    assert stored_config({"future_field": 1}, "default", num_envs=2).num_envs == 2


def test_checkpoints_keep_their_command_ranges(tmp_path) -> None:
    from ppo_bootstrap import checkpoint

    shipped = registry.checkpoint_walk_config(SHIPPED, num_envs=6)
    assert shipped == gait_clock_config(num_envs=6, **OLD)

    ckpt = checkpoint.read(SHIPPED)
    del ckpt["task"], ckpt["checksum"]  # an older file: the variant from the policy's input width, the old ranges
    path = tmp_path / "old.pt"
    checkpoint.save_atomic(ckpt, path)
    assert registry.checkpoint_walk_config(str(path), num_envs=6) == gait_clock_config(num_envs=6, **OLD)
    no_clock = registry.checkpoint_walk_config(str(path), gait_clock=False, num_envs=6)
    assert no_clock == G1WalkConfig(num_envs=6, **OLD)


def test_the_cpu_gate_task_is_the_cpu_recipe_trained_longer() -> None:
    """G1-Walk-Clock-CPU-Gate-v0 trains what G1-Walk-Clock-CPU-v0 trains (its measured runs are the CPU
    recipe's with ``--max_iterations``); only its length and the closing gate differ."""
    import dataclasses

    recipe, gate = registry.get_task("G1-Walk-Clock-CPU-v0"), registry.get_task("G1-Walk-Clock-CPU-Gate-v0")
    assert gate.closing_gate and not recipe.closing_gate
    assert gate.max_iterations > recipe.max_iterations
    same = dataclasses.replace(gate, id=recipe.id, description=recipe.description,
                               max_iterations=recipe.max_iterations, closing_gate=False)
    assert same == recipe
    assert not any(spec.closing_gate for spec in registry.TASKS.values() if spec.id != gate.id)


@pytest.mark.parametrize("runs", ["cpu_recipe/cpu2_s0.json", "cpu_recipe/warp_1024_Lg.json"])
def test_the_cpu_recipe_is_what_its_measured_runs_trained(runs: str) -> None:
    """G1-Walk-Clock-CPU-v0 is exactly what its BENCHMARKS rows trained: Fast-v2 with the overrides
    and --symmetry each JSON recorded (env side equal as configs, agent side as override lines)."""
    import json

    from ppo_bootstrap.overrides import apply_overrides

    record = json.loads((Path(__file__).parents[1] / "docs" / "time_to_walk" / runs).read_text())
    spec = registry.get_task("G1-Walk-Clock-CPU-v0")
    (run,) = record["runs"]
    cmd = run["trainer_command"]
    assert cmd[cmd.index("--task") + 1] == "G1-Walk-Clock-Fast-v2" and run["num_envs"] == spec.num_envs
    assert cmd[len(cmd) - 1 - cmd[::-1].index("--symmetry") + 1] == spec.symmetry  # the last --symmetry wins
    overrides = [arg for arg in cmd if arg.startswith(("env.", "agent."))]
    env = apply_overrides({"env": clock_fast_v2_config()}, [o for o in overrides if o.startswith("env.")])["env"]
    assert env == walk_config(preset="clock_cpu")
    agent = {o.replace(" ", "") for o in overrides if o.startswith("agent.")}
    # Fast-v2 brings FAST_AGENT itself; the thread setting came after the first runs (speed, not the recipe)
    assert agent - {registry.CPU_THREADS} == set(registry.CPU_AGENT) - set(registry.FAST_AGENT) - {registry.CPU_THREADS}
