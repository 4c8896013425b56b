"""Fault injection: bad env outputs, kills during checkpoint writes, damaged checkpoint files.

Every fault should end in a clear error (an exception that names what is wrong: the field and env
ids, the tensor, or the checkpoint file, in one line), a recovery (``non_finite_obs="reset"``), or,
for checkpoints, a file that still loads and verifies. Nothing silent (training goes on with a bad
value, a damaged file loads with other contents) and nothing unhelpful (another exception type, or
a message that does not say what is wrong).

    python scripts/fault_injection.py                # the table in docs/reliability.md, "Faults and resume"
    python scripts/fault_injection.py --verbose      # one line per case
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import signal
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppo_bootstrap import EpisodeProtocolError, PolicyConfig, Runner, RunnerConfig, StepResult  # noqa: E402
from ppo_bootstrap import checkpoint  # noqa: E402
from ppo_bootstrap.envs import TimeLimitEnv  # noqa: E402

NAN, INF = float("nan"), float("inf")
NUM_ENVS, STEPS = 4, 8
FAULT_STEP = 12  # the normalizer warm-up is steps 1-8: the fault lands in iteration 1 (or the first step after it that fits)

CLEAR, RECOVERED, SILENT, UNHELPFUL, CRASH = "clear error", "recovered", "silent", "unhelpful error", "crash"
INTACT, IDENTICAL = "checkpoint intact", "loaded, contents identical"


# ------------------------------------------------------------------ bad env outputs
def _rows(value: torch.Tensor, rows, fill: float) -> torch.Tensor:
    value = value.clone()
    value[rows] = fill
    return value


def _ended(r: StepResult) -> bool:
    return r.final_env_ids.numel() > 0


def _set(r: StepResult, **changes) -> StepResult:
    return dataclasses.replace(r, **changes)


def _obs(r: StepResult, group: str, value: torch.Tensor) -> StepResult:
    return _set(r, obs={**r.obs, group: value})


def _final(r: StepResult, group: str, value: torch.Tensor) -> StepResult:
    return _set(r, final_obs={**r.final_obs, group: value})


def _dense(r: StepResult, poison: str | None = None) -> StepResult:
    """``r`` in the contract's dense form (``final_obs_all``), with NaN in group ``poison``'s first
    ended row if given."""
    rows = {k: v.clone() for k, v in r.obs.items()}
    for k in rows:
        rows[k][r.final_env_ids] = r.final_obs[k]
    if poison is not None:
        rows[poison][r.final_env_ids[0]] = NAN
    return _set(r, final_obs=None, final_env_ids=None, final_obs_all=rows)


Fault = Callable[[StepResult], "StepResult | None"]
"""Returns the faulty step, or ``None`` where it does not apply to this step (the next one is tried)."""

ENV_FAULTS: list[tuple[str, Fault, str]] = [  # name, fault, what a clear error names
    ("NaN policy obs, one env", lambda r: _obs(r, "policy", _rows(r.obs["policy"], 1, NAN)), "obs['policy']"),
    ("inf critic obs, one env", lambda r: _obs(r, "critic", _rows(r.obs["critic"], 2, INF)), "obs['critic']"),
    ("NaN obs, every env", lambda r: _obs(r, "policy", _rows(r.obs["policy"], slice(None), NAN)), "obs['policy']"),
    ("NaN reward", lambda r: _set(r, reward=_rows(r.reward, 0, NAN)), "reward"),
    ("-inf reward", lambda r: _set(r, reward=_rows(r.reward, 3, -INF)), "reward"),
    ("NaN obs and reward, same env", lambda r: _set(_obs(r, "policy", _rows(r.obs["policy"], 1, NAN)),
                                                    reward=_rows(r.reward, 1, NAN)), "env ids [1]"),
    ("NaN final obs", lambda r: _final(r, "policy", _rows(r.final_obs["policy"], 0, NAN)) if _ended(r) else None,
     "final_obs['policy']"),
    ("inf final critic obs", lambda r: _final(r, "critic", _rows(r.final_obs["critic"], 0, INF)) if _ended(r) else None,
     "final_obs['critic']"),
    ("reward 1e38 (finite; float32 returns overflow)", lambda r: _set(r, reward=torch.full_like(r.reward, 1e38)),
     "the update left NaN or inf"),
    ("reward of N-1 rows", lambda r: _set(r, reward=r.reward[:-1]), "reward"),
    ("reward as a list", lambda r: _set(r, reward=r.reward.tolist()), "reward"),
    ("terminated as int", lambda r: _set(r, terminated=r.terminated.int()), "terminated"),
    ("truncated of N+1 rows", lambda r: _set(r, truncated=torch.cat([r.truncated, r.truncated[:1]])), "truncated"),
    ("obs of N+1 rows", lambda r: _obs(r, "policy", torch.cat([r.obs["policy"], r.obs["policy"][:1]])), "obs['policy']"),
    ("obs one wider", lambda r: _obs(r, "policy", torch.cat([r.obs["policy"], r.obs["policy"][:, :1]], 1)),
     "obs['policy']"),
    ("critic group dropped", lambda r: _set(r, obs={"policy": r.obs["policy"]}), "critic"),
    ("obs on another device (meta)", lambda r: _obs(r, "policy", r.obs["policy"].to("meta")), "obs['policy']"),
    ("final obs missing for an ended env", lambda r: _set(r, final_env_ids=r.final_env_ids[1:],
                                                          final_obs={k: v[1:] for k, v in r.final_obs.items()})
     if _ended(r) else None, "final_obs"),
    ("final obs for an env that did not end",
     lambda r: _set(r, final_env_ids=torch.cat([r.final_env_ids, _running_id(r)]),
                    final_obs={k: torch.cat([v, r.obs[k][_running_id(r)]]) for k, v in r.final_obs.items()})
     if 0 < r.final_env_ids.numel() < NUM_ENVS else None, "did not end"),
    ("final_env_ids listed twice", lambda r: _set(r, final_env_ids=r.final_env_ids.repeat(2),
                                                  final_obs={k: v.repeat(2, 1) for k, v in r.final_obs.items()})
     if _ended(r) else None, "final_env_ids"),
    ("final obs group dropped", lambda r: _set(r, final_obs={"policy": r.final_obs["policy"]}) if _ended(r) else None,
     "final_obs"),
    ("dense form: NaN in an ended env's row", lambda r: _dense(r, "policy") if _ended(r) else None,
     "final_obs['policy']"),
    ("dense form: a row short", lambda r: _set(_dense(r), final_obs_all={k: v[:-1] for k, v in _dense(r).final_obs_all.items()}),
     "final_obs_all['policy']"),
    ("dense and sparse forms both given", lambda r: _set(r, final_obs_all=_dense(r).final_obs_all), "not both"),
]


def _running_id(r: StepResult) -> torch.Tensor:
    done = r.terminated | r.truncated
    return torch.nonzero(~done).flatten()[:1]


class FaultyEnv(TimeLimitEnv):
    """TimeLimitEnv (4 envs, a critic group, falls and time-outs) with one fault injected at the
    first step from ``FAULT_STEP`` on where it applies."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(num_envs=NUM_ENVS, episode_length=5, privileged_dim=1, fall_probability=0.2, seed=1)
        self.fault, self.steps, self.injected, self.resets = fault, 0, False, 0

    def step(self, actions: torch.Tensor) -> StepResult:
        result = super().step(actions)
        self.steps += 1
        if not self.injected and self.steps >= FAULT_STEP:
            faulty = self.fault(result)
            if faulty is not None:
                self.injected = True
                return faulty
        return result

    def reset_envs(self, env_ids: torch.Tensor):
        self.resets += env_ids.numel()
        return super().reset_envs(env_ids)


def _judge_error(err: BaseException, names: str) -> str:
    known = isinstance(err, (EpisodeProtocolError, ValueError, FloatingPointError))
    if not known:
        return CRASH
    message = str(err)
    return CLEAR if names in message and "\n" not in message else UNHELPFUL


def env_output_faults(mode: str) -> list[tuple[str, str, str]]:
    """``(fault, outcome, detail)`` for every bad env output, with ``non_finite_obs=mode``."""
    out = []
    for name, fault, names in ENV_FAULTS:
        env = FaultyEnv(fault)
        cfg = RunnerConfig(num_steps_per_env=STEPS, console=False, non_finite_obs=mode,
                           policy=PolicyConfig(actor_hidden=(16,), critic_hidden=(16,)))
        runner = Runner(env, cfg)
        try:
            runner.learn(3)
        except Exception as err:  # noqa: BLE001 - judging every exception is the point
            out.append((name, _judge_error(err, names), f"{type(err).__name__}: {str(err)[:150]}"))
            continue
        if not env.injected:
            raise RuntimeError(f"fault {name!r} never applied")
        finite = checkpoint.first_non_finite(runner.policy.state_dict()) is None
        outcome = RECOVERED if env.resets and finite else SILENT
        out.append((name, outcome, f"{env.resets} env(s) restarted, parameters {'finite' if finite else 'NOT finite'}"))
    return out


# ------------------------------------------------------------------ kills during save
def _small_runner() -> Runner:
    env = TimeLimitEnv(num_envs=NUM_ENVS, episode_length=5, privileged_dim=1, fall_probability=0.2, seed=1)
    return Runner(env, RunnerConfig(num_steps_per_env=STEPS, console=False,
                                    policy=PolicyConfig(actor_hidden=(16,), critic_hidden=(16,))))


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_points(size: int, count: int) -> list[tuple[str, Callable[[], None]]]:
    """Where a child process kills itself while ``save_atomic`` writes a file of about ``size`` bytes."""
    real_save, real_replace = torch.save, os.replace

    def after_bytes(n: int) -> Callable[[], None]:
        def save(obj, f, *args, **kwargs):
            buf = io.BytesIO()
            real_save(obj, buf, *args, **kwargs)
            f.write(buf.getvalue()[:n])
            f.flush()
            _die()

        return lambda: setattr(torch, "save", save)

    def before(name: str) -> Callable[[], None]:
        return lambda: setattr(os, name, lambda *a, **k: _die())

    def after_replace(*args, **kwargs):
        real_replace(*args, **kwargs)
        _die()

    points = [(f"after {n} of ~{size} bytes", after_bytes(n))
              for n in sorted({0, 1, *(size * k // (count - 3) for k in range(1, count - 3))})]
    points += [("before fsync", before("fsync")), ("before rename", before("replace")),
               ("after rename", lambda: setattr(os, "replace", after_replace))]
    return points


def kills_during_save(count: int) -> list[tuple[str, str, str]]:
    """Fork a writer per kill point; it kills itself with SIGKILL inside ``save_atomic``. After each:
    does the checkpoint load and verify, and does the next save remove the torn temporary?"""
    out = []
    runner = _small_runner()
    runner.learn(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        runner.save(path)
        size = path.stat().st_size
        for name, arm in _kill_points(size, count):
            runner.iteration = 1
            runner.save(path)
            pid = os.fork()
            if pid == 0:  # the writer: save iteration 2, dying where armed
                arm()
                runner.iteration = 2
                runner.save(path)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            left = len(list(Path(tmp).glob(".model.pt.tmp-*")))
            try:
                iteration = checkpoint.read(path)["iteration"]
                loads = iteration in (1, 2)
            except Exception as err:  # noqa: BLE001
                loads, iteration = False, f"{type(err).__name__}: {err}"
            runner.iteration = 3
            runner.save(path)  # the next save
            after = len(list(Path(tmp).glob(".*.tmp-*")))
            ok = killed and loads and after == 0
            out.append((name, INTACT if ok else SILENT,
                        f"killed={killed} loads iteration {iteration}, temporaries {left} -> {after} after the next save"))
    return out


# ------------------------------------------------------------------ damaged checkpoints
def _pickled(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def damaged_files(good: bytes, state: dict, flips: int) -> list[tuple[str, bytes]]:
    g = torch.Generator().manual_seed(0)
    cases = [("empty", b""), ("1 byte", good[:1]), ("all but the last byte", good[:-1])]
    cases += [(f"truncated to {k * 5} %", good[: len(good) * k // 20]) for k in range(1, 20)]
    cases += [(f"{n} random bytes", bytes(torch.randint(0, 256, (n,), generator=g).tolist())) for n in (16, 4096, len(good))]
    policy_only = {k: state[k] for k in ("policy", "config")}
    cases += [
        ("a pickled list", _pickled([1, 2, 3])),
        ("a pickled tensor", _pickled(torch.zeros(3))),
        ("a dict without 'policy'", _pickled({"model": state["policy"]})),
        ("'policy' not tensors", _pickled({**policy_only, "policy": {"w": [1.0]}})),
        ("no 'config'", _pickled({"policy": state["policy"]})),
        ("full checkpoint without 'rng'", _pickled({k: v for k, v in state.items() if k != "rng"})),
    ]
    for name, tensor in state["policy"].items():  # the top exponent bit of each weight's first float
        data = tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        at = good.find(data) if tensor.dtype == torch.float32 and tensor.numel() else -1
        if at >= 0 and good.rfind(data) == at:
            flipped = bytearray(good)
            flipped[at + 3] ^= 0x40
            cases.append((f"exponent bit of {name}", bytes(flipped)))
    for _ in range(flips):  # anywhere in the file: headers, pickle, tensor data, checksum
        bit = int(torch.randint(0, len(good) * 8, (1,), generator=g))
        flipped = bytearray(good)
        flipped[bit // 8] ^= 1 << (bit % 8)
        cases.append((f"bit {bit} flipped", bytes(flipped)))
    return cases


def damaged_checkpoints(flips: int) -> list[tuple[str, str, str]]:
    """Load every damaged file into a Runner; judge the error or compare what loaded with the original."""
    runner = _small_runner()
    runner.learn(1)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        good_path = Path(tmp) / "good.pt"
        runner.save(good_path)
        good = good_path.read_bytes()
        original = checkpoint.checksum(torch.load(good_path, weights_only=False))
        state = runner.state_dict()
        target = _small_runner()
        for name, data in damaged_files(good, state, flips):
            path = Path(tmp) / "damaged.pt"
            path.write_bytes(data)
            try:
                with warnings.catch_warnings():  # torch's own, about the storages a flipped bit renamed
                    warnings.simplefilter("ignore")
                    target.load(path)
            except Exception as err:  # noqa: BLE001
                clear = isinstance(err, checkpoint.CheckpointError) and str(path) in str(err) and "\n" not in str(err)
                out.append((name, CLEAR if clear else (UNHELPFUL if isinstance(err, ValueError) else CRASH),
                            f"{type(err).__name__}: {str(err).replace(str(path), '<file>')[:140]}"))
                continue
            loaded = checkpoint.checksum(torch.load(path, weights_only=False))
            same = loaded["tensors"] == original["tensors"] and loaded["other"] == original["other"]
            out.append((name, IDENTICAL if same else SILENT, "loaded"))
    return out


# ------------------------------------------------------------------ table
COLUMNS = (CLEAR, RECOVERED, INTACT, IDENTICAL, SILENT, UNHELPFUL, CRASH)


def table(rows: list[tuple[str, list[tuple[str, str, str]]]]) -> str:
    head = ["faults injected", "tried", "clear error", "recovered", "file intact / unchanged", "silent",
            "unhelpful error", "crash"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, results in rows:
        n = Counter(outcome for _, outcome, _ in results)
        cells = [label, len(results), n[CLEAR], n[RECOVERED], n[INTACT] + n[IDENTICAL], n[SILENT], n[UNHELPFUL], n[CRASH]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def run(kills: int = 24, flips: int = 300) -> list[tuple[str, list[tuple[str, str, str]]]]:
    torch.set_num_threads(1)
    return [
        ('bad env outputs, `non_finite_obs="error"`', env_output_faults("error")),
        ('bad env outputs, `non_finite_obs="reset"`', env_output_faults("reset")),
        ("SIGKILL during a checkpoint write", kills_during_save(kills)),
        ("damaged checkpoint files", damaged_checkpoints(flips)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=24, help="kill points during a save")
    parser.add_argument("--flips", type=int, default=300, help="random single-bit flips of a checkpoint")
    parser.add_argument("--verbose", action="store_true", help="one line per case")
    args = parser.parse_args()
    rows = run(args.kills, args.flips)
    if args.verbose:
        for label, results in rows:
            print(f"\n{label}")
            for name, outcome, detail in results:
                print(f"  {outcome:<26} {name:<45} {detail}")
        print()
    print(table(rows))
    bad = sum(outcome in (SILENT, UNHELPFUL, CRASH) for _, results in rows for _, outcome, _ in results)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
