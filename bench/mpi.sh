#!/usr/bin/env bash
# Data-parallel training on one machine (docs/DISTRIBUTED.md): the same job as 1 process x 2
# threads and as 2 ranks x 1 thread under mpirun, on W1's shape (LSTM 128 x 2, batch 256,
# lookback 150, 8 features) and W2's (LSTM 512 x 2, batch 32, lookback 256, 128 features).
# Throughput is the logged samples_per_s (the global batch over every rank) averaged over the
# steps after WARMUP; the communication share is rank 0's time inside collectives (waits for the
# other rank included) over the run's training time, as `seqtrain: mpi:` prints it. The 2-rank
# job runs twice: with the overlap's gradient buckets (the default, SEQTRAIN_MPI_BUCKET_KB=256)
# and without (SEQTRAIN_MPI_BUCKET_KB=0: one all-reduce after the backward); the time the
# buckets took off rank 0's blocking collectives is the communication they hid.
# bench_mpi_allreduce (built beside BIN) then times the sums alone, after a barrier.
# Usage: [STEPS=12] [WARMUP=2] [BIN=build/seqtrain] bash bench/mpi.sh   (from the repository root)
set -euo pipefail
STEPS=${STEPS:-12}; WARMUP=${WARMUP:-2}
BIN=${BIN:-build/seqtrain}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to core --mca btl self,vader)

# name features lookback hidden batch
make_job() {
  local name=$1 F=$2 L=$3 H=$4 B=$5
  # The training split holds STEPS + 1 batches; validation and test a window each at least.
  local rows=$(( (B * (STEPS + 1) + L) * 10 / 6 + 10 )); [ "$rows" -lt $(( 5 * (L + 2) )) ] && rows=$(( 5 * (L + 2) ))
  /usr/bin/python3 - "$W/$name.csv" "$rows" "$F" <<'PY'
import sys, numpy as np
path, rows, F = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0); t = np.arange(rows)[:, None]
x = np.sin(t / (7 + np.arange(F))) + 0.1 * rng.standard_normal((rows, F))
np.savetxt(path, x, delimiter=",", header=",".join(f"f{i}" for i in range(F)), comments="", fmt="%.5f")
PY
  local feats; feats=$(/usr/bin/python3 -c "print(','.join(f'f{i}' for i in range($F)))")
  cat > "$W/$name.yaml" <<YAML
data: {source: csv, path: $W/$name.csv, features: [$feats], targets: [f0], lookback: $L, horizon: 1, split: [0.6, 0.2, 0.2]}
model: {type: lstm, hidden: $H, layers: 2}
train: {epochs: 1, max_steps: $STEPS, batch_size: $B, shuffle: false, loss: mse, grad_clip: 1.0, log_every: 1, eval_every: "0", optimizer: {name: adamw, lr: 0.001}}
runtime: {threads: 0}
YAML
}

rate() {  # mean samples_per_s of the steps after WARMUP
  /usr/bin/python3 -c "
import json; r=[json.loads(l) for l in open('$1/metrics.jsonl')]
s=[x['samples_per_s'] for x in r if x.get('split')=='train' and x['step']>$WARMUP]
print(f'{sum(s)/len(s):.1f}')"
}

printf "%-4s %-16s %-16s %-16s %-28s %s\n" job "1x2 thr samp/s" "2x1 samp/s" "2x1 no-overlap" "comm share, overlap" "comm share, no overlap"
for job in "W1 8 150 128 256" "W2 128 256 512 32"; do
  set -- $job
  make_job "$@"
  "$BIN" train "$W/$1.yaml" --threads 2 --out "$W/$1-one" --quiet > /dev/null
  "${MPIRUN[@]}" -np 2 "$BIN" train "$W/$1.yaml" --threads 1 --out "$W/$1-two" --quiet > /dev/null 2> "$W/$1-two.err"
  SEQTRAIN_MPI_BUCKET_KB=0 "${MPIRUN[@]}" -x SEQTRAIN_MPI_BUCKET_KB -np 2 "$BIN" train "$W/$1.yaml" --threads 1 \
    --out "$W/$1-flat" --quiet > /dev/null 2> "$W/$1-flat.err"
  one=$(rate "$W/$1-one"); two=$(rate "$W/$1-two"); flat=$(rate "$W/$1-flat")
  share=$(sed -n 's/.*spent \(.*\) in collectives (\(.*\)).*/\1 (\2)/p' "$W/$1-two.err")
  share_flat=$(sed -n 's/.*spent \(.*\) in collectives (\(.*\)).*/\1 (\2)/p' "$W/$1-flat.err")
  printf "%-4s %-16s %-16s %-16s %-28s %s\n" "$1" "$one" "$two" "$flat" "$share" "$share_flat"
  echo "     overlap: $(sed -n 's/^seqtrain: mpi: overlap: //p' "$W/$1-two.err")"
done
echo "the sums alone (after a barrier: no wait for a slower rank):"
"${MPIRUN[@]}" -np 2 "$(dirname "$BIN")/bench_mpi_allreduce" 20
