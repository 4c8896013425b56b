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
