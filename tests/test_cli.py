"""The command line as a user runs it (examples/g1_walk.py, python -m isaac_adapter.app): one-line
errors before anything is built, the flags' spellings, run folders, --resume, and evaluation /
playback of the shipped checkpoint with no flag to remember."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ppo_bootstrap import checkpoint

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "docs" / "checkpoints" / "g1_clock_it1296.pt"

from isaac_adapter.app import cli as g1_walk  # noqa: E402  (examples/g1_walk.py is its command line)
from isaac_adapter.app import envs  # noqa: E402
from isaac_adapter.tasks import registry  # noqa: E402


def one_line_error(argv: list[str], monkeypatch) -> str:
    """The message of the SystemExit ``argv`` gives, with env building forbidden (errors come first)."""

    def no_env(*args, **kwargs):
        raise AssertionError("the env was built before the usage error")

    monkeypatch.setattr(envs, "make_env", no_env)
    with pytest.raises(SystemExit) as stop:
        g1_walk.main(argv)
    message = str(stop.value)
    assert message.startswith("error: ") and "\n" not in message, message
    return message


@pytest.mark.parametrize("argv, expected", [
    (["--task", "G1-Walk-Clokc-v0"], "unknown task 'G1-Walk-Clokc-v0' (did you mean G1-Walk-Clock-v0?)"),
    (["--task", "Isaac-Velocity-Flat-G1", "--sim", "mujoco"], "Isaac-Velocity-Flat-G1 runs on --sim isaaclab, not mujoco"),
    (["--resume", "--experiment_name", "never_ran"], "no checkpoint matching"),
    (["--checkpoint", "nowhere/model_5.pt"], "--checkpoint nowhere/model_5.pt is no file; to search the runs, add --resume"),
    (["env.rewards.action_rat=-0.05"], "override env.rewards.action_rat: RewardWeights has no field 'action_rat'; did you mean action_rate"),
    (["agent.ppo.learning_rate=fast"], "override agent.ppo.learning_rate: expected a number, got 'fast'"),
    (["agent.ppo.gamma=1.5"], "override agent.ppo.gamma=1.5: gamma and lam must lie in [0, 1]"),
    (["env.lin_vel_y_range=[0.5,-0.5]"], "override env.lin_vel_y_range=[0.5, -0.5]: lin_vel_y_range must be finite (low, high) with low <= high"),
    (["--task", "Mjlab-Velocity-Flat-Unitree-G1", "env.sim_dt=0.004"],
     "env.sim_dt=0.004: env.* overrides are for the G1-Walk tasks and Isaac Lab's own tasks; "
     "Mjlab-Velocity-Flat-Unitree-G1 on --sim mjlab takes none"),
    (["--play", "nowhere.pt"], "--play nowhere.pt: no such checkpoint"),
    (["--task", "G1-Walk-Clock-Fast-v1", "--num-steps-per-env", "0"],
     "--num-steps-per-env 0: a PPO iteration needs at least 1 env step per env (the G1 recipes use 12 or 24)"),
    (["--cuda-graph-step", "--sim", "mujoco"],
     "--cuda-graph-step: records the G1-Walk env on --sim warp or isaaclab on a GPU; this run is G1-Walk-Clock-CPU-v0 on --sim mujoco on cpu"),
])
def test_usage_errors_are_one_line_before_any_env(argv, expected, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert expected in one_line_error(argv, monkeypatch)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU is here")
def test_cuda_without_a_gpu(monkeypatch):
    for argv in (["--device", "cuda", "--sim", "warp"], ["--device", "cuda"]):  # with and without a sim
        assert "--device cuda but torch sees no CUDA device here" in one_line_error(argv, monkeypatch)


@pytest.mark.skipif(__import__("importlib").util.find_spec("mujoco_warp") is not None, reason="MuJoCo Warp is here")
def test_missing_warp_names_the_extra(monkeypatch):
    assert 'pip install -e ".[g1,warp]"' in one_line_error(["--sim", "warp", "--device", "cpu"], monkeypatch)


def test_damaged_checkpoint_is_one_line_naming_the_file(tmp_path, monkeypatch):
    bad = tmp_path / "model_7.pt"
    bad.write_bytes(b"not a checkpoint")
    assert str(bad) in one_line_error(["--checkpoint", str(bad)], monkeypatch)


def test_train_writes_a_run_folder_and_resume_continues_it(tmp_path, capsys):
    common = ["--num_envs", "4", "--num-steps-per-env", "8", "--log_root", str(tmp_path), "--experiment_name", "demo"]
    runner = g1_walk.main([*common, "--max_iterations", "2", "--run_name", "first"])
    default = registry.default_task()  # no --task: the CPU recipe here
    run = next((tmp_path / "demo").iterdir())
    assert run.name.endswith("_first") and runner.iteration == 2
    env_params = yaml.safe_load((run / "params" / "env.yaml").read_text())
    assert env_params["task"] == default and env_params["num_envs"] == 4 and env_params["sim"] == "mujoco"
    assert yaml.safe_load((run / "params" / "agent.yaml").read_text())["num_steps_per_env"] == 8
    assert (run / "git" / "state.txt").read_text().startswith("commit ")
    assert {p.name for p in (run / "exported").iterdir()} == {"policy.onnx", "policy.pt", "policy.json", "deploy.yaml"}
    assert yaml.safe_load((run / "exported" / "deploy.yaml").read_text())["task"] == default
    saved = checkpoint.read(run / "model_2.pt")
    assert saved["task"]["id"] == default and saved["task"]["env"]["gait_period_s"] == pytest.approx(0.8)
    out = capsys.readouterr().out
    assert "expect:" in out and "evaluation (5 s" in out and f"wrote: {run / 'params'}" in out

    # the run goes on with the task it recorded, not with today's defaults: make the record differ
    saved = {k: v for k, v in saved.items() if k != "checksum"}
    saved["task"]["env"].update(lin_vel_y_range=[-0.3, 0.3], rel_standing_envs=0.0)
    saved["task"]["env"]["rewards"]["action_rate"] = -0.02
    checkpoint.save_atomic(saved, run / "model_2.pt")
    resumed = g1_walk.main([*common, "--resume", "--max_iterations", "1", "env.rewards.joint_vel=-0.003"])  # no --task: the checkpoint's
    assert f"resumed from {run / 'model_2.pt'} at iteration 2" in capsys.readouterr().out
    assert resumed.iteration == 3 and resumed.metadata["id"] == default
    task = resumed.env.task_cfg
    assert task.lin_vel_y_range == (-0.3, 0.3) and task.rel_standing_envs == 0.0 and task.rewards.action_rate == -0.02
    assert task.num_envs == 4 and task.gait_period_s == pytest.approx(0.8) and task.rewards.joint_vel == -0.003
    # the new checkpoint records the task the resumed run trained on (record and override), not the old file's
    recorded = checkpoint.read(Path(resumed.last_checkpoint))["task"]["env"]
    assert recorded["rewards"]["action_rate"] == -0.02 and recorded["rewards"]["joint_vel"] == -0.003


def test_overrides_reach_the_task_and_the_learner_and_are_recorded(tmp_path):
    runner = g1_walk.main(["--task", "G1-Walk-Clock-v0", "--num_envs", "4", "--num-steps-per-env", "8", "--max_iterations",
                           "1", "--log-dir", str(tmp_path), "env.rewards.action_rate=-0.05", "env.lin_vel_y_range=[-0.4, 0.4]",
                           "agent.ppo.learning_rate=3e-4", "agent.ppo.num_mini_batches=2", "agent.policy.actor_hidden=[64, 32]"])
    task = runner.env.task_cfg
    assert task.rewards.action_rate == -0.05 and task.lin_vel_y_range == (-0.4, 0.4)
    assert task.gait_period_s == pytest.approx(0.8) and task.rewards.gait_contact == pytest.approx(0.18)  # the preset stays
    assert runner.cfg.ppo.learning_rate == 3e-4 and runner.cfg.ppo.num_mini_batches == 2
    assert [m.out_features for m in runner.policy.actor.head if hasattr(m, "out_features")][:2] == [64, 32]
    agent = yaml.safe_load((tmp_path / "params" / "agent.yaml").read_text())
    env = yaml.safe_load((tmp_path / "params" / "env.yaml").read_text())
    assert agent["ppo"]["learning_rate"] == 3e-4 and env["rewards"]["action_rate"] == -0.05


def test_a_task_brings_its_agent_settings_and_the_command_line_wins(tmp_path):
    common = ["--task", "G1-Walk-Clock-Fast-v1", "--num_envs", "4", "--max_iterations", "1", "--save-interval", "1"]
    runner = g1_walk.main([*common, "--log-dir", str(tmp_path / "task")])
    assert runner.cfg.num_steps_per_env == 12 and runner.cfg.ppo.desired_kl == 0.02  # the task's
    assert runner.cfg.ppo.learning_rate == 1e-3 and runner.cfg.ppo.num_mini_batches == 4  # the rest: the defaults
    assert [(r.start_step, r.end_step) for r in runner.env.task_cfg.reward_ramps] == [(3000, 6600)] * 2
    agent = yaml.safe_load((tmp_path / "task" / "params" / "agent.yaml").read_text())
    assert agent["num_steps_per_env"] == 12 and agent["ppo"]["desired_kl"] == 0.02
    assert checkpoint.read(tmp_path / "task" / "model_1.pt")["total_steps"] == 4 * 12
    mine = g1_walk.main([*common, "--num-steps-per-env", "6", "agent.ppo.desired_kl=0.05", "--log-dir", str(tmp_path / "mine")])
    assert mine.cfg.num_steps_per_env == 6 and mine.cfg.ppo.desired_kl == 0.05
    plain = g1_walk.main(["--task", "G1-Walk-Clock-Fast-v0", "--num_envs", "4", "--max_iterations", "1",
                          "--log-dir", str(tmp_path / "v0")])
    assert plain.cfg.num_steps_per_env == 24 and plain.cfg.ppo.desired_kl == 0.01
    v2 = g1_walk.main(["--task", "G1-Walk-Clock-Fast-v2", *common[2:], "--log-dir", str(tmp_path / "v2")])
    assert v2.cfg.num_steps_per_env == 12 and v2.cfg.ppo.desired_kl == 0.02  # v1's agent settings
    assert [r.weight for r in v2.env.task_cfg.reward_ramps] == [-0.15, -0.4]
    ramps = yaml.safe_load((tmp_path / "v2" / "params" / "env.yaml").read_text())["reward_ramps"]
    assert [r["weight"] for r in ramps] == [-0.15, -0.4]
    assert checkpoint.read(tmp_path / "v2" / "model_1.pt")["task"]["id"] == "G1-Walk-Clock-Fast-v2"


def test_the_cpu_recipe_is_the_default_off_a_gpu_and_brings_its_sizes(tmp_path):
    """No --task on a CPU-only machine (as here): the CPU recipe, with its agent settings, networks,
    mirror loss and env and iteration counts unless the command line gives its own (it wins);
    overrides may stand anywhere among the flags, as Isaac Lab's Hydra ones do."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the default off a GPU")
    runner = g1_walk.main(["agent.ppo.num_learning_epochs=1", "--num_envs", "4", "--max_iterations", "1",
                           "env.episode_length_s=4", "--log-dir", str(tmp_path / "cpu")])
    assert runner.metadata["id"] == "G1-Walk-Clock-CPU-v0"
    ppo, policy = runner.cfg.ppo, runner.cfg.policy
    assert runner.cfg.num_steps_per_env == 12 and ppo.desired_kl == 0.02 and ppo.adaptive_every == "update"
    assert tuple(policy.actor_hidden) == tuple(policy.critic_hidden) == (256, 128, 64)
    assert ppo.symmetry_loss_coef == 1.0 and not ppo.symmetry_augmentation  # --symmetry loss, the task's
    assert ppo.num_learning_epochs == 1 and runner.env.task_cfg.episode_length_s == 4  # both overrides applied
    assert runner.env.task_cfg.rewards.gait_contact == pytest.approx(0.36)
    assert runner.env.num_envs == 4 and runner.iteration == 1  # the flags win over the task's 1,024 and 750
    spec = registry.get_task("G1-Walk-Clock-CPU-v0")
    assert (spec.num_envs, spec.max_iterations, spec.symmetry) == (1024, 750, "loss")
    assert runner.cfg.torch_threads == 0  # the update on every core torch sees, not the Runner's half
    before = torch.get_num_threads()
    try:
        off = g1_walk.main(["--task", "G1-Walk-Clock-CPU-v0", "--symmetry", "off", "--num_envs", "4", "--max_iterations",
                            "1", "--torch-threads", "1", "--log-dir", str(tmp_path / "off")])
        # the command line's --symmetry and --torch-threads win over the task's (the Runner once reset the latter)
        assert not off.cfg.ppo.uses_symmetry and off.cfg.torch_threads == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_gate_task_ends_with_the_walking_gate_on_its_last_checkpoint(tmp_path, capsys):
    """G1-Walk-Clock-CPU-Gate-v0 closes with the walking gate's table on the checkpoint it wrote; one
    iteration of training does not walk, so the verdict is FAIL with falls on its first line."""
    g1_walk.main(["--task", "G1-Walk-Clock-CPU-Gate-v0", "--num_envs", "4", "--max_iterations", "1",
                  "agent.ppo.num_learning_epochs=1", "--log-dir", str(tmp_path / "gate")])
    out = capsys.readouterr().out
    assert "passed the walking gate first" in out.splitlines()[1]  # what to expect, said before the run
    head = f"benchmarks/g1_gate.py {tmp_path / 'gate' / 'model_1.pt'}"
    assert head in out
    table = out[out.index(head):].splitlines()
    falls = next(line for line in table if line.startswith("falls (battery, all starts)"))
    assert int(falls.split()[4]) > 1 and falls.endswith("FAIL")  # an untrained G1 falls
    assert ["gate", "FAIL"] in [line.split() for line in table]  # the verdict line
    assert out.index(head) < out.index("wrote: ")


def test_eval_of_the_shipped_checkpoint_needs_no_flags(capsys):
    g1_walk.main(["--eval", str(SHIPPED), "--num-envs", "4", "--horizon-s", "1", "--no-plots", "--sweep", "0.60"])
    out = capsys.readouterr().out
    assert "fall" in out and "0.0%" in out  # the gait-clock policy, read from the file, stands and walks


def test_play_of_the_shipped_checkpoint_needs_no_flags(tmp_path):
    """No task flag: the task comes from the checkpoint; no MUJOCO_GL either: --play picks EGL itself.
    The GIF has the asked size and one frame per 1 / fps s of play."""
    from PIL import Image

    from test_g1_play import _egl_renders

    if not _egl_renders():
        pytest.skip("no headless OpenGL (EGL) for MuJoCo here")
    ckpt = tmp_path / SHIPPED.name
    shutil.copy(SHIPPED, ckpt)
    clip = tmp_path / "clip.gif"
    # 0.2 s: without a GPU each frame is drawn in software
    cmd = [sys.executable, str(ROOT / "examples" / "g1_walk.py"), "--play", str(ckpt), "--video", str(clip),
           "--video_length", "0.2", "--size", "64x48", "--fps", "25"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with Image.open(clip) as gif:
        assert gif.size == (64, 48)
        assert gif.n_frames == 5  # 0.2 s of 20 ms policy steps, every second one at 25 fps
    assert {p.name for p in (tmp_path / "exported").iterdir()} == {"policy.onnx", "policy.pt", "policy.json", "deploy.yaml"}


# -- the flags: one declaration, Isaac Lab's spellings, the older ones as aliases ---------------------

from isaac_adapter.app import args as flags  # noqa: E402


@pytest.mark.parametrize("argv, expected", [
    (["--num_envs", "0"], "--num_envs 0: give a positive number of envs per process"),
    (["--num-envs", "-5"], "--num-envs -5: give a positive number of envs per process"),
    (["--max_iterations", "0"], "--max_iterations 0: give a positive number of PPO iterations"),
    (["--iterations", "-1"], "--iterations -1: give a positive number of PPO iterations"),
    (["--save-interval", "-1"], "--save-interval -1: give a non-negative number of iterations"),
    (["--video", "--video_interval", "0"], "--video_interval 0: give a positive number of iterations between clips"),
    (["--video_length", "0"], "--video_length 0.0: give a positive number of seconds"),
    (["--play", str(SHIPPED), "--command", "1,2"], "--command 1,2: give 3 numbers separated by commas"),
    (["--play", str(SHIPPED), "--size", "320"], "--size 320: give WIDTHxHEIGHT in pixels, e.g. 320x240"),
    (["--num_envs", "many"], "argument --num_envs/--num-envs: invalid int value: 'many'"),
    (["--distributed"], "--distributed: launch the processes with torchrun"),
    (["train", "--num_envs", "0"], "--num_envs 0: give a positive number of envs per process"),
    (["play", str(SHIPPED), "--num_envs", "0"], "--num_envs 0: give a positive number of envs per process"),
    (["eval", "zero", "--num-envs", "0"], "--num-envs 0: give a positive number of envs per process"),
    (["eval", "zero", "--horizon-s", "-1"], "--horizon-s -1.0: give a positive number of seconds"),
    (["eval", "zero", "--sweep", "0.6,low"], "--sweep 0.6,low: give numbers separated by commas"),
])
def test_bad_counts_and_sizes_are_one_line_before_any_env(argv, expected, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert expected in one_line_error(argv, monkeypatch)
    assert not (tmp_path / "logs").exists()  # no run folder was made


def test_output_folders_that_cannot_be_made_are_refused_naming_the_path(tmp_path, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("")
    message = one_line_error(["--log-dir", str(afile / "run")], monkeypatch)
    assert message == f"error: --log-dir {afile / 'run'}: {afile} is a file, not a folder"
    assert one_line_error(["--log_root", str(afile)], monkeypatch) == f"error: --log_root {afile}: {afile} is a file, not a folder"

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(flags.tempfile, "TemporaryFile", denied)  # as a read-only folder answers
    message = one_line_error(["--log-dir", str(tmp_path / "new" / "run")], monkeypatch)
    assert message == f"error: --log-dir {tmp_path / 'new' / 'run'}: cannot write into {tmp_path} (Permission denied)"
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("argv, field, value", [
    (["--num_envs", "8"], "num_envs", 8), (["--num-envs", "8"], "num_envs", 8),
    (["--max_iterations", "3"], "max_iterations", 3), (["--max-iterations", "3"], "max_iterations", 3),
    (["--iterations", "3"], "max_iterations", 3),
    (["--sim", "warp"], "sim", "warp"), (["--backend", "warp"], "sim", "warp"),
    (["--log_dir", "x"], "log_dir", "x"), (["--log-dir", "x"], "log_dir", "x"),
    (["--log_root", "r"], "log_root", "r"), (["--log-root", "r"], "log_root", "r"),
    (["--experiment_name", "e"], "experiment_name", "e"), (["--experiment-name", "e"], "experiment_name", "e"),
    (["--load_run", "2026.*"], "load_run", "2026.*"), (["--load-run", "2026.*"], "load_run", "2026.*"),
    (["--run_name", "a"], "run_name", "a"), (["--run-name", "a"], "run_name", "a"),
    (["--video_length", "2"], "video_length", 2.0), (["--play-seconds", "2"], "video_length", 2.0),
    (["--video_interval", "5"], "video_interval", 5), (["--video-interval", "5"], "video_interval", 5),
    (["--num_steps_per_env", "6"], "num_steps_per_env", 6), (["--num-steps-per-env", "6"], "num_steps_per_env", 6),
    (["--no-validate"], "no_validate", True), (["--no_validate"], "no_validate", True),
    (["--gait-clock"], "task", "G1-Walk-Clock-v0"),
])
def test_every_spelling_reaches_the_one_field(argv, field, value):
    parsed = flags.parse(flags.LEGACY, argv)
    assert getattr(parsed, field) == value
    assert flags.parse(flags.TRAIN, argv) == dataclasses.replace(parsed, spelled=parsed.spelled)


def test_video_is_a_switch_or_a_path():
    assert flags.parse(flags.TRAIN, []).video is None
    assert flags.parse(flags.TRAIN, ["--video"]).video == ""  # on, default path
    assert flags.parse(flags.TRAIN, ["--video", "clip.mp4"]).video == "clip.mp4"
    assert flags.parse(flags.PLAY, ["m.pt", "--video", "g1.gif"]).video == "g1.gif"


@pytest.mark.parametrize("command", [flags.TRAIN, flags.PLAY, flags.EVAL])
def test_every_subcommand_takes_the_task_the_sim_and_the_env_count(command):
    parsed = flags.parse(command, ["--task", "G1-Walk-Clock-Fast-v2", "--sim", "mujoco", "--num_envs", "3"])
    assert (parsed.task, parsed.sim, parsed.num_envs) == ("G1-Walk-Clock-Fast-v2", "mujoco", 3)


def test_help_shows_the_defaults_and_every_registered_task():
    for command in (flags.TRAIN, flags.PLAY, flags.EVAL, flags.LEGACY):
        text = " ".join(flags.build_parser(command).format_help().split())  # unwrapped
        assert all(task in text for task in registry.TASKS), command
        assert "--task TASK" in text and "--num_envs NUM_ENVS, --num-envs NUM_ENVS" in text
    text = " ".join(flags.build_parser(flags.TRAIN).format_help().split())
    assert "--max_iterations MAX_ITERATIONS, --max-iterations MAX_ITERATIONS, --iterations MAX_ITERATIONS" in text
    assert "(default: 200)" in text and "(default: logs)" in text and "(default: exact)" in text
    assert "G1-Walk-Clock-Fast-v1" in text and "G1-Walk-Smooth-v0" in text


def test_the_module_prints_a_bad_count_as_one_line_and_exits_1(tmp_path):
    done = subprocess.run([sys.executable, "-m", "isaac_adapter.app", "train", "--num_envs", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == "error: --num_envs 0: give a positive number of envs per process\n"


def test_training_with_video_records_a_clip_every_interval_into_the_run_folder(tmp_path):
    from test_g1_play import _egl_renders

    if not _egl_renders():
        pytest.skip("no headless OpenGL (EGL) for MuJoCo here")
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "isaac_adapter.app", "train", "--num_envs", "2", "--num_steps_per_env", "4",
           "--max_iterations", "3", "--save_interval", "0", "--video", "--video_interval", "2", "--video_length", "0.2",
           "--size", "32x24", "--log_dir", str(run)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    from PIL import Image

    # a clip at iteration 2 (the interval) and at the end (3); 0.2 s of 20 ms steps, every 3rd at 17 fps: 4 frames
    assert sorted(p.name for p in (run / "videos" / "train").iterdir()) == ["it_2.gif", "it_3.gif"]
    for clip in (run / "videos" / "train").iterdir():
        with Image.open(clip) as gif:
            assert gif.size == (32, 24) and gif.n_frames == 4
    # each stretch of training ends in a checkpoint: the clip's policy is saved
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_2.pt", "model_3.pt"]
    assert f"clip: {run / 'videos' / 'train' / 'it_2.gif'}" in done.stdout


# -- outputs go to the run folder or --log_root, never into the checkout -------------------------------

def test_play_and_eval_write_into_the_run_folder_or_under_log_root(tmp_path):
    from isaac_adapter.app.play import output_dir

    args = flags.parse(flags.PLAY, ["--log_root", str(tmp_path / "logs")])
    # a shipped checkpoint lies in the checkout: its outputs go under --log_root
    assert output_dir(args, SHIPPED, "G1-Walk-Clock-v0") == tmp_path / "logs" / "G1-Walk-Clock-v0" / "g1_clock_it1296"
    run = tmp_path / "logs" / "demo" / "2026-12-01_10-00-00"
    assert output_dir(args, run / "model_5.pt", "demo") == run  # a run folder: its own (as Isaac Lab's play.py)
    elsewhere = tmp_path / "mine" / "model_5.pt"
    assert output_dir(args, elsewhere, "demo") == elsewhere.parent
    given = flags.parse(flags.PLAY, ["--log_dir", str(tmp_path / "here")])
    assert output_dir(given, SHIPPED, "G1-Walk-Clock-v0") == tmp_path / "here"


def test_eval_plots_go_under_log_root_not_into_the_working_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    g1_walk.main(["eval", str(SHIPPED), "--num_envs", "2", "--horizon_s", "0.2", "--sweep", "0.60", "--log_root", "out"])
    plots = tmp_path / "out" / "G1-Walk-Clock-v0" / "g1_clock_it1296" / "eval"
    assert {p.name for p in plots.iterdir()} >= {"survival.png", "causes.png"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert f"wrote {Path('out', 'G1-Walk-Clock-v0', 'g1_clock_it1296', 'eval', 'survival.png')}" in capsys.readouterr().out


def test_export_of_the_shipped_checkpoint_writes_the_actor_and_its_deploy_yaml(tmp_path, capsys):
    g1_walk.main(["--export", str(SHIPPED), "--export-dir", str(tmp_path)])
    assert {p.name for p in tmp_path.iterdir()} == {"policy.onnx", "policy.pt", "policy.json", "deploy.yaml"}
    config = yaml.safe_load((tmp_path / "deploy.yaml").read_text())
    assert config["task"] == "G1-Walk-Clock-v0" and config["num_obs"] == 98 and config["gait_period_s"] == 0.8
    assert f"run it: python deploy/deploy_mujoco.py --config {tmp_path / 'deploy.yaml'}" in capsys.readouterr().out


def test_export_errors_are_one_line(tmp_path, monkeypatch):
    assert "--export nope.pt: no such checkpoint" in one_line_error(["--export", "nope.pt"], monkeypatch)
    assert "was trained on G1-Walk-Clock-v0, not --task G1-Walk-v0" in one_line_error(
        ["--export", str(SHIPPED), "--task", "G1-Walk-v0"], monkeypatch)


def test_the_resume_command_a_stopped_run_prints_resumes_from_its_checkpoint(tmp_path):
    import shlex

    ckpt = tmp_path / "model_7.pt"
    ckpt.write_bytes(b"")
    argv = ["--num_envs", "4", "--resume", "--load_run", "2026-.*", "--checkpoint=model_3.pt", "env.rewards.joint_vel=-0.003"]
    from isaac_adapter.app import train as app_train

    words = shlex.split(app_train.resume_command(argv, ckpt))
    assert words[0] == "python" and (ROOT / words[1]).resolve() == ROOT / "examples" / "g1_walk.py"
    assert words[2:] == ["--num_envs", "4", "env.rewards.joint_vel=-0.003", "--checkpoint", str(ckpt)]
    args = g1_walk.parse_args(words[2:])
    assert app_train.resume_path(args, "demo") == ckpt and args.num_envs == 4


def test_training_picks_egl_only_where_libegl_is(monkeypatch):
    """Without libEGL, MuJoCo's EGL backend fails inside ``import mujoco``: the entry points then leave
    MUJOCO_GL unset, so training starts (and a clip says it could not render) instead of crashing."""
    from isaac_adapter import app

    monkeypatch.setattr(app.sys, "platform", "linux")
    for library, expected in ((None, None), ("libEGL.so.1", "egl")):
        environ: dict[str, str] = {}
        monkeypatch.setattr(app.os, "environ", environ)
        monkeypatch.setattr(app.ctypes.util, "find_library", lambda name, found=library: found if name == "EGL" else None)
        app.headless_rendering(["--task", "G1-Walk-Clock-CPU-v0"])
        assert environ.get("MUJOCO_GL") == expected
