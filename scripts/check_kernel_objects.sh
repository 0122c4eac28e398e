#!/usr/bin/env bash
# Checks the per-ISA kernel objects (src/backend/cpu/kernels/, one copy per level) for code the
# linker could share with the rest of the program: a weak (comdat) function outside the level's
# own namespace, such as an inline function from a shared header or a library template, would
# let the linker keep an AVX-512 copy for every caller, and an older CPU would then crash on it.
# Run by ctest (KernelObjectsShareNoCode) with the object files as arguments.
set -euo pipefail
# CMake passes each level's objects as one ;-separated argument.
IFS=';' read -r -a objs <<<"$(IFS=';'; echo "$*")"
bad=0
for obj in "${objs[@]}"; do
  syms=$(nm -C --defined-only "$obj")  # a missing or unreadable object fails the check
  # W: weak defined function or object; data personality references (DW.ref.*) are harmless.
  leaks=$(awk '$2 == "W" || $2 == "u"' <<<"$syms" | grep -v ' seqtrain::isa_' | grep -v 'DW\.ref\.' || true)
  if [ -n "$leaks" ]; then
    echo "$obj shares code outside its ISA namespace:"; echo "$leaks"; bad=1
  fi
done
[ $bad = 0 ] && echo "KernelObjectsShareNoCode: ${#objs[@]} kernel objects, no shared weak code"
exit $bad
