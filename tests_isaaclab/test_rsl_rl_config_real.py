"""RunnerConfig.from_rsl_rl on Isaac Lab's own G1 agent config, and Runner.load of a file rsl-rl-lib writes now.

Needs Isaac Lab (``isaaclab_rl``, ``isaaclab_tasks``) and rsl-rl-lib; no simulator is started.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata

import pytest
import torch

pytest.importorskip("isaaclab_rl")
rsl_rl = pytest.importorskip("rsl_rl")

from isaaclab_rl.rsl_rl import handle_deprecated_rsl_rl_cfg  # noqa: E402
from isaaclab_tasks.core.velocity.config.g1.agents.rsl_rl_ppo_cfg import G1FlatPPORunnerCfg  # noqa: E402

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig, StepResult  # noqa: E402
from ppo_bootstrap.rsl_rl import env_obs_groups  # noqa: E402


def test_g1_flat_agent_config_maps_field_by_field():
    agent = G1FlatPPORunnerCfg()
    cfg = RunnerConfig.from_rsl_rl(agent)
    a = agent.algorithm
    assert (cfg.num_steps_per_env, cfg.max_iterations, cfg.save_interval, cfg.seed) == (
        agent.num_steps_per_env, agent.max_iterations, agent.save_interval, agent.seed)
    assert cfg.validate_env_output == agent.check_for_nan
    assert cfg.policy == PolicyConfig(actor_hidden=tuple(agent.actor.hidden_dims),
                                      critic_hidden=tuple(agent.critic.hidden_dims), activation=agent.actor.activation,
                                      init_noise_std=agent.actor.distribution_cfg.init_std,
                                      std_type=agent.actor.distribution_cfg.std_type,
                                      obs_normalization=agent.actor.obs_normalization)
    assert cfg.ppo == PPOConfig(num_learning_epochs=a.num_learning_epochs, num_mini_batches=a.num_mini_batches,
                                clip_param=a.clip_param, gamma=a.gamma, lam=a.lam, value_loss_coef=a.value_loss_coef,
                                use_clipped_value_loss=a.use_clipped_value_loss, entropy_coef=a.entropy_coef,
                                learning_rate=a.learning_rate, max_grad_norm=a.max_grad_norm, schedule=a.schedule,
                                desired_kl=a.desired_kl,
                                normalize_advantage_per_mini_batch=a.normalize_advantage_per_mini_batch,
                                clip_grad_per_network=True,  # rsl-rl-lib 5's PPO clips actor and critic each
                                shuffle="once")  # and draws one order of the samples per update
    assert env_obs_groups(agent) == {"policy": "policy"}  # the G1 critic reads the actor's group
    # the dict train.py hands OnPolicyRunner, and the config after Isaac Lab's own version handling
    assert RunnerConfig.from_rsl_rl(agent.to_dict()) == cfg
    assert RunnerConfig.from_rsl_rl(handle_deprecated_rsl_rl_cfg(G1FlatPPORunnerCfg(), importlib.metadata.version("rsl-rl-lib"))) == cfg


def test_the_app_trains_isaac_labs_own_task_with_its_registered_agent_config():
    """``examples/g1_walk.py --task Isaac-Velocity-Flat-G1`` takes the agent config Isaac Lab registers
    for the task (as Isaac Lab's train.py does), with the command line's flags on top."""
    from isaac_adapter.app.args import parse
    from isaac_adapter.app.train import isaaclab_agent_config
    from isaac_adapter.tasks import registry

    spec = registry.get_task("Isaac-Velocity-Flat-G1")
    cfg, agent = isaaclab_agent_config(spec, parse("train", ["--seed", "3", "--timeout_bootstrap", "state_value"]))
    expected = RunnerConfig.from_rsl_rl(G1FlatPPORunnerCfg())
    assert (agent.max_iterations, agent.clip_actions) == (1500, None)  # the run's length, the env's clamp (none)
    assert (cfg.policy, cfg.num_steps_per_env) == (expected.policy, 24)
    assert (cfg.seed, cfg.ppo.timeout_bootstrap) == (3, "state_value")  # the flags win
    assert cfg.ppo == dataclasses.replace(expected.ppo, timeout_bootstrap="state_value")


class _Env:
    num_envs, num_actions, device = 4, 3, torch.device("cpu")

    def reset(self):
        return {"policy": torch.randn(4, 5)}

    def step(self, actions):
        none = torch.zeros(4, dtype=torch.bool)
        return StepResult(self.reset(), torch.zeros(4), none, none.clone(), {"policy": torch.zeros(0, 5)},
                          torch.zeros(0, dtype=torch.long))


def test_a_checkpoint_rsl_rl_writes_now_loads(tmp_path):
    """rsl-rl-lib's own models and PPO.save, then Runner.load: the same action means and std."""
    from tensordict import TensorDict

    from rsl_rl.models import MLPModel

    obs = TensorDict({"policy": torch.randn(4, 5)}, batch_size=[4])
    groups = {"actor": ["policy"], "critic": ["policy"]}
    agent = G1FlatPPORunnerCfg()
    agent.actor.hidden_dims, agent.critic.hidden_dims, agent.actor.obs_normalization = [8, 6], [7], True
    agent.critic.obs_normalization = True
    actor = MLPModel(obs, groups, "actor", 3, hidden_dims=[8, 6], activation="elu", obs_normalization=True,
                     distribution_cfg={"class_name": "GaussianDistribution", "init_std": 0.5})
    critic = MLPModel(obs, groups, "critic", 1, hidden_dims=[7], activation="elu", obs_normalization=True)
    actor.obs_normalizer.update(3.0 * torch.randn(64, 5) + 1.0)
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=3e-4)
    path = tmp_path / "model_7.pt"
    torch.save({"actor_state_dict": actor.state_dict(), "critic_state_dict": critic.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "iter": 7, "infos": None}, path)
    runner = Runner(_Env(), RunnerConfig.from_rsl_rl(agent, console=False))
    runner.load(path)
    x = torch.randn(16, 5)
    actor.eval()
    with torch.no_grad():
        expected = actor(TensorDict({"policy": x}, batch_size=[16]))
        actor(TensorDict({"policy": x}, batch_size=[16]), stochastic_output=True)
        torch.testing.assert_close(runner.policy.act_inference(x)[0], expected)
        torch.testing.assert_close(runner.policy.act(x, None)[0].stddev, actor.output_std)
    assert runner.iteration == 7
