#!/usr/bin/env bash
# A generated 1,000-rank job (gen_rank_traces) reported by `cuxfer report`:
# the text stays within 120 lines and names the planted ranks.
#   check_rank_report.sh GEN_RANK_TRACES CUXFER DIR
set -euo pipefail
gen=$1 cuxfer=$2 dir=$3
rm -rf "$dir"
planted=$("$gen" --ranks 1000 --events-per-rank 80 --seed 11 --out "$dir")
report=$(COLUMNS=100 "$cuxfer" report --no-symbols "$dir")
lines=$(printf '%s\n' "$report" | wc -l)
echo "$planted"
echo "report lines: $lines"
test "$lines" -le 120 || { printf '%s\n' "$report"; echo "FAIL: $lines lines (bar: 120)"; exit 1; }
for r in $(echo "$planted" | sed -n 's/^slow_ranks=//p'); do
  printf '%s\n' "$report" | grep -q "^    rank $r: CPU-blocked" || { echo "FAIL: slow rank $r not named"; exit 1; }
done
for key in extra_site_rank pinned_reads_rank; do
  r=$(echo "$planted" | sed -n "s/^$key=//p")
  printf '%s\n' "$report" | grep -q "^    rank $r: as the first" || { echo "FAIL: $key $r not a pattern of its own"; exit 1; }
done
rm -rf "$dir"
echo ok
