"""Faults of several processes, launched by torchrun over gloo on the CPU (tests/dist_train.py):
a rank killed mid-iteration or mid-save, ranks set up differently, and two nodes on one machine."""

import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
import torch

from ppo_bootstrap import checkpoint
from ppo_bootstrap.distributed import TIMEOUT_ENV

from dist_train import make_runner

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "dist_train.py")
WAIT_S = 120  # a bound on each launch, start-up included: a hang fails here instead of stalling the suite


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(launch: list[str], *script_args: str, timeout_s: int = 30) -> subprocess.Popen:
    env = {**os.environ, TIMEOUT_ENV: str(timeout_s), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *launch, SCRIPT, *script_args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)  # its own process group, which a test may end whole


def one_node(*script_args: str, timeout_s: int = 30) -> subprocess.Popen:
    return torchrun(["--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(free_port())],
                    *script_args, timeout_s=timeout_s)


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=WAIT_S)
    return proc.returncode, out


def our_lines(out: str) -> list[str]:
    """The lines the training processes wrote (torchrun's own report of a failed worker left out)."""
    return [line for line in out.splitlines() if line.startswith(("rank ", "error: "))]


def test_a_rank_that_hangs_alive_stops_the_others_at_the_collective_timeout(tmp_path):
    """Rank 1 stops (SIGSTOP) mid-rollout, its process alive: rank 0's next collective fails after the
    timeout with one line saying a rank died or hung and the setting, and the run resumes."""
    run = tmp_path / "run"
    proc = one_node("--log-dir", str(run), "--iterations", "5", "--kill", "1:hang:3", timeout_s=5)
    # read until rank 0 has said its line, then end the launch: torchrun's agent would otherwise wait
    # its grace period on the stopped rank before killing it
    seen, line = [], None
    guard = threading.Timer(WAIT_S, os.killpg, (proc.pid, signal.SIGKILL))  # a bound, should the line never come
    guard.start()
    try:
        for text in proc.stdout:
            seen.append(text)
            if text.startswith("rank 0: "):
                line = text.rstrip("\n")
                break
    finally:
        guard.cancel()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
        for pid_file in run.glob("hung_rank*.pid"):  # the stopped worker is not in torchrun's process group
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert line is not None, "".join(seen)
    assert line.startswith("rank 0: a collective with the other ranks failed (")
    assert f"another rank died or hung past {TIMEOUT_ENV}=5 s; this rank stops too. Resume from the last " \
           "checkpoint rank 0 wrote" in line
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_1.pt", "model_2.pt"]
    resumed = make_runner(None)
    resumed.load(run / "model_2.pt")
    assert resumed.iteration == 2


@pytest.mark.parametrize("victim,where,survivor", [(1, "step", 0), (0, "save", 1)])
def test_rank_killed_stops_every_other_rank_with_one_line_and_the_run_resumes(tmp_path, victim, where, survivor):
    run = tmp_path / "run"
    code, out = finish(one_node("--log-dir", str(run), "--iterations", "5", "--kill", f"{victim}:{where}:3"))
    assert code != 0
    # the survivor's one line names the rank that died; it did not finish training
    assert our_lines(out) == [f"rank {survivor}: rank {victim} of 2 stopped (its process is gone); this rank stops "
                              "too. Resume from the last checkpoint rank 0 wrote"], out
    assert f'File "{SCRIPT}"' not in out  # no traceback through a worker (torchrun's agent reports with its own)
    # iteration 3 never completed a save: iteration 2's checkpoint is the last, and intact
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_1.pt", "model_2.pt"]
    assert checkpoint.read(run / "model_2.pt")["iteration"] == 2
    torn = list(run.glob(".model_3.pt.tmp-*"))
    assert len(torn) == (1 if where == "save" else 0)

    # the checkpoint of two processes resumes (here in one; two nodes resume under torchrun below)
    runner = make_runner(str(run))
    runner.load(run / "model_2.pt")
    runner.learn(1)
    assert checkpoint.read(run / "model_3.pt")["iteration"] == 3
    assert not list(run.glob(".model_*.tmp-*"))  # the killed writer's temporary went at the next start


def test_ranks_with_different_env_counts_are_refused_before_training(tmp_path):
    run = tmp_path / "run"
    code, out = finish(one_node("--log-dir", str(run), "--iterations", "2", "--rank-num-envs", "1:16"))
    assert code != 0
    expected = ("error: ranks were started with different setups: num_envs is 8 on rank 0, 16 on rank 1. Every "
                "rank needs the same env count and task/agent config")
    # each rank says it once; the two ranks share one stderr pipe, so their lines may interleave
    assert out.count(expected) == 2 and out.count("error: ") == 2, out
    assert not list(run.glob("model_*.pt"))


def test_two_nodes_on_one_machine_train_as_one_node_and_resume(tmp_path):
    single, nodes = tmp_path / "single", tmp_path / "nodes"

    def two_nodes(*script_args: str) -> list[subprocess.Popen]:
        endpoint = f"127.0.0.1:{free_port()}"
        return [torchrun(["--nnodes", "2", "--node_rank", str(node), "--nproc_per_node", "1",
                          "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint], *script_args) for node in (0, 1)]

    launches = [one_node("--log-dir", str(single), "--iterations", "2"),  # the reference, alongside
                *two_nodes("--log-dir", str(nodes), "--iterations", "2")]
    for code, out in map(finish, launches):
        assert code == 0, out
    a, b = (checkpoint.read(d / "model_2.pt") for d in (single, nodes))
    assert b["world_size"] == 2
    for key, value in a["policy"].items():  # the same seed gives the same parameters, bit for bit
        assert torch.equal(value, b["policy"][key]), key
    # rank 0 alone wrote: one TensorBoard file, one metrics row per iteration
    assert len(list(nodes.glob("events.out.tfevents.*"))) == 1
    assert len((nodes / "metrics.jsonl").read_text().splitlines()) == 2

    for code, out in map(finish, two_nodes("--log-dir", str(nodes), "--iterations", "1", "--resume",
                                           str(nodes / "model_2.pt"))):
        assert code == 0, out
    resumed = checkpoint.read(nodes / "model_3.pt")
    assert resumed["iteration"] == 3 and resumed["world_size"] == 2
    assert any(not torch.equal(v, b["policy"][k]) for k, v in resumed["policy"].items())  # it trained on
