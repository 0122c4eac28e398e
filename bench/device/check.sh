#!/usr/bin/env bash
# bench/device/check.sh: everything a GPU machine has to prove for the CUDA backend, in one run
# of at most 8 minutes, written to one report ($OUT/report.txt, the summary last on stdout):
#  1. the machine: GPU, driver, PyTorch, and the bf16 / TF32 matmul peaks through PyTorch;
#  2. seqtrain: unpacked from .devbundle/seqtrain.tar.xz (bench/device/bundle.sh, made where the
#     Debian packages are) or, where the machine has them, built from this tree;
#  3. every CUDA test (each op against the reference backend, the NCCL communicator on one rank):
#     seqtrain_tests --gtest_filter *Cuda*;
#  4. end to end, 100 steps each, by the runs' logged losses (compare_runs.py): the forecaster (also
#     bidirectional, and as a transformer encoder) and the char GPT on CUDA against the CPU in fp32 (rtol 1e-3), bf16 / fp16 against fp32 on CUDA
#     (2%; the GPT has no fp16), a resumed CUDA run against an unbroken one (exact), a CUDA checkpoint resumed on the
#     CPU and a CPU one on CUDA, and (where mpirun is) `mpirun -np 1` on CUDA (NCCL) against the plain run;
#  5. benchmarks against the PyTorch of the machine (bench_cuda vs torch_cuda.py): W1 and moola's
#     BiLSTM against PyTorch fp32 and AMP with cudnn.benchmark, the char GPT against eager and
#     torch.compile; W1 and the GPT (dropout 0, so its step can be captured) with
#     runtime.cuda_graphs auto against off (the graphs rows).
# Each step has its own time limit, so one hang costs its step only. Exit status: the number of
# failed checks (0: all passed). QUICK=1 (a short lease's last minutes): the tests and the
# benchmarks' main rows only, no end-to-end runs.
#   OUT=/tmp/out bash bench/device/check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-/tmp/seqtrain-device}
mkdir -p "$OUT"
REPORT=$OUT/report.txt
: >"$REPORT"
FAILED=0
T0=$(date +%s)
say() { echo "$*" | tee -a "$REPORT"; }
elapsed() { echo "$(( $(date +%s) - T0 ))s"; }
check() {  # check LABEL CMD...: runs CMD, records PASS/FAIL with its exit status
  local label=$1; shift
  if "$@" >>"$OUT/check.log" 2>&1; then say "PASS $label"; else say "FAIL $label (exit $?)"; FAILED=$((FAILED + 1)); fi
}

say "== machine ($(elapsed))"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$REPORT"
PY=${PYTHON:-python3}
timeout 120 $PY - <<'PYEOF' 2>&1 | tee -a "$REPORT"
import time, torch
print(f"torch {torch.__version__}, cuda {torch.version.cuda}, cudnn {torch.backends.cudnn.version()}, {torch.cuda.get_device_name(0)}")
for name, dt, tf32 in (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True), ("fp32", torch.float32, False)):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    n = 8192 if dt == torch.bfloat16 else 4096
    a = torch.randn(n, n, device="cuda", dtype=dt); b = torch.randn(n, n, device="cuda", dtype=dt)
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10): a @ b
    torch.cuda.synchronize(); s = (time.perf_counter() - t) / 10
    print(f"peak_{name}_tflops {2 * n ** 3 / s / 1e12:.1f}")
PYEOF

say "== seqtrain ($(elapsed))"
LIBS=""
NV=$($PY -c "import nvidia, os; print(list(nvidia.__path__)[0])" 2>/dev/null || true)
[ -n "$NV" ] && LIBS=$(find "$NV" -maxdepth 3 -type d -name lib | tr '\n' ':')
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && LIBS="$LIBS$d:"; done
if [ -f .devbundle/seqtrain.tar.xz ]; then
  BIN=/tmp/seqtrain-bundle
  rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf .devbundle/seqtrain.tar.xz
  export LD_LIBRARY_PATH="$BIN/lib:$LIBS${LD_LIBRARY_PATH:-}"
  BIN=$BIN/bin
  say "bundle of commit $(cat .devbundle/commit 2>/dev/null)"
else
  BUILD=${BUILD_DIR:-build-device}
  if ! timeout 300 bash -c "cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=native \
        >$OUT/build.log 2>&1 && cmake --build $BUILD -j \$(nproc) >>$OUT/build.log 2>&1"; then
    say "FAIL build (see build.log)"; tail -20 "$OUT/build.log"; exit 99
  fi
  BIN=$ROOT/$BUILD
  export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:-}"
fi
ST=$BIN/seqtrain
say "seqtrain: $(ls -la "$ST" | cut -c30-)"

say "== CUDA tests ($(elapsed))"
timeout 240 "$BIN/seqtrain_tests" --gtest_filter='*Cuda*:*cuda*:*DeviceChoice*:*DeviceCommunicator*' --gtest_brief=1 \
  >"$OUT/cuda_tests.log" 2>&1
rc=$?
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests ran" "$OUT/cuda_tests.log" | tail -40 | tee -a "$REPORT"
if [ $rc -ne 0 ]; then say "FAIL CUDA tests (exit $rc)"; FAILED=$((FAILED + 1)); else say "PASS CUDA tests"; fi
check "CUDA recurrent tests with SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked" env SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked \
  timeout 120 "$BIN/seqtrain_tests" --gtest_filter='*CudaRnn*' --gtest_brief=1

if [ "${QUICK:-0}" != 1 ]; then
say "== end to end, 100 steps ($(elapsed))"
RUNS=/tmp/seqtrain-runs
rm -rf "$RUNS" && mkdir -p "$RUNS"
F=examples/forecast.yaml
G=examples/shakespeare_gpt.yaml
# A constant learning rate: a cosine schedule's length is max_steps, so the resumed runs' first
# leg (50 steps) would follow another schedule than the unbroken 100.
COMMON=(--set train.max_steps=100 --set train.log_every=10 --set train.early_stopping.patience=1000
        --set train.schedule.name=constant --set runtime.deterministic=true --quiet)
GPT=(--set data.path=$ROOT/docs/ARCHITECTURE.md --set train.eval_every=50u --set train.eval_iters=4)
train() {  # train NAME CONFIG ARGS...: one run into $RUNS/NAME, its output in check.log
  local name=$1 cfg=$2; shift 2
  echo "-- train $name: $cfg $*" >>"$OUT/check.log"
  timeout 120 "$ST" train "$cfg" --out "$RUNS/$name" "${COMMON[@]}" "$@" >>"$OUT/check.log" 2>&1 \
    || { say "FAIL train $name (exit $?): $(tail -2 "$OUT/check.log" | tr '\n' ' ')"; FAILED=$((FAILED + 1)); }
}
compare() { check "$1" $PY bench/device/compare_runs.py "$RUNS/$2" "$RUNS/$3" --rtol "$4" --label "$1" "${@:5}"; }
train f_cpu "$F" --set runtime.device=cpu
train f_cuda "$F" --set runtime.device=cuda
compare "forecaster cuda fp32 vs cpu fp32 (1e-3)" f_cuda f_cpu 1e-3
train f_cuda16 "$F" --set runtime.device=cuda --set runtime.precision=fp16
compare "forecaster cuda fp16 vs fp32 (2%)" f_cuda16 f_cuda 0.02
train f_cudabf "$F" --set runtime.device=cuda --set runtime.precision=bf16
compare "forecaster cuda bf16 vs fp32 (2%)" f_cudabf f_cuda 0.02
SEQTRAIN_CUDNN_RNN_ALGO=persist_static train f_cudabf_ps "$F" --set runtime.device=cuda --set runtime.precision=bf16
compare "forecaster cuda bf16 persist_static vs fp32 (2%)" f_cudabf_ps f_cuda 0.02
# The transformer encoder (model.type transformer over the same windows) and a bidirectional
# LSTM (cuDNN's whole bidirectional stack in one call).
ENC=(--set model.type=transformer --set model.heads=4)
train e_cpu "$F" "${ENC[@]}" --set runtime.device=cpu
train e_cuda "$F" "${ENC[@]}" --set runtime.device=cuda
compare "transformer encoder cuda fp32 vs cpu fp32 (1e-3)" e_cuda e_cpu 1e-3
train e_cudabf "$F" "${ENC[@]}" --set runtime.device=cuda --set runtime.precision=bf16
# bf16 moves this encoder's small final validation loss by 2-3.5% on either device (the CPU's
# own bf16 run: -2.1% of its fp32 one, CUDA's +2.5%), its training losses by under 1%: judged at 3%.
compare "transformer encoder cuda bf16 vs fp32 (3%)" e_cudabf e_cuda 0.03
train b_cpu "$F" --set model.bidirectional=true --set runtime.device=cpu
train b_cuda "$F" --set model.bidirectional=true --set runtime.device=cuda
compare "bidirectional forecaster cuda fp32 vs cpu fp32 (1e-3)" b_cuda b_cpu 1e-3
train g_cpu "$G" "${GPT[@]}" --set runtime.device=cpu
train g_cuda "$G" "${GPT[@]}" --set runtime.device=cuda
compare "char GPT cuda fp32 vs cpu fp32 (1e-3)" g_cuda g_cpu 1e-3
train g_cudabf "$G" "${GPT[@]}" --set runtime.device=cuda --set runtime.precision=bf16
compare "char GPT cuda bf16 vs fp32 (2%)" g_cudabf g_cuda 0.02
# runtime.cuda_graphs (auto, the default, in every CUDA run above): captured and replayed steps
# against uncaptured ones on the GPU, the same kernels on the same values, so the logged losses
# must be equal; the log says whether and why steps ran uncaptured.
train f_cuda_nograph "$F" --set runtime.device=cuda --set runtime.cuda_graphs=off
compare "forecaster cuda graphs auto vs off (exact)" f_cuda f_cuda_nograph 0
train g_cuda_nograph "$G" "${GPT[@]}" --set runtime.device=cuda --set runtime.cuda_graphs=off
compare "char GPT cuda graphs auto vs off (exact)" g_cuda g_cuda_nograph 0
grep -h "cuda_graphs" "$OUT/check.log" | sort | uniq -c | head -8 | tee -a "$REPORT"
# Resume: 50 steps, then on to 100 from the checkpoint, on CUDA and moved to the other device.
for dev in cuda cpu; do
  other=$([ $dev = cuda ] && echo cpu || echo cuda)
  train "r_$dev" "$F" --set runtime.device=$dev --set train.max_steps=50 --set train.checkpoint_every=50u
  cp -r "$RUNS/r_$dev" "$RUNS/r_${dev}_on_$other"
  timeout 120 "$ST" train --resume "$RUNS/r_$dev" --set train.max_steps=100 --quiet >>"$OUT/check.log" 2>&1 \
    || say "FAIL resume r_$dev (exit $?)"
  timeout 120 "$ST" train --resume "$RUNS/r_${dev}_on_$other" --set train.max_steps=100 \
    --set runtime.device=$other --quiet >>"$OUT/check.log" 2>&1 || say "FAIL resume r_${dev}_on_$other (exit $?)"
done
compare "cuda resume is exact (50 + 50 vs 100)" r_cuda f_cuda 0 --last-only
compare "cpu resume is exact (50 + 50 vs 100)" r_cpu f_cpu 0 --last-only
compare "cuda checkpoint trains on cpu (1e-3)" r_cuda_on_cpu f_cpu 1e-3 --last-only
compare "cpu checkpoint trains on cuda (1e-3)" r_cpu_on_cuda f_cuda 1e-3 --last-only
# A GPU that is not there: a clear error naming the key, exit non-zero.
if "$ST" train "$F" --out "$RUNS/bad" --set runtime.device=cuda:7 --quiet >"$OUT/bad.log" 2>&1; then
  say "FAIL cuda:7 on a one-GPU machine was accepted"; FAILED=$((FAILED + 1))
else
  grep -q "runtime.device" "$OUT/bad.log" && say "PASS cuda:7 refused: $(head -c 300 "$OUT/bad.log")" \
    || { say "FAIL cuda:7 refused without naming runtime.device: $(head -c 300 "$OUT/bad.log")"; FAILED=$((FAILED + 1)); }
fi
# NCCL under mpirun (docs/DISTRIBUTED.md, "GPUs: NCCL"): one rank on the GPU sums its gradients
# through a one-rank NCCL communicator and must train as the run without mpirun (~15 s).
if command -v mpirun >/dev/null; then
  echo "-- train m_cuda: mpirun -np 1" >>"$OUT/check.log"
  timeout 120 mpirun -np 1 --allow-run-as-root "$ST" train "$F" --out "$RUNS/m_cuda" "${COMMON[@]}" \
    --set runtime.device=cuda >>"$OUT/check.log" 2>&1 || { say "FAIL train m_cuda (exit $?)"; FAILED=$((FAILED + 1)); }
  compare "mpirun -np 1 on cuda (NCCL) vs without mpirun (1e-6)" m_cuda f_cuda 1e-6
else
  say "SKIP mpirun -np 1 on cuda: no mpirun on this machine"
fi

fi

say "== benchmarks ($(elapsed))"
BENCH=$OUT/bench.jsonl
: >"$BENCH"
sbench() { timeout 120 "$BIN/bench_cuda" "$@" 2>>"$OUT/check.log" >>"$BENCH" || say "FAIL bench_cuda $* (exit $?)"; }
tbench() { timeout 180 $PY bench/torch_cuda.py "$@" 2>>"$OUT/check.log" >>"$BENCH" || say "FAIL torch_cuda $* (exit $?)"; }
for w in W1 moola; do
  # The defaults: the whole stack in one cuDNN call, its algorithm autotuned at the first step.
  sbench --workload $w --precision bf16
  sbench --workload $w --precision fp16
  sbench --workload $w --precision fp32
  tbench --workload $w --mode fp32
  tbench --workload $w --mode fp32_strict
  tbench --workload $w --mode amp_bf16
  [ "${QUICK:-0}" = 1 ] && continue
  SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked sbench --workload $w --precision fp16 --label unpacked
  SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked sbench --workload $w --precision bf16 --label unpacked
  SEQTRAIN_CUDNN_RNN_STACK=whole SEQTRAIN_CUDNN_RNN_ALGO=standard sbench --workload $w --precision fp16 --label whole_standard
  SEQTRAIN_CUDNN_RNN_STACK=whole SEQTRAIN_CUDNN_RNN_ALGO=standard SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked \
    sbench --workload $w --precision fp16 --label whole_standard_unpacked
  SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked sbench --workload $w --precision fp32 --label unpacked
  tbench --workload $w --mode amp_fp16
done
sbench --workload gpt --precision bf16
tbench --workload gpt --mode amp_bf16 --compile
# Graph capture's gain, each pair on one warm GPU: W1 fp32 and the GPT bf16 without dropout.
sbench --workload W1 --precision fp32 --graphs off --label graphs_off
sbench --workload W1 --precision fp32 --graphs auto --label graphs_auto
sbench --workload gpt --precision bf16 --dropout 0 --graphs off --label graphs_off_dropout0
sbench --workload gpt --precision bf16 --dropout 0 --graphs auto --label graphs_auto_dropout0
if [ "${QUICK:-0}" != 1 ]; then
  sbench --workload gpt --precision fp32
  SEQTRAIN_CUDA_ATTENTION=tiles sbench --workload gpt --precision bf16 --label tiles_attention
  tbench --workload gpt --mode amp_bf16
fi
# Why PyTorch's cuDNN LSTM is faster with the same algorithm: under PyTorch cuDNN 9 runs its
# block-persistent STANDARD kernels (RNN_blockPersist_fp_LSTM, one launch a layer), under
# seqtrain the per-step ones (elemWiseRNNcell and a GEMM per time step) (ncu, 2026-11-28). Each
# probe row changes one descriptor argument toward PyTorch's; the API logs show both sides' calls.
say "== cuDNN probes ($(elapsed))"
probe() { local label=$1; shift; env SEQTRAIN_CUDNN_RNN_STACK=layers SEQTRAIN_CUDNN_RNN_ALGO=standard "$@" \
  timeout 60 "$BIN/bench_cuda" --workload W1 --precision fp32 --label "probe_$label" 2>>"$OUT/check.log" >>"$BENCH" \
  || say "FAIL probe $label"; }
probe base
probe padded_io_off SEQTRAIN_CUDNN_RNN_PADDED_IO=0
probe hx_zeros SEQTRAIN_CUDNN_RNN_HX=zeros
probe both SEQTRAIN_CUDNN_RNN_PADDED_IO=0 SEQTRAIN_CUDNN_RNN_HX=zeros
probe unpacked_hx SEQTRAIN_CUDNN_RNN_LAYOUT=unpacked SEQTRAIN_CUDNN_RNN_HX=zeros
for side in seqtrain torch; do
  log=$OUT/cudnn_api_$side.log
  if [ $side = seqtrain ]; then cmd=("$BIN/bench_cuda" --workload W1 --precision fp32 --steps 1 --warmup 0)
  else cmd=($PY bench/torch_cuda.py --workload W1 --mode fp32_strict --steps 1 --warmup 0); fi
  env SEQTRAIN_CUDNN_RNN_STACK=layers SEQTRAIN_CUDNN_RNN_ALGO=standard CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGINFO_DBG=1 \
    CUDNN_LOGDEST_DBG="$log" timeout 60 "${cmd[@]}" >/dev/null 2>&1
  say "cuDNN API log of $side: $(grep -c . "$log" 2>/dev/null) lines; its RNN descriptor:"
  grep -A40 -m1 "cudnnSetRNNDescriptor_v8" "$log" 2>/dev/null | head -40 | tee -a "$REPORT"
done

$PY - "$BENCH" <<'PYEOF' 2>&1 | tee -a "$REPORT"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for r in rows:
    mode = (r["precision"] + (" " + r["label"] if r.get("label") else "")) if r["engine"] == "seqtrain" \
        else r["mode"] + (" compile" if r.get("compile") else "")
    print(f"{r['engine']:8} {r['workload']:6} {mode:18} {r['ms_per_step']:9.3f} ms/step {r['tflops']:7.2f} TFLOP/s")
for w in ("W1", "moola", "gpt"):
    s = [r for r in rows if r["engine"] == "seqtrain" and r["workload"] == w]
    t = [r for r in rows if r["engine"] == "torch" and r["workload"] == w]
    if s and t:
        bs = min(s, key=lambda r: r["ms_per_step"]); bt = min(t, key=lambda r: r["ms_per_step"])
        print(f"ratio {w}: torch best {bt['ms_per_step']:.3f} ms ({bt['mode']}{' compile' if bt.get('compile') else ''}) "
              f"/ seqtrain best {bs['ms_per_step']:.3f} ms ({bs['precision']} {bs.get('label', '')}) = {bt['ms_per_step'] / bs['ms_per_step']:.2f}x")
PYEOF
grep -h "autotune:" "$OUT/check.log" | sort | uniq -c | tee -a "$REPORT"
say "== done in $(elapsed): $FAILED failed"
exit $FAILED
