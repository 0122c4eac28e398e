#!/usr/bin/env bash
# matrix.sh: the seeds' speed-switch comparison matrix (issue 5). Each configuration is a fresh
# `seqtrain train` process on a generated CSV of the workload's shape, stopped by
# train.max_steps, with a train record per step in metrics.jsonl; the report turns those into
# ms/step and reads peak RSS from /usr/bin/time. Writes bench/results/matrix-<date>.md and .csv
# (raw runs in bench/results/matrix-<date>/).
#
#   bench/matrix.sh                            2 threads, workloads W1 W2, 20 timed steps
#   THREADS=1 WORKLOADS="W1" bench/matrix.sh
#   STEPS=3 WARMUP=1 bench/matrix.sh           a quick check that everything runs
#   REPEAT=3 bench/matrix.sh                   3 rounds; each row keeps its fastest run
#   CONFIGS="baseline bf16" bench/matrix.sh    a subset of the configurations below
#   BUILD_DIR=build-bench bench/matrix.sh      build directory (default build)
#   PEERS=none bench/matrix.sh                 seqtrain alone (default: every PyTorch peer present)
#
# Configurations (everything else equal: AdamW, MSE, grad_clip 1, no shuffle, no val/test):
#   baseline   runtime.precision fp32, data.workers 0, runtime.autotune false
#   bf16       mixed precision only (runtime.precision bf16)
#   loader     loader only (data.workers auto, data.prefetch 2)
#   autotune   runtime.autotune true only
#   ckpt       train.grad_checkpoint true only (the memory line)
#   all        bf16 + workers auto + autotune
# PyTorch peers (bench/torch_matrix.py, the same CSV and loop in plain PyTorch): Debian's
# /usr/bin/python3 (torch 1.13, tens of seconds a step here, so SLOW_STEPS (2) after
# SLOW_WARMUP (1) steps, one round) and bench/.venv/bin/python (PyPI torch, when
# bench/setup_venv.sh made it). They run the rows PyTorch has an equivalent for: baseline,
# bf16 (torch.autocast on CPU), loader and all (DataLoader num_workers TORCH_WORKERS, default
# the cores the threads leave free, at least 1), right after seqtrain's run of the same row.
# ms/step of a run is the median over the steps after the first WARMUP (those hold the arena
# sizing and the autotuner's timing). Activation memory comes from one
# `bench_step --grad-checkpoint` per workload (the trainer does not report it).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
WORKLOADS=${WORKLOADS:-"W1 W2"}
CONFIGS=${CONFIGS:-"baseline bf16 loader autotune ckpt all"}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
REPEAT=${REPEAT:-1}
BUILD_DIR=${BUILD_DIR:-build}
PEERS=${PEERS:-auto}
SLOW_STEPS=${SLOW_STEPS:-2}
SLOW_WARMUP=${SLOW_WARMUP:-1}
TORCH_WORKERS=${TORCH_WORKERS:-$(( $(nproc) > THREADS ? $(nproc) - THREADS : 1 ))}

shape_of() {  # workload -> "cell batch lookback features hidden layers"
  case "$1" in
    W1) echo "lstm 256 150 8 128 2" ;;
    W1GRU) echo "gru 256 150 8 128 2" ;;
    W2) echo "lstm 32 256 128 512 2" ;;
    *) echo "matrix.sh: unknown workload '$1' (W1, W1GRU or W2)" >&2; exit 2 ;;
  esac
}
switches_of() {  # config -> "precision workers autotune grad_checkpoint"
  case "$1" in
    baseline) echo "fp32 0 false false" ;;
    bf16) echo "bf16 0 false false" ;;
    loader) echo "fp32 auto false false" ;;
    autotune) echo "fp32 0 true false" ;;
    ckpt) echo "fp32 0 false true" ;;
    all) echo "bf16 auto true false" ;;
    *) echo "matrix.sh: unknown configuration '$1' (baseline bf16 loader autotune ckpt all)" >&2; exit 2 ;;
  esac
}
for w in $WORKLOADS; do shape_of "$w" >/dev/null; done
for c in $CONFIGS; do switches_of "$c" >/dev/null; done
[ -x /usr/bin/time ] || { echo "matrix.sh: needs /usr/bin/time (Debian package 'time') for peak RSS" >&2; exit 2; }

declare -A PEER_CMD=()
if [ "$PEERS" = auto ]; then
  PEERS=""
  /usr/bin/python3 -c 'import torch' 2>/dev/null && PEERS="torch-debian"
  [ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import torch' 2>/dev/null && PEERS="$PEERS torch-pypi"
elif [ "$PEERS" = none ]; then
  PEERS=""
fi
for e in $PEERS; do
  case "$e" in
    torch-debian) PEER_CMD[$e]="/usr/bin/python3 bench/torch_matrix.py" ;;
    torch-pypi)
      [ -x bench/.venv/bin/python ] || { echo "matrix.sh: PEERS names torch-pypi but bench/.venv/bin/python is missing; create it with bench/setup_venv.sh" >&2; exit 2; }
      PEER_CMD[$e]="bench/.venv/bin/python bench/torch_matrix.py" ;;
    *) echo "matrix.sh: unknown peer '$e' (torch-debian, torch-pypi, auto or none)" >&2; exit 2 ;;
  esac
done
peer_plan() {  # peer round -> "steps warmup" when it runs this round, else nothing
  if [ "$1" = torch-debian ]; then [ "$2" -eq 1 ] && echo "$SLOW_STEPS $SLOW_WARMUP"; return 0; fi
  echo "$STEPS $WARMUP"
}

stamp=$(date +%Y%m%d-%H%M%S)
out=bench/results/matrix-$stamp
mkdir -p "$out/runs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" --target seqtrain bench_step >/dev/null
SEQTRAIN="$BUILD_DIR/seqtrain"
BENCH="$BUILD_DIR/bench_step"

source bench/pin.sh

torch_switches() {  # config -> "precision workers" of its PyTorch equivalent, or nothing
  case "$1" in
    baseline) echo "fp32 0" ;;
    bf16) echo "bf16 0" ;;
    loader) echo "fp32 $TORCH_WORKERS" ;;
    all) echo "bf16 $TORCH_WORKERS" ;;
  esac
}

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- src 2>/dev/null)" ]; then rev="$rev+dirty"; fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== f32 matmul peak ($THREADS threads)"
"${PIN[@]}" "$BENCH" --workload peak --threads "$THREADS" --json "$out/peak.json" >/dev/null
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_gflops"])' "$out/peak.json")
echo "   $peak GFLOP/s"

for w in $WORKLOADS; do
  read -r cell batch lookback features hidden layers <<<"$(shape_of "$w")"
  # Rows for WARMUP+STEPS full batches of windows (lookback + horizon 1 rows each), all train.
  most=$(( WARMUP + STEPS > SLOW_WARMUP + SLOW_STEPS ? WARMUP + STEPS : SLOW_WARMUP + SLOW_STEPS ))
  rows=$(( (most + 1) * batch + lookback + 1 ))
  /usr/bin/python3 - "$tmp/$w.csv" "$rows" "$features" <<'PY'
import math, random, sys
path, rows, feats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(0)
with open(path, "w") as f:
    f.write(",".join(f"f{i}" for i in range(feats)) + "\n")
    for t in range(rows):
        f.write(",".join(f"{math.sin(t / (7 + 2 * i)) + 0.1 * rng.gauss(0, 1):.6f}" for i in range(feats)) + "\n")
PY
  feature_list=$(seq -s, -f 'f%g' 0 $((features - 1)))
  for c in $CONFIGS; do
    read -r precision workers autotune ckpt <<<"$(switches_of "$c")"
    cat >"$tmp/$w.$c.yaml" <<YAML
seed: 0
data: {source: csv, path: $tmp/$w.csv, features: [$feature_list], targets: [f$((features - 1))], lookback: $lookback, horizon: 1, split: [1.0, 0, 0], workers: $workers, prefetch: 2}
model: {type: $cell, hidden: $hidden, layers: $layers}
train: {epochs: 1, max_steps: $((WARMUP + STEPS)), batch_size: $batch, shuffle: false, loss: mse, grad_clip: 1.0, log_every: 1, grad_checkpoint: $ckpt, optimizer: {name: adamw, lr: 0.001}}
runtime: {threads: $THREADS, precision: $precision, autotune: $autotune}
YAML
  done
  # The configurations (each followed by its PyTorch peers) take turns within each round, so a
  # burst of load elsewhere hits them alike.
  for ((r = 1; r <= REPEAT; r++)); do
    for c in $CONFIGS; do
      read -r precision workers autotune ckpt <<<"$(switches_of "$c")"
      d="$out/runs/$w.$c.seqtrain.r$r"
      mkdir -p "$d"
      echo "== $w $c, round $r/$REPEAT ($STEPS steps after $WARMUP warm-up)"
      rm -rf "$tmp/run"
      if ! "${PIN[@]}" /usr/bin/time -f '%M' -o "$d/maxrss_kb" "$SEQTRAIN" train "$tmp/$w.$c.yaml" --out "$tmp/run" \
          >"$d/stdout.txt" 2>"$d/log.txt"; then
        echo "matrix.sh: seqtrain train failed for $w $c; its log:" >&2
        cat "$d/log.txt" >&2
        exit 1
      fi
      cp "$tmp/run/metrics.jsonl" "$d/"
      cp "$tmp/$w.$c.yaml" "$d/config.yaml"
      cat >"$d/run.json" <<JSON
{"workload": "$w", "config": "$c", "engine": "seqtrain", "round": $r, "cell": "$cell", "batch": $batch, "lookback": $lookback,
 "features": $features, "hidden": $hidden, "layers": $layers, "outputs": 1, "precision": "$precision",
 "workers": "$workers", "autotune": $autotune, "grad_checkpoint": $ckpt, "steps": $STEPS, "warmup": $WARMUP}
JSON
      python3 bench/matrix_report.py --run "$d"
      read -r tprec tworkers <<<"$(torch_switches "$c")"
      [ -n "$tprec" ] || continue
      for e in $PEERS; do
        plan=$(peer_plan "$e" "$r")
        [ -n "$plan" ] || continue
        read -r psteps pwarmup <<<"$plan"
        d="$out/runs/$w.$c.$e.r$r"
        mkdir -p "$d"
        echo "== $w $c $e ($tprec, $tworkers DataLoader workers), round $r ($psteps steps after $pwarmup warm-up)"
        # shellcheck disable=SC2086  # PEER_CMD holds an interpreter and a script
        if ! "${PIN[@]}" /usr/bin/time -f '%M' -o "$d/maxrss_kb" ${PEER_CMD[$e]} --csv "$tmp/$w.csv" --cell "$cell" \
            --batch "$batch" --lookback "$lookback" --hidden "$hidden" --layers "$layers" --threads "$THREADS" \
            --steps "$psteps" --warmup "$pwarmup" --precision "$tprec" --workers "$tworkers" \
            --json "$d/result.json" >"$d/log.txt" 2>&1; then
          echo "matrix.sh: $e failed for $w $c; its log:" >&2
          cat "$d/log.txt" >&2
          exit 1
        fi
        cat >"$d/run.json" <<JSON
{"workload": "$w", "config": "$c", "engine": "$e", "round": $r, "cell": "$cell", "batch": $batch, "lookback": $lookback,
 "features": $features, "hidden": $hidden, "layers": $layers, "outputs": 1, "precision": "$tprec",
 "workers": "$tworkers", "autotune": false, "grad_checkpoint": false, "steps": $psteps, "warmup": $pwarmup}
JSON
        python3 bench/matrix_report.py --run "$d"
      done
    done
  done
  # Activation memory with and without gradient checkpointing, from the step benchmark.
  echo "== $w activation memory (bench_step --grad-checkpoint)"
  "${PIN[@]}" "$BENCH" --workload "$w" --threads "$THREADS" --steps 2 --warmup 1 --profile-steps 1 \
    --peak-gflops "$peak" --rev "$rev" --grad-checkpoint --json "$out/activations-$w.json" >/dev/null
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
# The peak once more at the end: the report uses the higher of the two (a peak is a best case).
"${PIN[@]}" "$BENCH" --workload peak --threads "$THREADS" --json "$out/peak-end.json" >/dev/null

python3 - "$out/meta.json" <<EOF
import json, sys
json.dump({
  "date": "$stamp", "rev": "$rev", "threads": $THREADS, "pinned": "$pinned",
  "cpu": "$(lscpu | sed -n 's/^Model name: *//p' | head -1)", "nproc": $(nproc),
  "load_before": "$load_before", "load_after": "$load_after",
  "steps": $STEPS, "warmup": $WARMUP, "repeat": $REPEAT,
  "workloads": "$WORKLOADS".split(), "configs": "$CONFIGS".split(), "peers": "$PEERS".split(),
  "slow_steps": $SLOW_STEPS, "slow_warmup": $SLOW_WARMUP, "torch_workers": $TORCH_WORKERS,
  "command": "THREADS=$THREADS WORKLOADS='$WORKLOADS' CONFIGS='$CONFIGS' PEERS='${PEERS:-none}' STEPS=$STEPS WARMUP=$WARMUP REPEAT=$REPEAT bench/matrix.sh",
}, open(sys.argv[1], "w"), indent=2)
EOF
python3 bench/matrix_report.py "$out" "bench/results/matrix-$stamp"
echo "wrote bench/results/matrix-$stamp.md and .csv (raw runs in $out/)"
