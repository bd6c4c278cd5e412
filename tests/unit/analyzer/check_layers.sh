#!/usr/bin/env bash
# The analyzer's stages include only stages below them (analyzer/CMakeLists.txt):
#   text < symbolize < model < analyses < render < cli; launcher sits on model;
#   tune on nothing; cli may include every stage.
# Prints each #include that goes the wrong way and exits 1 if there is one.
#
#   check_layers.sh ANALYZER_DIR
set -u
dir=${1:?usage: check_layers.sh ANALYZER_DIR}
declare -A allowed=(
  [text]="text"
  [symbolize]="text symbolize"
  [model]="text symbolize model"
  [analyses]="text symbolize model analyses"
  [render]="text symbolize model analyses render"
  [launcher]="text symbolize model launcher"
  [tune]="tune"
  [cli]="text symbolize model analyses render launcher tune cli"
)
bad=0 checked=0
for stage in "${!allowed[@]}"; do
  [ -d "$dir/$stage" ] || { echo "check_layers: no stage folder $dir/$stage"; bad=1; continue; }
  for f in "$dir/$stage"/*.cpp "$dir/$stage"/*.h; do
    [ -e "$f" ] || continue
    checked=$((checked + 1))
    while IFS= read -r inc; do
      to=${inc#analyzer/}
      to=${to%%/*}
      case " ${allowed[$stage]} " in
        *" $to "*) ;;
        *) echo "check_layers: ${f#$dir/} includes $inc: $stage may include only ${allowed[$stage]}"; bad=1 ;;
      esac
    done < <(sed -n 's|^#include "\(analyzer/[^"]*\)".*|\1|p' "$f")
  done
done
# Every folder of the analyzer is a stage the table knows.
for d in "$dir"/*/; do
  s=$(basename "$d")
  [ -n "${allowed[$s]+x}" ] || { echo "check_layers: $s/ is no stage of the table (add it)"; bad=1; }
done
((checked > 50)) || { echo "check_layers: only $checked files checked: wrong directory?"; exit 1; }
((bad == 0)) && echo "check_layers: $checked files, every include goes down the stages"
exit $bad
