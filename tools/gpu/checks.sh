#!/usr/bin/env bash
# The GPU checks in one command, on a CUDA machine without package access (wheels from tools/gpu/wheelhouse.sh).
#
#   tools/gpu/checks.sh stage                 # calls 1 and 2, carrying .gpu-ray/ray.part00 (and .gpu-ray/name),
#                                             #   then .gpu-ray/ray.part01: keeps each part outside the repository
#   tools/gpu/checks.sh run STEP[=SECONDS]... # call 3 at once, carrying .gpu-ray/ray.part02 and .gpu-wheels:
#                                             #   joins Ray's wheel, installs everything, runs the steps
#
# STEPs, each under its own time limit in seconds (default in brackets), in the order given:
#   suite [300]  the GPU suite: pytest -m gpu -n 4 tests/gpu (per-case ratios in gpu_report.jsonl;
#                SUITE_ARGS="-k cuda_graphs" for some)
#   bench [180]  benchmarks/overhead.py --device cuda: framework vs bare vs diffusers' pipeline, MFU
#   async [120]  benchmarks/async_rollout.py --device cuda: colocated vs one-step-off rollout
#   speed [300]  benchmarks/speed_options.py: each speed option vs all off (SPEED_ONLY="cuda_graphs flash" for some)
#   real  [300]  benchmarks/real_sizes.py: SD3.5-Large, FLUX.1-dev, Qwen-Image at their published sizes
# Everything lands in $OUT (default ./gpu-out): one log per step, gpu_report.jsonl, and benchmarks.md, a copy of
# docs/benchmarks.md with the measured sections rewritten (copy it back over docs/benchmarks.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
STASH=${STASH:-/root/omni-rl-ray}
mkdir -p "$OUT" "$STASH"

if [[ "${1:-}" == stage ]]; then
    cp .gpu-ray/ray.part* "$STASH"/ && { [[ ! -f .gpu-ray/name ]] || cp .gpu-ray/name "$STASH"/; }
    ls -l "$STASH"
    exit
fi
[[ "${1:-}" == run ]] || { sed -n 2,20p "$0"; exit 2; }
shift

# Ray's wheel from its parts: the staged ones and the one carried now, in name order
cp .gpu-ray/ray.part* "$STASH"/ 2>/dev/null
name=$(cat "$STASH/name" .gpu-ray/name 2>/dev/null | head -n 1)
[[ -n "$name" ]] || { echo "no .gpu-ray/name: run 'stage' with the first part"; exit 1; }
cat "$STASH"/ray.part* > "/tmp/$name"
python3 -c "import zipfile, sys; zipfile.ZipFile(sys.argv[1]).testzip()" "/tmp/$name" \
    || { echo "Ray's wheel is incomplete: stage every part first ($(ls "$STASH"))"; exit 1; }

site=/tmp/site
install=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site")
"${install[@]}" .gpu-wheels/*.whl "/tmp/$name" || exit 1
export PYTHONPATH=$site HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export PATH=$site/bin:$PATH
# omni-rl and its first-party plugins from this working tree, with the carried hatchling as build backend
mapfile -t plugins < <(sed -nE 's/^-e ([^[ ]+).*/\1/p' requirements-plugins.txt)
"${install[@]}" --no-build-isolation . "${plugins[@]}" || exit 1

cp docs/benchmarks.md "$OUT/benchmarks.md"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch, diffusers, ray; print('torch', torch.__version__, 'diffusers', diffusers.__version__, \
'ray', ray.__version__)"
} 2>&1 | tee "$OUT/device.log"

cache=/tmp/omni-rl-bench-cache
for step in "$@"; do
    key=${step%%=*}
    limit=${step#*=}
    [[ "$limit" == "$step" ]] && limit=""
    case $key in
        suite)
            # shellcheck disable=SC2206 # SUITE_ARGS is a list of pytest arguments
            cmd=(python3 -m pytest -q -m gpu -n 4 tests/gpu -p no:cacheprovider ${SUITE_ARGS:-})
            limit=${limit:-300} ;;
        bench) cmd=(python3 benchmarks/overhead.py --device cuda --repeats 3 --cache-dir $cache); limit=${limit:-180} ;;
        async) cmd=(python3 benchmarks/async_rollout.py --device cuda); limit=${limit:-120} ;;
        speed)
            # shellcheck disable=SC2206 # SPEED_ONLY is a list of option names
            cmd=(python3 benchmarks/speed_options.py --device cuda --repeats 2 --cache-dir $cache
                ${SPEED_ONLY:+--only $SPEED_ONLY})
            limit=${limit:-300} ;;
        real) cmd=(python3 benchmarks/real_sizes.py); limit=${limit:-300} ;;
        *) echo "unknown step $key (suite, bench, async, speed, real)"; continue ;;
    esac
    [[ $key == suite ]] || cmd+=(--out "$OUT/benchmarks.md")
    echo "== $key (limit $limit s): ${cmd[*]}"
    started=$(date +%s)
    OMNI_RL_GPU_REPORT="$OUT/gpu_report.jsonl" timeout "$limit" "${cmd[@]}" > "$OUT/$key.log" 2>&1
    echo "== $key: exit $? after $(( $(date +%s) - started )) s"
    tail -n 15 "$OUT/$key.log"
done
