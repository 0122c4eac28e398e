# Sourced by the benchmark scripts after THREADS is set: pins every engine to cores
# 0..THREADS-1 (taskset) when the machine has that many, and gives every OpenMP runtime involved
# (oneDNN's, torch's) the same thread count. Sets PIN (a command prefix array) and `pinned`
# (its description for the report).
PIN=()
pinned=no
if command -v taskset >/dev/null && [ "$THREADS" -le "$(nproc)" ]; then
  PIN=(taskset -c "0-$((THREADS - 1))")
  pinned="cores 0-$((THREADS - 1))"
fi
export OMP_NUM_THREADS=$THREADS
