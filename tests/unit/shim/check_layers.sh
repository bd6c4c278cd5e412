#!/usr/bin/env bash
# The shim's folders include only folders below them (docs/architecture.md):
#   core < symbols < memory < python < record < rewrite < interpose
# core: config, log, clock, threads; symbols: the interposed names, the real
# functions and the dynamic linker; memory: what a pointer is; python: the
# Python stack; record: events, stacks, CUPTI, the trace; rewrite: the pinned
# rewrite's decisions and paths; interpose: the hooks (hook -> rewrite ->
# record). memhooks/ is the separate libc-hook library: it includes only
# itself, and only interpose talks to it. shim/lifecycle.cpp, the composition
# root, may include anything. Prints each #include that goes the wrong way and
# exits 1 if there is one.
#
#   check_layers.sh SHIM_DIR
set -u
dir=${1:?usage: check_layers.sh SHIM_DIR}
declare -A allowed=(
  [core]="core"
  [symbols]="core symbols"
  [memory]="core symbols memory"
  [python]="core symbols python"
  [record]="core symbols memory python record"
  [rewrite]="core symbols memory python record rewrite"
  [interpose]="core symbols memory python record rewrite interpose memhooks"
  [memhooks]="memhooks"
)
bad=0 checked=0
for layer in "${!allowed[@]}"; do
  [ -d "$dir/$layer" ] || { echo "check_layers: no layer folder $dir/$layer"; bad=1; continue; }
  for f in "$dir/$layer"/*.cpp "$dir/$layer"/*.h "$dir/$layer"/*.c "$dir/$layer"/*.def "$dir/$layer"/*.inc; do
    [ -e "$f" ] || continue
    checked=$((checked + 1))
    while IFS= read -r inc; do
      to=${inc%%/*}
      [ -n "${allowed[$to]+x}" ] || continue  # trace/, policy/: the libraries below the shim
      case " ${allowed[$layer]} " in
        *" $to "*) ;;
        *) echo "check_layers: ${f#$dir/} includes $inc: $layer may include only ${allowed[$layer]}"; bad=1 ;;
      esac
    done < <(sed -n 's|^#include "\([a-z_]*/[^"]*\)".*|\1|p' "$f")
  done
done
# Every folder of the shim is a layer the table knows.
for d in "$dir"/*/; do
  s=$(basename "$d")
  [ -n "${allowed[$s]+x}" ] || { echo "check_layers: $s/ is no layer of the table (add it)"; bad=1; }
done
((checked > 40)) || { echo "check_layers: only $checked files checked: wrong directory?"; exit 1; }
((bad == 0)) && echo "check_layers: $checked files, every include goes down the layers"
exit $bad
