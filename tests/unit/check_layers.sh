#!/usr/bin/env bash
# A component's folders include only the folders below them. The table says
# which folders each may include (itself among them); an include whose first
# path part (after PREFIX) is no folder of the table belongs to something
# outside the component (trace/, policy/) and is not checked. Every folder of
# DIR must be in the table. Prints each #include that goes the wrong way and
# exits 1 if there is one.
#
#   check_layers.sh DIR PREFIX MIN_FILES FOLDER=ALLOWED... 
#     PREFIX: what the includes start with ("analyzer/"; "" for the shim's)
#     MIN_FILES: fewer files than this means a wrong DIR
#     FOLDER=ALLOWED: e.g. "record=core symbols memory python record"
set -u
dir=${1:?usage: check_layers.sh DIR PREFIX MIN_FILES FOLDER=ALLOWED...}
prefix=${2-}
min_files=${3:?usage: check_layers.sh DIR PREFIX MIN_FILES FOLDER=ALLOWED...}
shift 3
declare -A allowed=()
for rule in "$@"; do allowed[${rule%%=*}]=${rule#*=}; done
((${#allowed[@]} > 0)) || { echo "check_layers: no table given"; exit 2; }
name=$(basename "$dir")
bad=0 checked=0
for layer in "${!allowed[@]}"; do
  [ -d "$dir/$layer" ] || { echo "check_layers: no folder $dir/$layer"; bad=1; continue; }
  for f in "$dir/$layer"/*.cpp "$dir/$layer"/*.h "$dir/$layer"/*.c "$dir/$layer"/*.def "$dir/$layer"/*.inc; do
    [ -e "$f" ] || continue
    checked=$((checked + 1))
    while IFS= read -r inc; do
      to=${inc#"$prefix"}
      to=${to%%/*}
      [ -n "${allowed[$to]+x}" ] || continue
      case " ${allowed[$layer]} " in
        *" $to "*) ;;
        *) echo "check_layers: ${f#$dir/} includes $inc: $layer may include only ${allowed[$layer]}"; bad=1 ;;
      esac
    done < <(sed -n "s|^#include \"\\(${prefix}[a-z_]*/[^\"]*\\)\".*|\\1|p" "$f")
  done
done
for d in "$dir"/*/; do
  s=$(basename "$d")
  [ -n "${allowed[$s]+x}" ] || { echo "check_layers: $name/$s/ is in no row of the table (add it)"; bad=1; }
done
((checked >= min_files)) || { echo "check_layers: only $checked files checked: wrong directory?"; exit 1; }
((bad == 0)) && echo "check_layers: $checked files of $name, every include goes down the layers"
exit $bad
