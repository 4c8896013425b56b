"""What a run tells its user: rsl_rl's TensorBoard tags, the compact console block, the console setting."""

import json

import pytest
import torch

from ppo_bootstrap import PolicyConfig, Runner, RunnerConfig
from ppo_bootstrap.envs import TimeLimitEnv
from ppo_bootstrap.logger import Logger, console_mode, format_compact, format_progress

# rsl-rl-lib 5.5's rsl_rl/utils/logger.py: the tags it writes for the scalars this library also has
RSL_RL_TAGS = {
    "Loss/value", "Loss/surrogate", "Loss/entropy", "Loss/learning_rate", "Policy/mean_std",
    "Perf/total_fps", "Perf/collection_time", "Perf/learning_time", "Train/mean_reward", "Train/mean_episode_length",
}


class LoggingEnv(TimeLimitEnv):
    """Logs as an Isaac Lab manager-based env does (``extras["log"]``), plus one key without a group."""

    def step(self, actions):
        result = super().step(actions)
        result.info["log"] = {"Episode_Reward/alive": torch.tensor(0.5), "Episode_Termination/time_out": torch.tensor(0.125),
                              "curriculum": 3.0}
        return result


def test_tensorboard_has_rsl_rl_tags_and_metrics_jsonl_keeps_its_keys(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = RunnerConfig(num_steps_per_env=8, console=False, log_dir=str(tmp_path), save_interval=0,
                       policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,)))
    Runner(LoggingEnv(num_envs=4, episode_length=5), cfg).learn(2)
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert RSL_RL_TAGS <= tags
    assert {"Episode_Reward/alive", "Episode_Termination/time_out", "Episode/curriculum"} <= tags  # as rsl_rl names extras
    assert {"episodes/ended", "timeout_bootstrap/mean", "policy/kl"} <= tags  # ours, under their own names
    assert not {"loss/value", "perf/steps_per_s", "env/Episode_Reward/alive"} & tags  # each scalar once

    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [1, 2]

    def scalar(tag: str, step: int) -> float:
        return next(e.value for e in events.Scalars(tag) if e.step == step)

    for step, row in zip((1, 2), rows):
        assert scalar("Loss/value", step) == pytest.approx(row["loss/value"])
        assert scalar("Perf/total_fps", step) == pytest.approx(row["perf/steps_per_s"])
        assert scalar("Perf/collection_time", step) == pytest.approx(row["perf/collection_s"])
        assert scalar("Policy/mean_std", step) == pytest.approx(row["policy/mean_action_std"])
        # rsl-rl-lib 2.x-3.x's spellings of the same three scalars, for runs of Isaac Lab 2
        assert scalar("Loss/value_function", step) == pytest.approx(row["loss/value"])
        assert scalar("Policy/mean_noise_std", step) == pytest.approx(row["policy/mean_action_std"])
        assert scalar("Perf/collection time", step) == pytest.approx(row["perf/collection_s"])
        assert scalar("Loss/learning_rate", step) == pytest.approx(row["policy/learning_rate"])
        assert scalar("Train/mean_episode_length", step) == pytest.approx(5.0)  # every episode runs to the limit
        # the env logs the same value at every step: its mean per step is that value
        assert scalar("Episode_Reward/alive", step) == pytest.approx(0.5)
        assert scalar("Episode_Termination/time_out", step) == pytest.approx(0.125)
        assert scalar("Episode/curriculum", step) == pytest.approx(3.0)
        assert row["env/Episode_Reward/alive"] == pytest.approx(0.5)


def stats(env_logs: int = 0) -> dict[str, float]:
    out = {"perf/steps_per_s": 12345.0, "perf/collection_s": 0.5, "perf/learning_s": 0.25, "loss/value": 0.125,
           "loss/surrogate": -0.01, "loss/entropy": 2.0, "policy/kl": 0.01, "policy/learning_rate": 1e-3,
           "policy/mean_action_std": 0.75, "episodes/mean_return_100": 4.5, "episodes/mean_length_100": 90.0,
           "episodes/ended": 10.0, "episodes/terminated": 4.0, "episodes/truncated_only": 6.0,
           "timeout_bootstrap/mean": 12.0, "perf/elapsed_s": 3725.0, "perf/eta_s": 100.0}
    out.update({f"env/Episode_Reward/term_{i}": float(i) for i in range(env_logs)})
    if env_logs:
        out["env/Episode_Termination/base_contact"] = 0.25
    return out


def test_compact_block_is_rsl_rl_sized_and_ends_with_the_eta():
    block = format_compact(3, 10, 4096, stats(env_logs=40))
    lines = block.splitlines()
    assert 15 <= len(lines) <= 20, block
    assert "Learning iteration 3/10" in lines[0]
    assert lines[-1].split() == ["ETA:", "00:01:40"] and lines[-2].split() == ["elapsed:", "01:02:05"]
    text = " ".join(block.split())
    assert "steps per second: 12,345 (collection 0.50 s, learning 0.25 s)" in text
    assert "value / surrogate loss: 0.1250 / -0.0100" in text and "mean action noise std: 0.750" in text
    assert "mean reward (last 100 episodes): 4.500 (0.0500 per step)" in text  # 4.5 over 90 steps
    assert "mean episode length: 90.0 steps" in text and "kl / learning rate: 0.0100 / 1.00e-03" in text
    assert "episodes ended: 10: 4 falls, 6 timeouts" in text
    # falls by cause first, then the env's order; the rest is one console setting away
    assert "Episode_Termination/base_contact: 0.2500 Episode_Reward/term_0: 0.0000" in text
    assert "Episode_Reward/term_2: 2.0000" in text and "term_3:" not in text
    assert "37 more: console='full'" in text
    full = format_progress(3, 10, 4096, stats(env_logs=40))
    assert len(full.splitlines()) > 45 and "term_39: 39.0000" in full and full.splitlines()[-1].split() == ["ETA:", "00:01:40"]


@pytest.mark.parametrize("console,printed", [("compact", "mean action noise std"), ("full", "entropy / kl"), ("off", None)])
def test_logger_prints_the_block_its_console_setting_names(capsys, console, printed):
    logger = Logger(None, console)
    logger.start(0, 2)
    logger.log(1, 100, stats())
    out = capsys.readouterr().out
    assert (printed in out) if printed else out == ""


def test_console_setting_takes_the_old_booleans_and_refuses_others():
    assert RunnerConfig(console=True).console == "compact" and RunnerConfig().console == "compact"
    assert RunnerConfig(console=False).console == "off" and RunnerConfig(console="False").console == "off"
    assert RunnerConfig(console="full").console == "full"
    with pytest.raises(ValueError, match="console must be one of compact, full, off"):
        RunnerConfig(console="verbose")
