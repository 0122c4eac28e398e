#!/bin/bash
cd /work/main
for r in 1 2; do
for w in W1 W1GRU W2; do
  for v in "fused fp32" "onednn fp32" "fused bf16"; do
    set -- $v
    taskset -c 0-1 build-bench/bench_step --workload $w --threads 2 --steps 5 --warmup 2 --peak-gflops 462 --rnn-impl $1 --precision $2 --json /tmp/var/$w.$1.$2.r$r.json > /dev/null 2>/tmp/var/err.$w.$1.$2 || echo "fail $w $v"
    echo "$w $v r$r $(python3 -c "import json; d=json.load(open('/tmp/var/$w.$1.$2.r$r.json')); print(round(d['ms_per_step'],1), d['step']['involuntary_switches'])")"
  done
done
done
