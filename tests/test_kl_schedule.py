"""When the adaptive learning-rate schedule decides: per mini-batch (rsl_rl's) or once per update.

The KL the schedule reads is the move from the rollout's policy so far, measured before each
mini-batch's step: 0 at the first mini-batch, growing over the epochs. Per mini-batch, the rate is
scaled on each of those readings; once per update, it is scaled on the mean reading of the last epoch
and held for the whole update. The expected rates here are recomputed from the readings with the
rule written out again (x 1.5 under half the target, / 1.5 over twice it, clamped).
"""

import pytest

import ppo_bootstrap.ppo as ppo_module
from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.envs import TimeLimitEnv

EPOCHS, MINI_BATCHES = 3, 2


def rule(lr: float, kl: float, target: float, low: float = 1e-5, high: float = 1e-2) -> float:
    if kl > 2.0 * target:
        return max(lr / 1.5, low)
    if 0.0 < kl < target / 2.0:
        return min(lr * 1.5, high)
    return lr


def steps_of_one_update(monkeypatch, every: str, target: float) -> tuple[list[float], list[float], float]:
    """(rate entering each mini-batch step, KL read at each, rate after the update) of the second
    iteration of a small run (the first moves the normalizers)."""
    env = TimeLimitEnv(num_envs=16, episode_length=10)
    cfg = RunnerConfig(num_steps_per_env=8, console=False, seed=0,
                       policy=PolicyConfig(actor_hidden=(16,), critic_hidden=(16,)),
                       ppo=PPOConfig(num_learning_epochs=EPOCHS, num_mini_batches=MINI_BATCHES, desired_kl=target,
                                     adaptive_every=every, learning_rate=1e-3))
    runner = Runner(env, cfg)
    runner.learn(1)
    rates, kls = [], []
    step = ppo_module.PPO._step

    def recording(self, batch, states, starts):
        rates.append(float(self.lr))
        out = step(self, batch, states, starts)
        kls.append(float(out[3]))
        return out

    monkeypatch.setattr(ppo_module.PPO, "_step", recording)
    runner.learn(1)
    return rates, kls, runner.alg.learning_rate


@pytest.mark.parametrize("target", [1e-6, 1e3])  # every reading over twice the target / under half of it
def test_once_per_update_the_rate_is_held_and_scaled_on_the_last_epochs_kl(monkeypatch, target):
    rates, kls, after = steps_of_one_update(monkeypatch, "update", target)
    assert len(rates) == EPOCHS * MINI_BATCHES
    assert rates == pytest.approx([rates[0]] * len(rates))  # one rate through the whole update
    last_epoch = sum(kls[-MINI_BATCHES:]) / MINI_BATCHES
    assert after == pytest.approx(rule(rates[0], last_epoch, target), rel=1e-6)
    assert after != pytest.approx(rates[0])  # the decision was taken (down for 1e-6, up for 1e3)


def test_per_mini_batch_the_rate_moves_at_every_step(monkeypatch):
    target = 1e-6
    rates, kls, after = steps_of_one_update(monkeypatch, "mini_batch", target)
    expected = [rates[0]]
    for kl in kls:
        expected.append(rule(expected[-1], kl, target))
    assert [*rates, after] == pytest.approx(expected, rel=1e-6)
    assert kls[0] == pytest.approx(0.0, abs=1e-9)  # the first reading: nothing has moved yet
    assert after < rates[1]  # every later reading is over twice the target: divided at each step


def test_adaptive_every_is_checked():
    with pytest.raises(ValueError, match="adaptive_every must be 'mini_batch' or 'update'"):
        PPOConfig(adaptive_every="epoch")
