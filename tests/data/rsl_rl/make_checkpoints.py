"""Writes tests/data/rsl_rl/rsl_rl_5.5.1_<std_type>.pt with rsl-rl-lib 5.5.1 (not a test dependency): its
OnPolicyRunner trains 3 iterations on a tiny random env and saves as it does. Run in an env with rsl-rl-lib:
python make_checkpoints.py scalar rsl_rl_5.5.1_scalar.pt; python make_checkpoints.py log rsl_rl_5.5.1_log.pt"""
import sys
import torch
from tensordict import TensorDict
from rsl_rl.runners import OnPolicyRunner

class TinyEnv:
    num_envs, num_actions, device, max_episode_length = 8, 3, "cpu", 10
    cfg = {}
    def __init__(self):
        self.g = torch.Generator().manual_seed(0)
        self.episode_length_buf = torch.zeros(8, dtype=torch.long)
    def _obs(self):
        return TensorDict({"policy": 3.0 + 2.0 * torch.randn(8, 5, generator=self.g),
                           "critic": -1.0 + 0.5 * torch.randn(8, 7, generator=self.g)}, batch_size=[8])
    def get_observations(self):
        return self._obs()
    def step(self, actions):
        self.episode_length_buf += 1
        dones = (self.episode_length_buf >= 10).float()
        self.episode_length_buf[dones.bool()] = 0
        return self._obs(), -actions.square().sum(-1), dones, {"time_outs": dones.bool()}

std_type, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
cfg = {
    "num_steps_per_env": 6, "save_interval": 50, "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
    "actor": {"class_name": "MLPModel", "hidden_dims": [4, 3], "activation": "elu", "obs_normalization": True,
              "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.7, "std_type": std_type}},
    "critic": {"class_name": "MLPModel", "hidden_dims": [6, 2], "activation": "elu", "obs_normalization": True},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 2, "num_mini_batches": 2, "learning_rate": 1e-3,
                  "schedule": "adaptive", "desired_kl": 0.01},
}
runner = OnPolicyRunner(TinyEnv(), cfg, log_dir=None, device="cpu")
runner.learn(3)
runner.save(out)
d = torch.load(out, weights_only=False)
for k in ("actor_state_dict", "critic_state_dict"):
    print(k, [(n, tuple(t.shape), t.dtype) for n, t in d[k].items()])
print("opt groups", [len(g["params"]) for g in d["optimizer_state_dict"]["param_groups"]], d["optimizer_state_dict"]["param_groups"][0]["lr"])
print("state keys", {i: sorted(s) for i, s in d["optimizer_state_dict"]["state"].items()})
print("iter", d["iter"], "infos", d["infos"])
print([n for n, _ in runner.alg.actor.named_parameters()], [n for n, _ in runner.alg.critic.named_parameters()])
