#!/usr/bin/env bash
# Wheels for running omni-rl's GPU checks (tools/gpu/checks.sh) on a CUDA machine that can reach no package index
# but has CPython 3.12, a CUDA torch, transformers, peft, accelerate, pytest and pytest-xdist installed (a typical
# CUDA image): the dependencies such an image lacks, at the versions this environment tested, and hatchling to
# build omni-rl and its plugins there from the working tree (their wheels would carry the shapes model's weights a
# second time). Writes .gpu-wheels/ (~10 MB) and Ray's wheel split in three parts under .gpu-ray/ (~27 MB each:
# a transfer of 64 MiB that already carries the ~26 MB working tree takes one part at a time). Both folders are
# git-ignored.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
rm -rf .gpu-wheels .gpu-ray
mkdir -p .gpu-wheels .gpu-ray

version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
target=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
missing=(diffusers cattrs tomli tomli_w importlib_metadata jsonschema jsonschema-specifications referencing rpds-py
    levenshtein rapidfuzz hatchling trove-classifiers pathspec)
pinned=()
for name in "${missing[@]}"; do
    if v=$(version "$name" 2>/dev/null); then pinned+=("$name==$v"); else pinned+=("$name"); fi
done
"$PY" -m pip download -q "${target[@]}" -d .gpu-wheels "${pinned[@]}"
"$PY" -m pip download -q "${target[@]}" -d .gpu-ray "ray==$(version ray)"

wheel=$(ls .gpu-ray/ray-*.whl)
basename "$wheel" > .gpu-ray/name
split -n 3 -d "$wheel" .gpu-ray/ray.part
rm "$wheel"
du -sh .gpu-wheels .gpu-ray/ray.part0*
