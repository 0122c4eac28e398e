#!/usr/bin/env bash
# gpt_quality.sh: the quality run of issue 14 in one command: examples/shakespeare_gpt.yaml (nanoGPT's
# CPU recipe, 2000 iterations) trained by seqtrain and by bench/torch_gpt_train.py (the same job in
# PyTorch: same vocabulary ids, split, validation windows, sampling distribution, schedule,
# optimizer, clipping; see its docstring), same threads, pinned to the same cores, one after the
# other. Writes bench/results/gpt-quality-<date>.md with both val-loss curves and wall times, and
# bench/results/gpt-quality-<date>.svg, the chart of the two wall times with the final val losses
# (bench/plot_svg.py).
#
#   bench/gpt_quality.sh                  THREADS=2, PyPI torch eager (TORCH_PY as bench/gpt.sh)
#   TORCH_ARGS=--compile bench/gpt_quality.sh
#   SEQTRAIN_SET=runtime.precision=bf16 bench/gpt_quality.sh   (extra --set for seqtrain's run)
#
# Wall time: seqtrain's is `seqtrain train` from process start to exit (data loading, training,
# the 8 validations, checkpoints every 5 epochs and at every new best val loss); PyTorch's is the
# script's from its start (after `import torch`) to the end of the loop (no checkpoints).
# Before each run it waits until no compiler (cc1plus) runs; load averages are recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
BUILD_DIR=${BUILD_DIR:-build}
TORCH_PY=${TORCH_PY:-}
if [ -z "$TORCH_PY" ]; then
  for c in bench/.venv/bin/python; do [ -x "$c" ] && { TORCH_PY=$c; break; }; done
fi
[ -f data/shakespeare.txt ] || bash scripts/fetch_shakespeare.sh
if [ "${NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" --target seqtrain >/dev/null
fi
source bench/pin.sh
stamp=$(date +%Y%m%d-%H%M%S)
out=bench/results/gpt-quality-$stamp
mkdir -p "$out"
wait_quiet() { local w=0; while pgrep -x cc1plus >/dev/null && [ $w -lt 1200 ]; do sleep 5; w=$((w + 5)); done; echo $w; }

w1=$(wait_quiet); l1=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s.%N)
"${PIN[@]}" "$BUILD_DIR/seqtrain" train examples/shakespeare_gpt.yaml --out "$out/seqtrain-run" --overwrite \
  --set runtime.threads="$THREADS" ${SEQTRAIN_SET:+--set "$SEQTRAIN_SET"} > "$out/seqtrain.log" 2>&1
st_wall=$(python3 -c "print($(date +%s.%N) - $t0)")
l1e=$(cut -d' ' -f1-3 /proc/loadavg)
echo "seqtrain: $st_wall s"
w2=$(wait_quiet); l2=$(cut -d' ' -f1-3 /proc/loadavg)
"${PIN[@]}" "$TORCH_PY" bench/torch_gpt_train.py --threads "$THREADS" ${TORCH_ARGS:-} --json "$out/torch.json" \
  > /dev/null 2> "$out/torch.log"
l2e=$(cut -d' ' -f1-3 /proc/loadavg)
rm -rf "$out/seqtrain-run/checkpoints"  # the model files are not part of the result
python3 - "$out" "$st_wall" "$THREADS" "$w1 $w2" "$l1 → $l1e" "$l2 → $l2e" "${TORCH_ARGS:-}" "$(git rev-parse --short HEAD)" "${SEQTRAIN_SET:-}" <<'PY' > "$out.md"
import json, sys
sys.path.insert(0, "bench")
import plot_svg
out, st_wall, threads, waits, load_s, load_t, targs, rev, sset = sys.argv[1:10]
st_wall = float(st_wall)
m = [json.loads(l) for l in open(f"{out}/seqtrain-run/metrics.jsonl")]
sv = {r["step"]: r["loss"] for r in m if r["split"] == "val"}
tr = [r for r in m if r["split"] == "train"]
t = json.load(open(f"{out}/torch.json"))
tv = {r["updates"]: r["val_loss"] for r in t["val"]}
print(f"# GPT quality run (examples/shakespeare_gpt.yaml, 2000 iterations), {out.split('-quality-')[1]}\n")
print(f"Command: `{('TORCH_ARGS=' + targs + ' ') if targs else ''}{('SEQTRAIN_SET=' + sset + ' ') if sset else ''}THREADS={threads} bench/gpt_quality.sh` "
      f"(seqtrain {rev}; torch {t['version']}{' torch.compile' if t['compile'] else ' eager'}, {t['python']}); "
      f"{threads} threads pinned; waited for compilers {waits} s; load average seqtrain {load_s}, torch {load_t}\n")
print("| updates | seqtrain val loss | torch val loss | seqtrain / torch |")
print("|---|---|---|---|")
for u in sorted(set(sv) | set(tv)):
    a, b = sv.get(u), tv.get(u)
    r = f"{a / b:.4f}" if a and b else "—"
    print(f"| {u} | {a:.4f} | {b:.4f} | {r} |" if a and b else f"| {u} | {a} | {b} | — |")
last = max(sv)
print(f"\n| wall time | seqtrain | torch | torch / seqtrain |\n|---|---|---|---|")
print(f"| whole run s (process start to end) | {st_wall:.1f} | {t['total_s']:.1f} (+ import) | {t['total_s'] / st_wall:.2f}x |")
st_train_tps = [r.get("tokens_per_s") for r in tr if r.get("tokens_per_s")]
print(f"| validation passes s (torch) | — | {t['eval_s']:.1f} | |")
print(f"\nFinal val loss: seqtrain {sv[last]:.4f}, torch {tv.get(last, float('nan')):.4f} "
      f"({100 * (sv[last] / tv[last] - 1):+.2f}%); seqtrain's last logged training tokens/s "
      f"{st_train_tps[-1]:.0f}" if st_train_tps else "")
json.dump({"seqtrain_val": sv, "torch_val": tv, "seqtrain_wall_s": st_wall, "torch": t},
          open(f"{out}/summary.json", "w"), indent=2)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
torch_name = f"torch {t['version']} {'torch.compile' if t['compile'] else 'eager'}"
plot_svg.write(out + ".svg", f"GPT quality run (examples/shakespeare_gpt.yaml), seqtrain against PyTorch: {cpu}, "
               f"{threads} threads",
               [(f"{last} updates (final val loss: seqtrain {sv[last]:.4f}, torch {tv.get(last, float('nan')):.4f})",
                 [(f"seqtrain {rev}" + (f" ({sset})" if sset else ""), st_wall), (torch_name, t["total_s"])])],
               "wall time s", reference=f"seqtrain {rev}" + (f" ({sset})" if sset else ""), ratio_name="seqtrain",
               subtitle=f"{out.split('/')[-1]}; seqtrain from process start to exit (checkpoints included), torch "
                        "its loop after `import torch` (no checkpoints)")
PY
cat "$out.md"
