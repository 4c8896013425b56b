"""End to end through Runner: learning the right value, exact resume, ONNX export, env contract errors and warnings."""

import concurrent.futures as cf
import multiprocessing
import re
import warnings

import pytest
import torch

from ppo_bootstrap import EpisodeProtocolError, PolicyConfig, PPOConfig, Runner, RunnerConfig, StepResult
from ppo_bootstrap.envs import TimeLimitEnv
from ppo_bootstrap.episode import EpisodeProtocolWarning, FlagWatch, check_contract, declared_time_limit
from export_check import assert_same_rollout, expected_rollout, onnx_rollout
from scripted_env import ScriptedEnv

TRUE_VALUE = 1.0 / (1.0 - 0.98)  # reward 1 forever, gamma 0.98: 50


def value_run(timeout_bootstrap: str, iterations: int = 110, overlap_update: bool = False) -> float:
    env = TimeLimitEnv(num_envs=64, episode_length=100, privileged_dim=2, seed=1)
    cfg = RunnerConfig(
        num_steps_per_env=24, console=False, seed=1, overlap_update=overlap_update,
        ppo=PPOConfig(gamma=0.98, learning_rate=3e-3, schedule="fixed", timeout_bootstrap=timeout_bootstrap),
        policy=PolicyConfig(actor_hidden=(32, 32), critic_hidden=(32, 32)),
    )
    runner = Runner(env, cfg)
    runner.learn(iterations)
    probe = torch.randn(2000, 6, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        return runner.policy.value(probe, None)[0].mean().item()


def _one_thread() -> None:
    torch.set_num_threads(1)  # as conftest.py sets for this process


def test_time_limited_endless_task_learns_true_value_only_with_exact_bootstrap():
    # the two runs are independent: side by side, a process and one thread each
    spawn = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(2, mp_context=spawn, initializer=_one_thread) as pool:
        exact, as_termination = pool.map(value_run, ["exact", "none"])
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
    assert {k: v for k, v in resumed.last_stats.items() if not k.startswith("perf/")} == {
        k: v for k, v in runner.last_stats.items() if not k.startswith("perf/")
    }


def test_learn_writes_tensorboard_and_checkpoints(tmp_path):
    env = TimeLimitEnv(num_envs=8, episode_length=10)
    runner = Runner(env, small_cfg(log_dir=str(tmp_path)))
    runner.learn(2)
    assert (tmp_path / "model_2.pt").exists()
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())


@pytest.mark.parametrize("recurrent", [None, "gru"])
def test_onnx_export_matches_policy(tmp_path, recurrent):
    env = TimeLimitEnv(num_envs=4, episode_length=10, obs_dim=5)
    cfg = small_cfg()
    cfg.policy.recurrent = recurrent
    runner = Runner(env, cfg)
    runner.learn(1)  # moves the normalizer off identity
    runner.export_onnx(tmp_path / "actor.onnx")
    obs_seq = torch.randn(2, 3, 5)  # two steps of three envs: the memory carries over
    state = runner.policy.initial_state(3, torch.device("cpu"))[0]
    assert_same_rollout(onnx_rollout(tmp_path / "actor.onnx", obs_seq, state), expected_rollout(runner.policy, obs_seq))


class BrokenEnv(ScriptedEnv):
    """Breaks the contract on the second step, where env 1 times out, in one of several ways.

    ``nan_env`` also blows up that env's observation on the same step.
    """

    def __init__(self, fault: str, nan_env: int | None = None):
        super().__init__(3, {(1, 1): (False, True)}, privileged=True)
        self.fault, self.nan_env = fault, nan_env

    def step(self, actions):
        result = super().step(actions)
        if self.t != 2:
            return result
        if self.nan_env is not None:
            result.obs["policy"][self.nan_env] = float("nan")
        if self.fault == "missing_final":
            return StepResult(result.obs, result.reward, result.terminated, result.truncated,
                              {k: v[:0] for k, v in result.final_obs.items()}, result.final_env_ids[:0])
        if self.fault == "extra_final":
            ids = torch.tensor([0, 1])
            return StepResult(result.obs, result.reward, result.terminated, result.truncated,
                              {k: torch.zeros(2, *v.shape[1:]) for k, v in result.obs.items()}, ids)
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
        if self.fault == "wide_reward":
            result.reward = result.reward.unsqueeze(-1)
        if self.fault == "flag_device":
            result.truncated = result.truncated.to("meta")
        if self.fault == "list_ids":
            result.final_env_ids = result.final_env_ids.tolist()
        if self.fault in ("wide_obs", "wide_obs_and_final"):
            result.obs["policy"] = result.obs["policy"].repeat(1, 2)
        if self.fault == "wide_obs_and_final":
            result.final_obs["policy"] = result.final_obs["policy"].repeat(1, 2)
        if self.fault == "lost_critic":
            del result.obs["critic"], result.final_obs["critic"]
        return result

    def reset_envs(self, env_ids):
        self.x[env_ids] = -5.0
        fresh = self._groups(self.x[env_ids])
        if self.fault == "wide_reset_rows":
            fresh["policy"] = fresh["policy"].repeat(1, 2)
        return fresh


# faults of the contract that need no host sync to see, and the message each must raise
SHAPE_FAULTS = [
    ("int_flags", r"truncated must be a bool tensor"),
    ("short_flags", r"terminated must have shape \(3,\), got \(2,\)"),
    ("wide_reward", r"reward must have shape \(3,\), got \(3, 1\)"),
    ("flag_device", r"truncated is on meta, not on the env's device cpu"),
    ("list_ids", r"final_env_ids must be a torch.Tensor, got list \[1\]"),
    ("wide_obs", r"^obs\['policy'\] has shape \(3, 2\), expected \(3, 1\) for all env ids"),
    ("wide_obs_and_final", r"^obs\['policy'\] has shape \(3, 2\), expected \(3, 1\) for all env ids"),
    ("lost_critic", r"^obs groups \['policy'\] differ from the reset\(\) groups \['critic', 'policy'\] for all env ids"),
]
ID_FAULTS = [
    ("missing_final", r"final_obs missing for env ids \[1\]"),
    ("extra_final", r"env ids \[0\] that did not end"),
]
NAN_FAULTS = [
    ("nan_final", r"final_obs\['policy'\] has NaN or inf for env ids \[1\]"),
    ("nan_reward", r"reward has NaN or inf for env ids \[2\]"),
    ("nan_obs", r"obs\['policy'\] has NaN or inf for env ids \[0\]"),
]


def tiny_cfg(**kw) -> RunnerConfig:
    return RunnerConfig(num_steps_per_env=4, console=False, policy=PolicyConfig(actor_hidden=(4,), critic_hidden=(4,)), **kw)


def assert_raises_before_any_update(tmp_path, env, message, **cfg):
    runner = Runner(env, tiny_cfg(**cfg))
    runner.save(tmp_path / "last.pt")
    before = {k: v.clone() for k, v in runner.policy.state_dict().items()}
    with pytest.raises(EpisodeProtocolError, match=message):
        runner.learn(1)
    assert runner.iteration == 0
    for key, value in runner.policy.state_dict().items():
        assert torch.equal(value, before[key]), key
    torch.load(tmp_path / "last.pt", weights_only=False)  # the last checkpoint is intact


@pytest.mark.parametrize("fault,message", NAN_FAULTS)
def test_non_finite_values_raise_before_any_update(tmp_path, fault, message):
    assert_raises_before_any_update(tmp_path, BrokenEnv(fault), message)


@pytest.mark.parametrize("non_finite_obs", ["error", "reset"])
@pytest.mark.parametrize("fault,message", SHAPE_FAULTS + ID_FAULTS)
def test_contract_violations_raise_before_any_update_and_before_a_nan_elsewhere_is_handled(
    tmp_path, fault, message, non_finite_obs
):
    # env 2's observation blows up on the same step: neither its error nor its repair may hide the fault
    assert_raises_before_any_update(tmp_path, BrokenEnv(fault, nan_env=2), message, non_finite_obs=non_finite_obs)


@pytest.mark.parametrize("fault,message", SHAPE_FAULTS + [
    ("wide_reset_rows", r"reset_envs\(\) obs\['policy'\] has shape \(1, 2\), expected \(1, 1\) for env ids \[2\]"),
])
def test_blow_up_recovery_without_validation_still_checks_the_shapes_it_relies_on(tmp_path, fault, message):
    assert_raises_before_any_update(tmp_path, BrokenEnv(fault, nan_env=2), message,
                                    non_finite_obs="reset", validate_env_output=False)


class TimeOutsEnv(BrokenEnv):
    """Env 1's episode ends at steps 1 and 5 (one in each 4-step rollout) with ``flags`` =
    ``(terminated, truncated)``, and every step reports the time-outs in ``info["time_outs"]``."""

    TIME_OUTS = {1, 5}

    def __init__(self, flags, nan_env=None):
        super().__init__("none", nan_env)
        self.ends = {(t, 1): flags for t in self.TIME_OUTS}

    def step(self, actions):
        result = super().step(actions)
        result.info["time_outs"] = torch.tensor([False, self.t - 1 in self.TIME_OUTS, False])
        return result


def protocol_warnings(runner, rollouts):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(rollouts):
            runner._collect()
    return [str(w.message) for w in caught if issubclass(w.category, EpisodeProtocolWarning)]


@pytest.mark.parametrize(
    "env,expected",
    [(TimeOutsEnv((True, False)), [r"^info\['time_outs'\] differs from truncated for env ids \[1\]"]),
     (TimeOutsEnv((False, True)), []),
     (TimeOutsEnv((False, True), nan_env=2), [])],  # a blow-up made truncated by the Runner is no disagreement
    ids=["timeout_sent_as_terminated", "timeout_sent_as_truncated", "blow_up_elsewhere"],
)
@pytest.mark.parametrize("validate", [True, False])
def test_time_outs_that_disagree_with_truncated_warn_once_naming_env_ids(env, expected, validate):
    runner = Runner(env, tiny_cfg(validate_env_output=validate, non_finite_obs="reset"))
    messages = protocol_warnings(runner, 2)  # both rollouts hold a disagreement: one warning
    assert len(messages) == len(expected), messages
    for message, pattern in zip(messages, expected):
        assert re.search(pattern, message), message


class DeclaredLimitEnv(ScriptedEnv):
    """Declares a time limit of 3 steps but never truncates: env 0 times out at step 2 (its 3rd
    step, on the limit), env 1 falls at step 1, env 2 runs on."""

    max_episode_length = 3

    def __init__(self):
        super().__init__(3, {(2, 0): (False, True), (1, 1): (True, False)})


@pytest.mark.parametrize("validate", [True, False])
def test_env_that_runs_past_its_declared_time_limit_warns_once_naming_env_ids(validate):
    runner = Runner(DeclaredLimitEnv(), tiny_cfg(validate_env_output=validate))
    # rollout 1: env 2's 4th step (t=3) passes the limit; envs 0 and 1 restarted within it.
    # rollout 2: all three pass it, but the warning was given already.
    messages = protocol_warnings(runner, 2)
    assert len(messages) == 1, messages
    assert messages[0].startswith("env ids [2] ran past the time limit max_episode_length=3 without truncated")


def test_time_limited_env_with_falls_and_blow_ups_raises_no_time_limit_warning():
    env = TimeLimitEnv(num_envs=16, episode_length=5, fall_probability=0.1, nan_probability=0.05)
    assert declared_time_limit(env) == 5
    runner = Runner(env, tiny_cfg(non_finite_obs="reset"))
    assert protocol_warnings(runner, 12) == []  # 48 steps: every env timed out several times


def test_checks_that_run_on_every_step_without_validation_read_no_tensor_data():
    # meta tensors have shapes but no data: any read of values (a host sync on GPU) raises
    def meta(*shape, dtype=torch.float32):
        return torch.empty(*shape, dtype=dtype, device="meta")

    flags = meta(3, dtype=torch.bool)
    result = StepResult({"policy": meta(3, 1), "critic": meta(3, 2)}, meta(3), flags, flags,
                        {"policy": meta(1, 1), "critic": meta(1, 2)}, meta(1, dtype=torch.long), {"time_outs": flags})
    check_contract(3, result, {"policy": (1,), "critic": (2,)}, "meta", ids=False)
    watch = FlagWatch(time_limit=3)
    watch.flags(result.info, result.truncated)
    watch.lengths(meta(3), result.truncated)
    with pytest.raises(NotImplementedError):  # the ids check reads them
        check_contract(3, result, {"policy": (1,), "critic": (2,)}, "meta", ids=True)


def test_log_sums_match_a_float64_recount_whatever_the_keys_do():
    from ppo_bootstrap.runner import LogSums

    g = torch.Generator().manual_seed(0)
    steps = []
    for t in range(9):
        log = {"a": torch.rand((), generator=g), "b": torch.rand(1, generator=g), "ramp": 0.1 * t}
        if t >= 5:  # a key appears mid-rollout: a new vector, the old one kept
            log["late"] = torch.tensor(float(t))
        if t == 7:
            log["ramp"] = torch.tensor(0.7)  # the same key once as a tensor
        steps.append(log)
    sums = LogSums()
    for log in steps:
        sums.add(log)
    expected: dict[str, float] = {}
    for log in steps:
        for key, value in log.items():
            expected[key] = expected.get(key, 0.0) + float(value)
    got = sums.totals()
    assert set(got) == set(expected)
    for key in expected:
        assert got[key] == pytest.approx(expected[key], rel=1e-6), key
    means = sums.means(len(steps))  # per step of the rollout, as the runner logs them
    for key in expected:
        assert means[key] == pytest.approx(expected[key] / len(steps), rel=1e-6), key
