#!/usr/bin/env bash
# gpt.sh: the GPT step benchmark (issue 14) in one command. Builds bench_gpt, bench_step (for the
# f32 matmul peak) and bench_attention, measures the peak, then on each shape (cpu, gpu) and
# precision (fp32, bf16) runs seqtrain (build/bench_gpt) and the PyTorch peers (bench/torch_gpt.py)
# with the same thread count, pinned to the same cores, then the attention micro-benchmark, and
# writes bench/results/gpt-<date>.md (raw JSON and logs in bench/results/gpt-<date>/).
#
#   bench/gpt.sh                         2 threads; gpu shape at batch 8 (GPU_BATCH)
#   GPU_BATCH=64 bench/gpt.sh            the GPU recipe's own batch (about 8x longer)
#   SHAPES=cpu PRECISIONS=fp32 bench/gpt.sh
#   BUILD_DIR=build THREADS=2 bench/gpt.sh
#   OUT_DIR=bench/results/gpt-<date> bench/gpt.sh   continue an interrupted run: rows whose JSON
#                                        exists there are kept, the rest are run
#
# Peers: PyPI torch 2.x (TORCH_PY, default bench/.venv/bin/python, made by
# bench/setup_venv.sh) eager and torch.compile (compile time reported apart), fp32 and bf16
# autocast; Debian's /usr/bin/python3 (torch 1.13, no torch.compile, no SDPA) eager fp32 on the
# cpu shape only: it runs its GEMMs on the reference (netlib) BLAS here, about 1 GFLOP/s, two
# minutes a gpu-shape step (DEBIAN_GPU=1 adds that shape, DEBIAN_BF16=1 its bf16 autocast).
# torch.compile compiles into a fresh inductor cache (TORCHINDUCTOR_CACHE_DIR, a new temporary
# directory per run) so its compile time is a cold one; WARM_COMPILE=1 uses the user's cache.
#
# Shared machine guard: before every run the script waits until no compiler (cc1plus) of another
# process is running (QUIET_MAX seconds at most), and while a run goes a sampler looks every
# second for compilers or other runnable processes outside the run's own process tree; a run
# where more than max(1, 5%) of the samples saw any is repeated (RETRIES times at most) and the report says how often that happened
# and whether the kept run was still disturbed.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
BUILD_DIR=${BUILD_DIR:-build}
SHAPES=${SHAPES:-"cpu gpu"}
PRECISIONS=${PRECISIONS:-"fp32 bf16"}
GPU_BATCH=${GPU_BATCH:-8}
RETRIES=${RETRIES:-2}
QUIET_MAX=${QUIET_MAX:-1200}
TORCH_PY=${TORCH_PY:-}
if [ -z "$TORCH_PY" ]; then
  for c in bench/.venv/bin/python; do [ -x "$c" ] && { TORCH_PY=$c; break; }; done
fi

stamp=$(date +%Y%m%d-%H%M%S)
out=${OUT_DIR:-bench/results/gpt-$stamp}
stamp=${out##*/gpt-}
mkdir -p "$out/runs"

if [ "${NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" --target bench_gpt bench_step bench_attention >/dev/null
fi
source bench/pin.sh
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- src 2>/dev/null)" ]; then rev="$rev+dirty"; fi

# The pids of process $1 and all its descendants, one per line.
tree_of() { ps -eo pid=,ppid= | awk -v root="$1" '{p[$1]=$2} END {for (k in p) {x=k; while (x>1) {if (x==root) {print k; break}; x=p[x]}}}'; }
foreign_compilers() { pgrep -x cc1plus || true; }
wait_quiet() {
  local waited=0
  while [ -n "$(foreign_compilers)" ] && [ "$waited" -lt "$QUIET_MAX" ]; do sleep 5; waited=$((waited + 5)); done
  echo "$waited"
}
# run_guarded NAME CMD...: runs CMD (pinned) until a run was not disturbed or RETRIES repeats are
# used up; writes $out/runs/NAME.guard ("tries disturbed_samples waited_s").
run_guarded() {
  local name=$1; shift
  if [ -f "$out/runs/$name.guard" ] && [ -n "${OUT_DIR:-}" ]; then echo "   (kept from before)"; return 0; fi
  local try=0 bad waited total_wait=0 samples
  while :; do
    waited=$(wait_quiet); total_wait=$((total_wait + waited))
    "${PIN[@]}" "$@" > "$out/runs/$name.log" 2>&1 &
    local job=$! bad=0 samples=0
    while kill -0 "$job" 2>/dev/null; do
      sleep 1
      samples=$((samples + 1))
      local mine; mine=" $(tree_of "$job" | tr '\n' ' ') "
      # Foreign compilers, or foreign runnable processes (other than this sampler's own tools).
      local f
      f=$(ps -eo stat=,pid=,ppid=,comm= | awk -v mine="$mine" -v self=$$ '
        ($1 ~ /^R/ || $4 == "cc1plus") && index(mine, " " $2 " ") == 0 && $2 != self && $3 != self &&
        $4 != "ps" && $4 != "awk" && $4 !~ /^kworker/ {print $2}')
      [ -n "$f" ] && bad=$((bad + 1))
    done
    wait "$job" || { echo "   $name failed, see $out/runs/$name.log" >&2; tail -5 "$out/runs/$name.log" >&2; return 1; }
    try=$((try + 1))
    # The first try's JSON is kept apart: a compile run's retries find the inductor cache warm,
    # so its compile time is the cold one (the report reads it from there).
    [ "$try" = 1 ] && [ -f "$out/runs/$name.json" ] && cp "$out/runs/$name.json" "$out/runs/$name.try1"
    if [ "$bad" -le 1 ] || [ "$((bad * 20))" -le "$samples" ] || [ "$try" -gt "$RETRIES" ]; then break; fi
    echo "   $name: disturbed ($bad samples saw other work), again"
  done
  echo "$try $bad/$samples $total_wait" > "$out/runs/$name.guard"
  grep -E "^(bench_gpt|torch_gpt):" "$out/runs/$name.log" | sed 's/^/   /' || true
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== f32 matmul peak ($THREADS threads)"
run_guarded peak "$BUILD_DIR/bench_step" --workload peak --threads "$THREADS" --json "$out/peak.json"
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_gflops"])' "$out/peak.json")
echo "   $peak GFLOP/s"

steps_for() {  # shape engine -> "steps warmup"
  case "$1:$2" in
    cpu:debian) echo "5 1" ;;
    cpu:*) echo "${CPU_STEPS:-20} 3" ;;
    gpu:debian) echo "2 0" ;;
    gpu:*) echo "${GPU_STEPS:-5} 1" ;;
  esac
}
for shape in $SHAPES; do
  batch=""; [ "$shape" = gpu ] && batch="--batch $GPU_BATCH"
  for prec in $PRECISIONS; do
    read -r st wu <<<"$(steps_for "$shape" seqtrain)"
    echo "== $shape $prec seqtrain"
    # shellcheck disable=SC2086
    run_guarded "$shape.$prec.seqtrain" "$BUILD_DIR/bench_gpt" --shape "$shape" $batch --precision "$prec" \
      --threads "$THREADS" --steps "$st" --warmup "$wu" --profile-steps "$st" --peak-gflops "$peak" --rev "$rev" \
      --json "$out/runs/$shape.$prec.seqtrain.json" || true
    if [ -n "$TORCH_PY" ]; then
      for mode in eager compile; do
        echo "== $shape $prec torch-pypi $mode"
        cache=""
        if [ "$mode" = compile ] && [ "${WARM_COMPILE:-0}" != 1 ]; then cache=$(mktemp -d /tmp/gpt-inductor.XXXXXX); fi
        # shellcheck disable=SC2086
        run_guarded "$shape.$prec.torch-pypi-$mode" ${cache:+env TORCHINDUCTOR_CACHE_DIR=$cache} "$TORCH_PY" bench/torch_gpt.py --shape "$shape" $batch \
          --precision "$prec" --mode "$mode" --threads "$THREADS" --steps "$st" --warmup "$wu" \
          --peak-gflops "$peak" --json "$out/runs/$shape.$prec.torch-pypi-$mode.json" || true
      done
    fi
    if [ -x /usr/bin/python3 ] && { [ "$prec" = fp32 ] || [ "${DEBIAN_BF16:-0}" = 1 ]; } &&
       { [ "$shape" = cpu ] || [ "${DEBIAN_GPU:-0}" = 1 ]; } && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
      read -r dst dwu <<<"$(steps_for "$shape" debian)"
      echo "== $shape $prec torch-debian eager"
      # shellcheck disable=SC2086
      run_guarded "$shape.$prec.torch-debian-eager" /usr/bin/python3 bench/torch_gpt.py --shape "$shape" $batch \
        --precision "$prec" --mode eager --threads "$THREADS" --steps "$dst" --warmup "$dwu" \
        --peak-gflops "$peak" --json "$out/runs/$shape.$prec.torch-debian-eager.json" || true
    fi
  done
done
echo "== attention micro-benchmark"
run_guarded attention "$BUILD_DIR/bench_attention" --threads "$THREADS" --repeats 10 --peak-gflops "$peak" || true
cat "$out/runs/attention.log"
run_guarded peak-end "$BUILD_DIR/bench_step" --workload peak --threads "$THREADS" --json "$out/peak-end.json"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$out/meta.json" <<EOF
import json, sys
json.dump({
  "date": "$stamp", "threads": $THREADS, "pinned": "$pinned", "rev": "$rev",
  "cpu": "$(lscpu | sed -n 's/^Model name: *//p' | head -1)", "nproc": $(nproc),
  "isa": "$(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')",
  "load_before": "$load_before", "load_after": "$load_after", "gpu_batch": $GPU_BATCH,
  "command": "${GPU_BATCH:+GPU_BATCH=$GPU_BATCH }THREADS=$THREADS SHAPES='$SHAPES' PRECISIONS='$PRECISIONS' bench/gpt.sh",
  "peers": {"torch-pypi": "PyPI, $TORCH_PY", "torch-debian": "Debian python3-torch, /usr/bin/python3"},
}, open(sys.argv[1], "w"), indent=2)
EOF
python3 bench/gpt_report.py "$out" > "$out.md"
echo "wrote $out.md (raw JSON and logs in $out/)"
