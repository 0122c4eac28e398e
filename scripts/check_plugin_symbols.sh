#!/usr/bin/env bash
# Checks that each executable defines, in its dynamic symbol table, every seqtrain symbol the CUDA
# plugin leaves undefined: the plugin resolves them from the executable that loads it
# (backend/cuda_plugin.h), and one missing symbol (a vtable only the plugin reaches, say) makes
# dlopen fail on every GPU machine while nothing on a machine without a GPU notices.
# Run by ctest (PluginSymbolsResolve): check_plugin_symbols.sh PLUGIN EXECUTABLE...
set -euo pipefail
plugin=$1; shift
need=$(nm -D --undefined-only "$plugin" | awk '{print $2}' | grep 'seqtrain' | sort -u)
[ -n "$need" ] || { echo "$plugin needs no seqtrain symbol: is it the plugin?"; exit 1; }
bad=0
for exe in "$@"; do
  missing=$(comm -23 <(echo "$need") <(nm -D --defined-only "$exe" | awk '{print $3}' | sort -u))
  if [ -n "$missing" ]; then
    echo "$exe cannot load $plugin: it does not define"; echo "$missing" | c++filt; bad=1
  fi
done
[ $bad = 0 ] && echo "PluginSymbolsResolve: $# executables define all $(echo "$need" | wc -l) seqtrain symbols the plugin needs"
exit $bad
