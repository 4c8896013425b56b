#!/usr/bin/env bash
# Heavy test tier (not in CI): IsaacLabVecEnv on real Isaac Lab 3.0 envs, kit-less (no Isaac Sim),
# Newton physics on CPU, with a cartpole authored locally with pxr (from usd-exchange; no cloud assets).
#
#   scripts/isaaclab_tier.sh [pytest args]
#
# Creates (or reuses) a Python 3.12 virtual environment (isaaclab 3.0 requires >=3.12,<3.13), installs
# isaaclab==3.0.0 from PyPI with this project, and runs tests_isaaclab/. isaaclab pins torch==2.11.0,
# whose Linux wheel pulls the CUDA libraries: the venv takes about 10 GB and the first install
# downloads several GB. Environment knobs:
#   PYTHON312            a Python 3.12 interpreter          (default: python3.12)
#   ISAACLAB_TIER_VENV   where the venv lives               (default: $TMPDIR/ppo_bootstrap-isaaclab-tier)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
PY=${PYTHON312:-python3.12}
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 12), f"isaaclab 3.0 needs Python 3.12, {sys.executable} is {sys.version.split()[0]}"'
VENV=${ISAACLAB_TIER_VENV:-${TMPDIR:-/tmp}/ppo_bootstrap-isaaclab-tier}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
nice -n 10 "$VENV/bin/python" -m pip install -q "isaaclab==3.0.0" "pytest>=7" -e .
"$VENV/bin/python" -c "import importlib.metadata as m; print('isaaclab tier:', *(f'{p} {m.version(p)}' for p in ('isaaclab', 'newton', 'warp-lang', 'torch', 'usd-exchange')))"
status=0
"$VENV/bin/python" -m pytest -q -s -p no:cacheprovider tests_isaaclab "$@" || status=$?
echo "isaaclab tier finished in $((SECONDS - start)) s (exit $status)"
exit $status
