#!/usr/bin/env bash
# Train G1 walking runs side by side on the GPUs of one machine, for a wall-clock budget, resuming.
#
#   scripts/g1_gpu_runs.sh RUNS_DIR SECONDS [RUN ...]
#
# RUN names pick the task variant and the timeout value target (default: all four):
#   exact              default task (Isaac Lab's G1 recipe), V(true final observation) on timeouts
#   state_value        default task, V(s_t) on timeouts (rsl_rl's approximation)
#   clock_exact        gait-clock task variant (examples/g1_walk.py --gait-clock), exact
#   clock_state_value  gait-clock task variant, V(s_t)
# Every run has the same seed, 4096 envs on MuJoCo Warp, and logs into RUNS_DIR/RUN (metrics.jsonl,
# model_<it>.pt every 100 iterations). Runs go round-robin over the GPUs (those CUDA_VISIBLE_DEVICES
# names, if set). Each one continues exactly from its newest checkpoint and gets SIGTERM after
# SECONDS, which makes the Runner finish the iteration in progress and save, so a budget of one
# command is one chunk of a longer run.
# Knobs: NUM_ENVS (4096), SEED (0), SAVE_INTERVAL (100), PYTHON (python3).
set -euo pipefail
cd "$(dirname "$0")/.."
runs_dir=${1:?usage: scripts/g1_gpu_runs.sh RUNS_DIR SECONDS [RUN ...]}
seconds=${2:?usage: scripts/g1_gpu_runs.sh RUNS_DIR SECONDS [RUN ...]}
shift 2
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(exact state_value clock_exact clock_state_value)
PY=${PYTHON:-python3}
# the GPUs to share out: those CUDA_VISIBLE_DEVICES names, else every one torch sees
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a gpu_ids <<< "$CUDA_VISIBLE_DEVICES"
else
  count=$("$PY" -c "import torch; print(torch.cuda.device_count())")
  gpu_ids=()
  for ((g = 0; g < count; g++)); do gpu_ids+=("$g"); done
fi
[ ${#gpu_ids[@]} -gt 0 ] || { echo "no CUDA device visible" >&2; exit 1; }

pids=()
for i in "${!names[@]}"; do
  name=${names[$i]}
  case $name in
    exact) flags=(--timeout-bootstrap exact) ;;
    state_value) flags=(--timeout-bootstrap state_value) ;;
    clock_exact) flags=(--gait-clock --timeout-bootstrap exact) ;;
    clock_state_value) flags=(--gait-clock --timeout-bootstrap state_value) ;;
    *) echo "unknown run '$name'" >&2; exit 2 ;;
  esac
  dir=$runs_dir/$name
  mkdir -p "$dir"
  latest=$(ls "$dir"/model_*.pt 2>/dev/null | sed 's/.*model_\([0-9]*\)\.pt/\1/' | sort -n | tail -1 || true)
  resume=()
  [ -z "$latest" ] || resume=(--checkpoint "$dir/model_$latest.pt")
  gpu=${gpu_ids[$((i % ${#gpu_ids[@]}))]}
  echo "$name: GPU $gpu, ${resume[*]:-fresh start}, ${seconds} s"
  CUDA_VISIBLE_DEVICES=$gpu timeout -s TERM -k 120 "$seconds" "$PY" examples/g1_walk.py \
    --device cuda --backend warp --num-envs "${NUM_ENVS:-4096}" --iterations 1000000 --seed "${SEED:-0}" \
    --save-interval "${SAVE_INTERVAL:-100}" --no-validate --log-dir "$dir" "${flags[@]}" "${resume[@]}" \
    >> "$dir/train.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
for name in "${names[@]}"; do
  last=$(tail -n 1 "$runs_dir/$name/metrics.jsonl" 2>/dev/null || echo '{}')
  "$PY" - "$name" "$last" <<'EOF'
import json, sys
name, row = sys.argv[1], json.loads(sys.argv[2])
if row:
    print(f"{name}: iteration {row['iteration']}, {row['total_steps']} env steps, "
          f"{row['perf/steps_per_s']:.0f} steps/s, return {row.get('episodes/mean_return', float('nan')):.2f}, "
          f"length {row.get('episodes/mean_length', float('nan')):.0f}")
else:
    print(f"{name}: no iteration logged")
EOF
done
# timeout's SIGTERM is the planned end of a chunk: 124 is success here
[ $status -eq 0 ] || [ $status -eq 124 ] || exit $status
