#!/usr/bin/env bash
# Heavy test tier (not in CI): MjlabVecEnv on mjlab's real Mjlab-Velocity-Flat-Unitree-G1, on CPU.
#
#   scripts/mjlab_tier.sh [pytest args]
#
# Creates (or reuses) a virtual environment with mjlab 1.6 (MuJoCo Warp, warp-lang, a CPU torch)
# and this project, then runs tests_mjlab/. Python 3.10-3.13. Environment knobs:
#   PYTHON            interpreter for the venv            (default: python3)
#   MJLAB_TIER_VENV   where the venv lives                (default: $TMPDIR/ppo_bootstrap-mjlab-tier)
#   TORCH_SPEC        torch requirement; name a CPU build where one is at hand (default: torch==2.13.0)
# The first run compiles MuJoCo Warp's CPU kernels (a few minutes, cached in ~/.cache/warp).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
PY=${PYTHON:-python3}
VENV=${MJLAB_TIER_VENV:-${TMPDIR:-/tmp}/ppo_bootstrap-mjlab-tier}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
nice -n 10 "$VENV/bin/python" -m pip install -q "${TORCH_SPEC:-torch==2.13.0}" "mjlab==1.6.0" "pytest>=7" -e .
"$VENV/bin/python" -c "import mjlab, mujoco, mujoco_warp, warp, torch; print('mjlab tier:', 'mujoco', mujoco.__version__, 'warp', warp.config.version, 'torch', torch.__version__)"
status=0
"$VENV/bin/python" -m pytest -q -s -p no:cacheprovider tests_mjlab "$@" || status=$?
echo "mjlab tier finished in $((SECONDS - start)) s (exit $status)"
exit $status
