"""Where a training start's "import and configure" goes: the imports a G1 training makes, in its
order, timed in fresh processes, and with ``--device cuda`` the first CUDA work of torch and Warp.

    python benchmarks/startup.py                  # the imports, CPU
    python benchmarks/startup.py --device cuda    # and torch's and Warp's start on the GPU
    python benchmarks/startup.py --repeats 5

Each repeat is a fresh Python process that takes the steps in turn: each row is what its step
added (what an earlier row imported is not counted again). ``time_to_walk.py`` reports the whole as
"startup ... to import and configure"; this says which import owns it. The first process also reads
the files from disk, as the first process of a fresh machine does, so its column stands apart from
the median of the others. A package that is not installed gives its row "not installed".
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from isaac_adapter.app.bench.common import checkout_env, format_table

# (row, statement): what a G1 training imports, in its order (isaac_adapter.app.train, then the
# MuJoCo Warp backend when the env is built, and tensordict, which the training imports in a thread
# of its own while the env builds: here timed alone, after the others)
IMPORTS = (
    ("torch", "import torch"),
    ("ppo_bootstrap", "import ppo_bootstrap"),
    ("the training application", "import isaac_adapter.app.train"),
    ("warp", "import warp"),
    ("mujoco_warp", "import mujoco_warp"),
    ("the MuJoCo Warp backend", "import isaac_adapter.backends.mujoco_warp"),
    ("tensordict (beside the env build)", "import tensordict"),
)
CUDA_STEPS = (
    ("torch's CUDA start", "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"),
    ("Warp's start", "import warp; warp.config.quiet = True; warp.init()"),
)

# the child: each step timed in turn, "absent" for a package that is not installed
_CHILD = """
import json, sys, time
out = []
for statement in json.loads(sys.argv[1]):
    start = time.perf_counter()
    try:
        exec(statement, {})
    except ModuleNotFoundError:
        out.append(None)
        continue
    out.append(time.perf_counter() - start)
print("STEPS " + json.dumps(out))
"""


def steps_for(device: str) -> tuple[tuple[str, str], ...]:
    return IMPORTS + (CUDA_STEPS if device.startswith("cuda") else ())


def one_process(statements: list[str]) -> list[float | None]:
    """Seconds of each statement in one fresh process (None: a package not installed)."""
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(statements)], capture_output=True, text=True,
                          check=False, env=checkout_env())
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("STEPS ")), None)
    if line is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: the timing process exited with {done.returncode}: {tail}")
    return json.loads(line[6:])


def table_rows(names: list[str], runs: list[list[float | None]]) -> list[list[str]]:
    """A row per step: the first process's seconds and the median of the others (of all, with one
    run), then the total."""
    later = runs[1:] or runs
    rows, first_total, median_total = [], 0.0, 0.0
    for i, name in enumerate(names):
        if runs[0][i] is None:
            rows.append([name, "not installed", "-"])
            continue
        median = statistics.median(run[i] for run in later)
        first_total, median_total = first_total + runs[0][i], median_total + median
        rows.append([name, f"{runs[0][i]:.2f}", f"{median:.2f}"])
    rows.append(["all", f"{first_total:.2f}", f"{median_total:.2f}"])
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu, or cuda to add torch's and Warp's CUDA start")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes (the first reads files from disk)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be >= 1, got {args.repeats}")
    if not (args.device == "cpu" or args.device.startswith("cuda")):
        p.error(f"--device is cpu or cuda, got {args.device!r}")
    steps = steps_for(args.device)
    runs = [one_process([statement for _, statement in steps]) for _ in range(args.repeats)]
    later = "the median of the other processes" if args.repeats > 1 else "the same process"
    print(f"a G1 training's start, step by step, {args.repeats} fresh process(es), {args.device}; seconds each step "
          f"added in the first process (files read from disk) and {later}")
    print(format_table(["step", "first process s", "median s"], table_rows([n for n, _ in steps], runs)))


if __name__ == "__main__":
    main()
