"""End to end through Runner: learning the right value, exact resume, ONNX export, env contract errors."""

import pytest
import torch

from ppo_bootstrap import EpisodeProtocolError, PolicyConfig, PPOConfig, Runner, RunnerConfig, StepResult
from ppo_bootstrap.envs import TimeLimitEnv
from scripted_env import ScriptedEnv

TRUE_VALUE = 1.0 / (1.0 - 0.98)  # reward 1 forever, gamma 0.98: 50


def value_run(timeout_bootstrap: str, iterations: int = 110) -> float:
    env = TimeLimitEnv(num_envs=64, episode_length=100, privileged_dim=2, seed=1)
    cfg = RunnerConfig(
        num_steps_per_env=24, console=False, seed=1,
        ppo=PPOConfig(gamma=0.98, learning_rate=3e-3, schedule="fixed", timeout_bootstrap=timeout_bootstrap),
        policy=PolicyConfig(actor_hidden=(32, 32), critic_hidden=(32, 32)),
    )
    runner = Runner(env, cfg)
    runner.learn(iterations)
    probe = torch.randn(2000, 6, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        return runner.policy.value(probe, None)[0].mean().item()


def test_time_limited_endless_task_learns_true_value_only_with_exact_bootstrap():
    exact = value_run("exact")
    as_termination = value_run("none")
    assert abs(exact - TRUE_VALUE) < 0.05 * TRUE_VALUE, exact
    # Timeouts read as falls: the critic can only learn the mean truncated return (~29 here).
    assert as_termination < 0.7 * TRUE_VALUE, as_termination


def small_cfg(log_dir=None, **kw) -> RunnerConfig:
    return RunnerConfig(num_steps_per_env=8, console=False, log_dir=log_dir, save_interval=0, seed=3,
                        policy=PolicyConfig(actor_hidden=(16,), critic_hidden=(16,)), **kw)


def test_resume_continues_exactly(tmp_path):
    env = TimeLimitEnv(num_envs=8, episode_length=10, privileged_dim=1, fall_probability=0.05, seed=2)
    runner = Runner(env, small_cfg())
    runner.learn(2)
    runner.save(tmp_path / "ckpt.pt")
    runner.learn(2)
    expected = runner.policy.state_dict()

    fresh_env = TimeLimitEnv(num_envs=8, episode_length=10, privileged_dim=1, fall_probability=0.05, seed=99)
    resumed = Runner(fresh_env, small_cfg())
    resumed.load(tmp_path / "ckpt.pt")
    assert resumed.iteration == 2
    resumed.learn(2)
    assert resumed.iteration == 4
    for key, value in resumed.policy.state_dict().items():
        assert torch.equal(value, expected[key]), key
    timing = ("perf/learning_s", "perf/collection_s", "perf/steps_per_s")
    assert {k: v for k, v in resumed.last_stats.items() if k not in timing} == {
        k: v for k, v in runner.last_stats.items() if k not in timing
    }


def test_learn_writes_tensorboard_and_checkpoints(tmp_path):
    env = TimeLimitEnv(num_envs=8, episode_length=10)
    runner = Runner(env, small_cfg(log_dir=str(tmp_path)))
    runner.learn(2)
    assert (tmp_path / "model_2.pt").exists()
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())


@pytest.mark.parametrize("recurrent", [None, "gru"])
def test_onnx_export_matches_policy(tmp_path, recurrent):
    ort = pytest.importorskip("onnxruntime")
    env = TimeLimitEnv(num_envs=4, episode_length=10, obs_dim=5)
    cfg = small_cfg()
    cfg.policy.recurrent = recurrent
    runner = Runner(env, cfg)
    runner.learn(1)  # moves the normalizer off identity
    runner.export_onnx(tmp_path / "actor.onnx")
    session = ort.InferenceSession(str(tmp_path / "actor.onnx"))
    obs = torch.randn(3, 5)
    with torch.no_grad():
        state = runner.policy.initial_state(3, torch.device("cpu"))[0]
        expected, _ = runner.policy.act_inference(obs, state)
    feeds = {"obs": obs.numpy()}
    if recurrent:
        feeds["state_in"] = state.numpy()
    out = session.run(None, feeds)[0]
    torch.testing.assert_close(torch.from_numpy(out), expected, rtol=1e-5, atol=1e-5)


class BrokenEnv(ScriptedEnv):
    """Breaks the contract on the second step in one of several ways."""

    def __init__(self, fault: str):
        super().__init__(3, {(1, 1): (False, True)})
        self.fault = fault

    def step(self, actions):
        result = super().step(actions)
        if self.t != 2:
            return result
        if self.fault == "missing_final":
            return StepResult(result.obs, result.reward, result.terminated, result.truncated,
                              {k: v[:0] for k, v in result.final_obs.items()}, result.final_env_ids[:0])
        if self.fault == "extra_final":
            ids = torch.tensor([0, 1])
            return StepResult(result.obs, result.reward, result.terminated, result.truncated,
                              {k: torch.zeros(2, 1) for k in result.obs}, ids)
        if self.fault == "nan_final":
            result.final_obs["policy"][:] = float("nan")
        if self.fault == "nan_obs":
            result.obs["policy"][0] = float("nan")
        if self.fault == "nan_reward":
            result.reward[2] = float("inf")
        if self.fault == "int_flags":
            result.truncated = result.truncated.int()
        if self.fault == "short_flags":
            result.terminated = result.terminated[:2]
        return result


@pytest.mark.parametrize(
    "fault,message",
    [("missing_final", r"final_obs missing for env ids \[1\]"),
     ("extra_final", r"env ids \[0\] that did not end"),
     ("nan_final", r"final_obs\['policy'\] has NaN or inf for env ids \[1\]"),
     ("nan_reward", r"reward has NaN or inf for env ids \[2\]"),
     ("nan_obs", r"obs\['policy'\] has NaN or inf for env ids \[0\]"),
     ("int_flags", r"truncated must be a bool tensor"),
     ("short_flags", r"terminated must have shape \(3,\), got \(2,\)")],
)
def test_contract_violations_raise_before_any_update(tmp_path, fault, message):
    runner = Runner(BrokenEnv(fault), RunnerConfig(num_steps_per_env=4, console=False,
                                                   policy=PolicyConfig(actor_hidden=(4,), critic_hidden=(4,))))
    runner.save(tmp_path / "last.pt")
    before = {k: v.clone() for k, v in runner.policy.state_dict().items()}
    with pytest.raises(EpisodeProtocolError, match=message):
        runner.learn(1)
    assert runner.iteration == 0
    for key, value in runner.policy.state_dict().items():
        assert torch.equal(value, before[key]), key
    torch.load(tmp_path / "last.pt", weights_only=False)  # the last checkpoint is intact
