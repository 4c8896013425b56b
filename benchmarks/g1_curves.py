"""Learning curves of G1 runs side by side: training statistics and the evaluator's checkpoints.

    python benchmarks/g1_curves.py --run exact=runs/clock_exact --run "V(s_t)=runs/clock_state_value" \\
        --acceptance exact=ce.json --acceptance "V(s_t)=csv.json" --out curves.png

``--run LABEL=DIR`` reads ``DIR/metrics.jsonl`` (the Runner's per-iteration log); ``--acceptance
LABEL=JSON[,JSON...]`` reads rows written by ``benchmarks/g1_acceptance.py --json``. Prints a table
of both at common iterations and draws four panels against env steps: mean episode return, mean
episode length, and the evaluated velocity-tracking error and air time with their thresholds.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

import _common  # noqa: F401  (puts the repository root on sys.path)

from ppo_bootstrap.runner import read_metrics

from isaac_adapter.evaluation.gait import GaitThresholds


def labelled(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        label, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"expected LABEL=VALUE, got {pair!r}")
        out[label] = value
    return out


def acceptance_rows(paths: str) -> list[dict]:
    rows = {}
    for path in paths.split(","):
        with open(path) as f:
            for row in json.load(f)["rows"]:
                rows[row["iteration"]] = row
    return [rows[k] for k in sorted(rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="append", default=[], help="LABEL=RUN_DIR (repeatable)")
    parser.add_argument("--acceptance", action="append", default=[], help="LABEL=JSON[,JSON] (repeatable)")
    parser.add_argument("--every", type=int, default=100, help="table rows: iterations that are multiples")
    parser.add_argument("--out", default=None, help="PNG of the four panels")
    args = parser.parse_args()
    runs = {label: read_metrics(d) for label, d in labelled(args.run).items()}
    evals = {label: acceptance_rows(p) for label, p in labelled(args.acceptance).items()}

    print("training statistics (mean over the episodes that ended in the iteration); s/it, lr, kl: medians"
          " since the previous row; boot: mean gamma * V(s_final) added at timeouts")
    print(f"{'run':>22}  {'iteration':>9}  {'env steps':>11}  {'train s':>7}  {'s/it':>5}  {'return':>7}  "
          f"{'length':>8}  {'falls/it':>8}  {'timeouts/it':>11}  {'boot':>5}  {'lr':>8}  {'kl':>6}")
    for label, rows in runs.items():
        block = []
        for r in rows:
            block.append(r)
            if r["iteration"] % args.every == 0 or r is rows[-1]:
                s_it = statistics.median(b["perf/collection_s"] + b["perf/learning_s"] for b in block)
                lr, kl = (statistics.median(b.get(k, math.nan) for b in block) for k in ("policy/learning_rate", "policy/kl"))
                print(f"{label:>22}  {r['iteration']:>9}  {r['total_steps']:>11}  {r['train_s']:>7.0f}  "
                      f"{s_it:>5.2f}  {r.get('episodes/mean_return', math.nan):>7.2f}  "
                      f"{r.get('episodes/mean_length', math.nan):>8.0f}  "
                      f"{r['episodes/terminated']:>8.0f}  {r['episodes/truncated_only']:>11.0f}  "
                      f"{r['timeout_bootstrap/mean']:>5.2f}  {lr:>8.2e}  {kl:>6.4f}")
                block = []
    if evals:
        print("evaluated checkpoints (fixed command, 15 s): gait means of the envs commanded to walk")
        print(f"{'run':>22}  {'iteration':>9}  {'env steps':>11}  {'train s':>7}  {'fall':>6}  {'air s':>6}  {'steps Hz':>8}  "
              f"{'dsupport':>8}  {'track err':>9}  verdict")
        for label, rows in evals.items():
            for r in rows:
                print(f"{label:>22}  {r['iteration']:>9}  {r['env_steps']:>11}  {r['train_s']:>7.0f}  {r['fall_rate']:>6.1%}  "
                      f"{r['air_time_s']:>6.3f}  {r['step_frequency_hz']:>8.2f}  {r['double_support']:>8.2f}  "
                      f"{r['tracking_error']:>9.3f}  {'ACCEPTED' if r['verdict']['accepted'] else 'rejected'}")
    if not args.out:
        return

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gait = GaitThresholds()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for label, rows in runs.items():
        steps = [r["total_steps"] / 1e6 for r in rows if "episodes/mean_return" in r]
        axes[0, 0].plot(steps, [r["episodes/mean_return"] for r in rows if "episodes/mean_return" in r], label=label)
        axes[0, 1].plot(steps, [r["episodes/mean_length"] for r in rows if "episodes/mean_return" in r], label=label)
    for label, rows in evals.items():
        steps = [r["env_steps"] / 1e6 for r in rows]
        axes[1, 0].plot(steps, [r["tracking_error"] for r in rows], "o-", label=label)
        axes[1, 1].plot(steps, [r["air_time_s"] for r in rows], "o-", label=label)
    axes[1, 0].axhline(gait.max_velocity_tracking_error, color="k", ls="--", lw=1, label="acceptance")
    axes[1, 1].axhline(gait.min_mean_air_time_s, color="k", ls="--", lw=1, label="acceptance")
    titles = ["mean episode return", "mean episode length (policy steps)", "evaluated tracking error (m/s)",
              "evaluated mean air time (s)"]
    for ax, title in zip(axes.flat, titles):
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("env steps (millions)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
