"""The G1 task's reward and episode bookkeeping against a float64 recount from the reward terms.

The task keeps the per-episode reward sums and the last finished episode's statistics as one
matrix each (the ``episode_sums`` / ``last_episode_stats`` dicts are column views), so that a step
costs a few ops instead of several per term. This recounts every number from the unweighted terms
of each step, env by env, in float64, on real MuJoCo physics with random actions and short episodes
(timeouts and falls both happen).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from ppo_bootstrap.episode import sparse

from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.config import clock_ramp_config

N, STEPS = 6, 90


def test_rewards_sums_and_episode_logs_match_a_float64_recount() -> None:
    # a ramp that moves during the run (the weights of each step are read at its step counter); a
    # collapse height just under standing, so that random actions end some episodes by a fall
    cfg = clock_ramp_config(num_envs=N, seed=3, episode_length_s=0.8, train_collapse_height=0.7,
                            reward_ramps=[{"term": "action_rate", "weight": -1.0, "start_step": 5, "end_step": 60}])
    env = G1WalkEnv(cfg, backend="mujoco")
    env.reset()
    recorded: list[dict[str, torch.Tensor]] = []
    terms_of = env._reward_terms

    def recording() -> dict[str, torch.Tensor]:
        parts = terms_of()
        recorded.append({k: v.double().clone() for k, v in parts.items()})
        return parts

    env._reward_terms = recording
    dt = cfg.policy_dt
    sums = defaultdict(lambda: torch.zeros(N, dtype=torch.float64))  # this episode's, per term
    last = {}  # env -> {term: sum / seconds, "length_s": seconds} of its last finished episode
    steps_in_episode = torch.zeros(N, dtype=torch.int64)
    ends = {"terminated": 0, "truncated": 0}
    gen = torch.Generator().manual_seed(0)
    for _ in range(STEPS):
        result = sparse(env.step(0.8 * torch.randn(N, env.num_actions, generator=gen)))
        parts = recorded[-1]
        weights = cfg.reward_weights(env.common_step_counter)
        expected = sum(weights[name] * dt * value for name, value in parts.items())
        assert result.reward.double().tolist() == pytest.approx(expected.tolist(), abs=1e-5)
        steps_in_episode += 1
        for name, value in parts.items():
            sums[name] += weights[name] * dt * value
        for i in result.final_env_ids.tolist():
            seconds = steps_in_episode[i].item() * dt
            last[i] = {name: sums[name][i].item() / seconds for name in parts} | {"length_s": seconds}
            for name in parts:
                sums[name][i] = 0.0
            steps_in_episode[i] = 0
        ends["terminated"] += int(result.terminated.sum())
        ends["truncated"] += int(result.truncated.sum())
        # the running sums, term by term (the dict entries are views of the task's matrix)
        for name in parts:
            assert env.episode_sums[name].double().tolist() == pytest.approx(sums[name].tolist(), abs=1e-5)
        # the logged means over the envs that have finished an episode
        log = result.info["log"]
        if last:
            for name in parts:
                mean = sum(stats[name] for stats in last.values()) / len(last)
                assert log[f"Episode_Reward/{name}"].item() == pytest.approx(mean, abs=1e-5)
            assert log["Episode/length_s"].item() == pytest.approx(
                sum(stats["length_s"] for stats in last.values()) / len(last), abs=1e-6)
    assert ends["terminated"] > 0 and ends["truncated"] > 0, ends  # both ways of ending were exercised
    assert len(last) == N
    assert len(recorded[0]) == len(cfg.reward_weights(0))  # the clock task: every term of RewardWeights

    # the state dict round trip writes into the same columns (views stay views)
    state = env.state_dict()
    other = G1WalkEnv(cfg, backend="mujoco")
    other.reset()
    other.load_state_dict(state)
    for name in env.episode_sums:
        assert torch.equal(other.episode_sums[name], env.episode_sums[name])
        assert other.episode_sums[name].data_ptr() != env.episode_sums[name].data_ptr()
    assert torch.equal(other._reward_sums, env._reward_sums)
    assert torch.equal(other._episode_stats, env._episode_stats)
