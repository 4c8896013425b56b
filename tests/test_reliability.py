"""Faults: random GAE cases against float64, clean stop on signals, crash-safe checkpoints."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from ppo_bootstrap import compute_gae, compute_gae_reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_one_thousand_random_gae_cases_match_float64_reference():
    g = torch.Generator().manual_seed(2024)
    for case in range(1000):
        T = int(torch.randint(1, 40, (1,), generator=g))
        N = int(torch.randint(1, 17, (1,), generator=g))
        kind = case % 4  # random flags, all done, no done, all truncated
        p = torch.rand(2, generator=g)
        term = torch.rand(T, N, generator=g) < (p[0] if kind == 0 else float(kind == 1))
        trunc = torch.rand(T, N, generator=g) < (p[1] if kind == 0 else float(kind in (1, 3)))
        r, v, nv = (torch.randn(T, N, generator=g, dtype=torch.float64) * 3 for _ in range(3))
        gamma, lam = float(torch.rand(1, generator=g)), float(torch.rand(1, generator=g))
        ref_a, ref_r = compute_gae_reference(r, v, nv, term, trunc, gamma, lam)
        adv, ret = compute_gae(r.float(), v.float(), nv.float(), term, trunc, gamma, lam)
        torch.testing.assert_close(adv.double(), ref_a, rtol=1e-4, atol=1e-4, msg=f"case {case}: T={T} N={N}")
        torch.testing.assert_close(ret.double(), ref_r, rtol=1e-4, atol=1e-4, msg=f"case {case}: T={T} N={N}")


TRAIN_SCRIPT = """
import sys, torch
sys.path.insert(0, {root!r})
torch.set_num_threads(1)
from ppo_bootstrap import PolicyConfig, Runner, RunnerConfig
from ppo_bootstrap.envs import TimeLimitEnv
env = TimeLimitEnv(num_envs=8, episode_length=10)
cfg = RunnerConfig(num_steps_per_env=8, log_dir={log_dir!r}, save_interval=0,
                   policy=PolicyConfig(actor_hidden={hidden}, critic_hidden=(8,)))
runner = Runner(env, cfg)
"""


def _spawn(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-u", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_line(proc: subprocess.Popen, needle: str) -> list[str]:
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"process ended before printing {needle!r}:\n{''.join(seen)}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_training_saves_and_exits_cleanly(tmp_path, signum):
    code = TRAIN_SCRIPT.format(root=ROOT, log_dir=str(tmp_path), hidden=(8,)) + "runner.learn(100000)\nprint('returned', runner.interrupted)\n"
    proc = _spawn(code)
    _wait_for_line(proc, " iteration 2/")  # inside learn: the handlers are installed
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "returned True" in out
    saved = sorted(tmp_path.glob("model_*.pt"))
    assert len(saved) == 1
    ckpt = torch.load(saved[0], weights_only=False)
    assert saved[0].name == f"model_{ckpt['iteration']}.pt" and ckpt["iteration"] >= 2


def test_kill_during_save_leaves_previous_checkpoint_loadable(tmp_path):
    path = tmp_path / "ckpt.pt"
    code = TRAIN_SCRIPT.format(root=ROOT, log_dir=str(tmp_path), hidden=(64,)) + textwrap.dedent(f"""
        real_save = torch.save
        def stalling_save(obj, f):
            if obj["iteration"] == 3:  # half-write the third save, then wait to be killed
                f.write(b"partial checkpoint bytes")
                f.flush()
                print("stalled mid-save", flush=True)
                sys.stdin.readline()
            real_save(obj, f)
        torch.save = stalling_save
        for k in range(1, 5):
            runner.iteration = k
            runner.save({str(path)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-u", "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for_line(proc, "stalled mid-save")
    proc.kill()
    proc.wait(timeout=60)
    ckpt = torch.load(path, weights_only=False)  # a torn file would fail to load here
    assert ckpt["iteration"] == 2


class BlowUpEnv:
    """Wraps the scripted env: env 1's physics blows up on step 1 (NaN observation)."""

    def __init__(self):
        from scripted_env import ScriptedEnv

        self.inner = ScriptedEnv(3, {(2, 2): (True, False)})
        self.num_envs, self.num_actions, self.device = 3, 1, torch.device("cpu")
        self.reset_calls: list[list[int]] = []

    def reset(self):
        return self.inner.reset()

    def step(self, actions):
        result = self.inner.step(actions)
        if self.inner.t == 2:
            result.obs["policy"][1] = float("nan")
        return result

    def reset_envs(self, env_ids):
        self.reset_calls.append(env_ids.tolist())
        self.inner.x[env_ids] = -5.0
        return {"policy": self.inner.x[env_ids].unsqueeze(-1).clone()}


def test_blow_up_reset_policy_cuts_episode_bootstraps_from_last_valid_state_and_counts():
    from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig

    env = BlowUpEnv()
    cfg = RunnerConfig(num_steps_per_env=4, console=False, non_finite_obs="reset",
                       ppo=PPOConfig(gamma=0.9, lam=0.0, normalize_advantage=False),
                       policy=PolicyConfig(actor_hidden=(4,), critic_hidden=(), obs_normalization=False))
    runner = Runner(env, cfg)
    lin = runner.policy.critic.head[-1]
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.zero_()
    stats = runner._collect()
    runner.alg.compute_returns(runner.obs)
    data = runner.alg.storage.data
    assert env.reset_calls == [[1]]
    assert stats["episodes/non_finite_resets"] == 1
    assert data["truncated"][1, 1] and not data["terminated"][1, 1]
    # env 1 saw obs 2 then 3 at t=1; the blow-up is bootstrapped from V(s_1) = 3, then it restarts at -5.
    assert data["returns"][1, 1].item() == pytest.approx(1 + 0.9 * 3.0)
    assert data["obs", "policy"][2, 1].item() == -5.0
    assert data["terminated"][2, 2]  # the fall elsewhere is untouched
    assert torch.isfinite(data["returns"]).all()


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_soak_frequent_resets_and_blow_ups_keep_memory_flat():
    from ppo_bootstrap import PolicyConfig, Runner, RunnerConfig
    from ppo_bootstrap.envs import TimeLimitEnv

    env = TimeLimitEnv(num_envs=32, episode_length=5, privileged_dim=2, fall_probability=0.1, nan_probability=0.02)
    runner = Runner(env, RunnerConfig(num_steps_per_env=16, console=False, non_finite_obs="reset",
                                      policy=PolicyConfig(actor_hidden=(32,), critic_hidden=(32,))))
    runner.learn(40)  # warm up allocator caches
    before = _rss_mb()
    broken = 0
    for _ in range(8):
        runner.learn(25)
        broken += runner.last_stats["episodes/non_finite_resets"]
    growth = _rss_mb() - before
    assert broken > 0
    assert all(torch.isfinite(p).all() for p in runner.policy.parameters())
    assert growth < 15.0, f"resident memory grew {growth:.1f} MB over 200 iterations"


def _g1_env():
    from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv

    return G1WalkEnv(G1WalkConfig(num_envs=3, seed=0))


def _time_limit_env():
    from ppo_bootstrap.envs import TimeLimitEnv

    return TimeLimitEnv(num_envs=3, episode_length=5)


@pytest.mark.parametrize("make_env", [_time_limit_env, _g1_env], ids=["time_limit", "g1"])
@pytest.mark.parametrize(
    "bad,message",
    [(lambda n, a: torch.zeros(1, a), r"actions must have shape \(3, \d+\), got \(1, \d+\)"),
     (lambda n, a: torch.zeros(n, a, dtype=torch.long), "actions must be a floating-point tensor"),
     (lambda n, a: torch.zeros(n, a, device="meta"), "actions must be on the env's device cpu, got meta"),
     (lambda n, a: torch.zeros(n, a).index_fill_(0, torch.tensor([2]), float("nan")), r"NaN or inf for env ids \[2\]")],
    ids=["shape", "dtype", "device", "nan"],
)
def test_bad_actions_are_rejected_before_the_physics_moves(make_env, bad, message):
    env = make_env()
    env.reset()
    before = _flat_tensors(env.state_dict())
    assert before
    with pytest.raises(ValueError, match=message):
        env.step(bad(env.num_envs, env.num_actions))
    after = _flat_tensors(env.state_dict())
    for key, value in before.items():  # nothing moved
        assert torch.equal(after[key], value), key


def _flat_tensors(state, prefix=""):
    out = {}
    for key, value in state.items():
        if isinstance(value, dict):
            out.update(_flat_tensors(value, f"{prefix}{key}/"))
        elif torch.is_tensor(value):
            out[prefix + key] = value.clone()
        elif hasattr(value, "__array__"):
            out[prefix + key] = torch.as_tensor(value).clone()
    return out
