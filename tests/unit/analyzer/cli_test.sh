#!/bin/bash
# Command-line tests of `cuxfer`: exit codes, one-line errors, and the record
# launcher's contract with the shim (using a fake shim).
#   cli_test.sh CASE CUXFER MAKE_TEST_TRACE FAKE_SHIM
set -u
case_name=$1 cuxfer=$2 make_trace=$3 fake_shim=$4 other_build_shim=${5:-}
source_root=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cuxfer-cli-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

fail() { echo "FAIL [$case_name]: $*" >&2; echo "--- stdout:" >&2; cat out 2>/dev/null >&2; echo "--- stderr:" >&2; cat err 2>/dev/null >&2; exit 1; }
run() { "$@" >out 2>err; rc=$?; }
expect_rc() { [ "$rc" -eq "$1" ] || fail "exit status $rc, expected $1"; }
expect_lines() { local n; n=$(wc -l <"$1"); [ "$n" -eq "$2" ] || fail "$1 has $n lines, expected $2"; }
expect_in() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2'"; }

case $case_name in
  help)
    run "$cuxfer" --help; expect_rc 0; expect_in out "Usage: cuxfer"
    run "$cuxfer" report --help; expect_rc 0; expect_in out "Usage: cuxfer report"
    run "$cuxfer" record --help; expect_rc 0; expect_in out "Usage: cuxfer record"; expect_in out "--rewrite=pin|off"
    run "$cuxfer" help report; expect_rc 0; expect_in out "--json"
    run "$cuxfer" check --help; expect_rc 0; expect_in out "Usage: cuxfer check --budget FILE"
    run "$cuxfer" help check; expect_rc 0; expect_in out "--write-budget FILE"
    run "$cuxfer" help; expect_rc 0; expect_in out "  check --budget FILE"
    run "$cuxfer" record --help; expect_rc 0; expect_in out "--check FILE"
    run "$cuxfer" --version; expect_rc 0; expect_in out "cuxfer "
    run "$cuxfer"; expect_rc 2; expect_in err "Usage: cuxfer" ;;
  help-lists-commands)
    # `cuxfer help` against the commands main.cpp dispatches (each a run_NAME
    # function): every one listed, nothing listed that is not one, and every
    # option a command's --help lists named in its entry of the overview (or
    # among the symbol options the overview lists once).
    main_cpp=$source_root/analyzer/cli/main.cpp
    [ -r "$main_cpp" ] || fail "cannot read $main_cpp"
    registered=$(grep -oE 'run_[a-z]+' "$main_cpp" | sed 's/^run_//' | sort -u)
    [ -n "$registered" ] || fail "no run_* command in $main_cpp"
    run "$cuxfer" help; expect_rc 0; cp out overview
    listed=$(awk '/^Commands:/{on=1; next} on && /^[^ ]/{on=0} on && /^  [a-z]+( |$)/{print $1}' overview | grep -vx help | sort -u)
    [ "$registered" = "$listed" ] || fail "commands dispatched: $(echo $registered); listed by 'cuxfer help': $(echo $listed)"
    symbol_options=$(sed -n '/^Symbol options/,/^$/p' overview)
    for c in $registered; do
      run "$cuxfer" "$c" --help; expect_rc 0; expect_in out "Usage: cuxfer $c"
      entry=$(awk -v c="$c" '/^Commands:/{on=1; next} on && /^[^ ]/{on=0}
                             on && /^  [a-z]+( |$)/{mine = ($1 == c)} on && mine' overview)
      # An option line "-o, --output FILE" is listed as -o; "--a, --b X" as each of them.
      for opt in $(grep -E '^ +-' out | sed -E 's/^ +(-[a-zA-Z]), .*/\1/' | grep -oE -- '(^|[ ,])-(-[a-z][a-z-]*|[a-zA-Z]\b)' |
                   tr -d ' ,' | grep -vxE -- '--help|-h' | sort -u); do
        grep -qE -- "(^|[^a-z-])$opt([^a-z-]|$)" <<<"$entry$symbol_options" || fail "'cuxfer help' does not list $c's option $opt"
      done
    done ;;
  doc-lists-commands)
    # docs/cli.md against the same commands: its synopsis (the first code block)
    # has a `cuxfer NAME` line for each and for nothing else, each has its
    # "## `cuxfer NAME`" section, and every option of its --help is named in that
    # section or the synopsis.
    main_cpp=$source_root/analyzer/cli/main.cpp cli_md=$source_root/docs/cli.md
    [ -r "$main_cpp" ] && [ -r "$cli_md" ] || fail "cannot read $main_cpp or $cli_md"
    registered=$(grep -oE 'run_[a-z]+' "$main_cpp" | sed 's/^run_//' | sort -u)
    synopsis=$(awk '/^```/{n++; next} n == 1' "$cli_md")
    listed=$(grep -oE '^cuxfer [a-z]+' <<<"$synopsis" | awk '{print $2}' | grep -vx help | sort -u)
    [ "$registered" = "$listed" ] || fail "commands dispatched: $(echo $registered); in docs/cli.md's synopsis: $(echo $listed)"
    for c in $registered; do
      section=$(awk -v h="## \`cuxfer $c\`" '$0 == h {on=1; next} on && /^## /{on=0} on' "$cli_md")
      [ -n "$section" ] || fail "docs/cli.md has no section ## \`cuxfer $c\`"
      run "$cuxfer" "$c" --help; expect_rc 0
      for opt in $(grep -E '^ +-' out | sed -E 's/^ +(-[a-zA-Z]), .*/\1/' | grep -oE -- '(^|[ ,])-(-[a-z][a-z-]*|[a-zA-Z]\b)' |
                   tr -d ' ,' | grep -vxE -- '--help|-h' | sort -u); do
        grep -qE -- "(^|[^a-z-])$opt([^a-z-]|$)" <<<"$section$synopsis" || fail "docs/cli.md does not name $c's option $opt"
      done
    done ;;
  unknown-option)
    run "$cuxfer" --bogus; expect_rc 2; expect_lines err 1; expect_in err "unknown option '--bogus'"
    run "$cuxfer" report --bogus x.trace; expect_rc 2; expect_lines err 1
    run "$cuxfer" record --bogus -- true; expect_rc 2; expect_lines err 1
    run "$cuxfer" frobnicate; expect_rc 2; expect_lines err 1
    run "$cuxfer" report --top; expect_rc 2; expect_lines err 1; expect_in err "needs a value"
    run "$cuxfer" report --top many x; expect_rc 2; expect_lines err 1
    run "$cuxfer" report; expect_rc 2; expect_lines err 1
    run "$cuxfer" record --cupti=maybe -- true; expect_rc 2; expect_lines err 1
    run "$cuxfer" record --stack-depth=-3 -- true; expect_rc 2; expect_lines err 1
    run "$cuxfer" record --stack-depth=33 -- true; expect_rc 2; expect_lines err 1; expect_in err "from 0 to 32"
    run "$cuxfer" check --bogus x.trace; expect_rc 2; expect_lines err 1; expect_in err "unknown option '--bogus'"
    run "$cuxfer" check x.trace; expect_rc 2; expect_lines err 1; expect_in err "either --budget FILE"
    run "$cuxfer" check --budget b.json --write-budget c.json x.trace; expect_rc 2; expect_lines err 1
    run "$cuxfer" check --budget b.json --margin 5 x.trace; expect_rc 2; expect_lines err 1
    run "$cuxfer" check --write-budget c.json --margin lots x.trace; expect_rc 2; expect_lines err 1; expect_in err "--margin needs a percentage"
    run "$cuxfer" check --budget missing.json x.trace; expect_rc 2; expect_lines err 1; expect_in err "missing.json: cannot open"
    run "$cuxfer" check --budget; expect_rc 2; expect_lines err 1
    run "$cuxfer" record --check missing.json -- true; expect_rc 2; expect_lines err 1; expect_in err "--check missing.json: cannot open" ;;
  report-unusable)
    : >empty.trace
    echo "hello" >foreign.trace
    printf 'CUXFER' >header-cut.trace
    for f in missing.trace empty.trace foreign.trace header-cut.trace; do
      run "$cuxfer" report "$f"; expect_rc 1; expect_lines err 1; expect_in err "$f"; expect_lines out 0
    done
    run "$cuxfer" report --json missing.trace; expect_rc 1; expect_lines err 1; expect_lines out 0 ;;
  report-truncated)
    "$make_trace" truncated cut.trace || fail "make_test_trace"
    run "$cuxfer" report cut.trace; expect_rc 0; expect_in out "PARTIAL: "
    run "$cuxfer" report --json cut.trace; expect_rc 0
    python3 -c 'import json,sys; j=json.load(open("out")); p=j["processes"][0]; assert not p["complete"] and p["cut_reason"], p' \
      || fail "JSON does not say partial" ;;
  report-cut)
    # A cut trace is no all-clear: the findings say how much was read, and
    # nothing read at all is exit 1 with one line (the report still says where it was cut).
    "$make_trace" truncated cut.trace && "$make_trace" cut-empty nothing.trace || fail "make_test_trace"
    run "$cuxfer" report cut.trace; expect_rc 0; expect_lines err 0
    expect_in out "from what could be read only: 1 of 1 trace is cut short"
    run "$cuxfer" report nothing.trace; expect_rc 1; expect_lines err 1
    expect_in err "cuxfer report: no event could be read: nothing.trace is cut short"
    expect_in out "unknown: no event could be read (1 of 1 trace is cut short"
    grep -q "none: no async copy" out && fail "an unreadable trace reads as an all-clear"
    run "$cuxfer" report --json nothing.trace; expect_rc 1; expect_lines err 1 ;;
  report-json)
    "$make_trace" busy busy.trace && "$make_trace" gpu gpu.trace || fail "make_test_trace"
    run "$cuxfer" report --json -o r.json busy.trace; expect_rc 0; expect_lines out 0
    python3 - r.json <<'PY' || fail "JSON content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == "cuxfer.report/1" and j["simulated"] is True and j["timing"] == "cpu", j["timing"]
assert j["totals"]["calls"] == 1205 and j["totals"]["bytes"] == 4800 + 5 * 64 * 2**20, j["totals"]
kinds = sorted(f["kind"] for f in j["findings"])
assert kinds == ["async_pageable", "large_pageable", "rewrite_candidates", "tiny_storm"], kinds
PY
    run "$cuxfer" report --json gpu.trace; expect_rc 0
    python3 -c 'import json; j=json.load(open("out")); assert j["timing"]=="gpu" and all(c["gpu_ns"] is not None for c in j["classes"])' \
      || fail "GPU timing JSON"
    run "$cuxfer" report busy.trace gpu.trace missing.trace; expect_rc 0; expect_lines err 1
    expect_in out "processes 4242, 4242" ;;
  report-streamed)
    # A report that no option makes hold the events is streamed from the
    # traces (analyses/stream.h); --html makes it hold them and still prints
    # it: the two are the same, byte for byte, whatever falls back.
    "$make_trace" busy busy.trace && "$make_trace" gpu gpu.trace && "$make_trace" truncated cut.trace &&
      "$make_trace" clean clean.trace && "$make_trace" python python.trace &&
      "$make_trace" nvtx nvtx.trace && "$make_trace" nvtx-cpu nvtx-cpu.trace &&
      "$make_trace" fingerprints fp.trace || fail "make_test_trace"
    # A Python program's trace streams too (its note on copies without a Python line is the tally's).
    run "$cuxfer" report --no-profile python.trace; expect_rc 0; expect_in out "have no Python line"
    # So do NVTX ranges (each call's range replayed as it is made, summed per range, site and class).
    run "$cuxfer" report --no-profile nvtx.trace; expect_rc 0; expect_in out "NVTX ranges"
    expect_in out "      load "; expect_in out "tiny_storm ("
    # So do content fingerprints (each process's fingerprinted copies walked at its end).
    run "$cuxfer" report --no-profile fp.trace; expect_rc 0
    expect_in out "[duplicate_uploads]"; expect_in out "[round_trips]"
    for traces in busy.trace gpu.trace cut.trace clean.trace python.trace "busy.trace clean.trace" \
                  "clean.trace gpu.trace" "python.trace busy.trace" nvtx.trace nvtx-cpu.trace \
                  "nvtx.trace busy.trace nvtx-cpu.trace" fp.trace "busy.trace fp.trace nvtx-cpu.trace"; do
      for format in "" --json; do
        run "$cuxfer" report --no-profile $format -o streamed $traces; streamed_rc=$rc
        run "$cuxfer" report --no-profile $format --html r.html -o whole $traces; expect_rc $streamed_rc
        cmp -s streamed whole || fail "streamed and whole reports differ: report $format $traces"
      done
    done ;;
  report-text)
    "$make_trace" busy busy.trace || fail "make_test_trace"
    COLUMNS=80 run "$cuxfer" report busy.trace; expect_rc 0
    expect_in out "GPU time: n/a (CUPTI unavailable: simulated CUDA) — CPU timing shown"
    expect_in out "[tiny_storm]"
    awk '{ if (length($0) > 80) { print "too wide: " $0; bad=1 } } END { exit bad }' out || fail "wider than COLUMNS"
    "$make_trace" clean clean.trace || fail "make_test_trace"
    run "$cuxfer" report clean.trace; expect_rc 0; expect_in out "none:"
    mkdir job emptydir
    "$make_trace" busy job/cuxfer-a-1.trace && "$make_trace" clean job/cuxfer-a-2.trace || fail "make_test_trace"
    run "$cuxfer" report job; expect_rc 0; expect_in out "processes 4242, 4242"
    run "$cuxfer" report emptydir; expect_rc 1; expect_lines err 1; expect_in err "no cuxfer-*.trace" ;;
  export-perfetto)
    "$make_trace" gpu gpu.trace || fail "make_test_trace"
    run "$cuxfer" export --perfetto p.json gpu.trace; expect_rc 0; expect_lines out 1; expect_in out "wrote p.json"
    python3 - p.json <<'PY' || fail "Perfetto JSON content"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
assert len(x) == 2 * 1205, len(x)
assert len([e for e in ev if e["ph"] == "s"]) == 1205 and len([e for e in ev if e["ph"] == "f"]) == 1205
assert any(e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"].startswith("GPU ") for e in ev)
PY
    run "$cuxfer" export --perfetto p.json missing.trace; expect_rc 1; expect_lines err 1; expect_in err "missing.trace"
    run "$cuxfer" export gpu.trace; expect_rc 2; expect_lines err 1
    run "$cuxfer" export --help; expect_rc 0; expect_in out "Usage: cuxfer export" ;;
  report-csv)
    "$make_trace" busy busy.trace || fail "make_test_trace"
    run "$cuxfer" report --csv busy.trace; expect_rc 0; expect_lines out 3
    expect_in out "pid,site_id,function,file,line,module,offset,class,calls,bytes,cpu_blocked_ns,gpu_ns,staged_bytes"
    expect_in out ",1200,4800,"
    run "$cuxfer" report --csv --json busy.trace; expect_rc 2; expect_lines err 1 ;;
  output-files-replaced)
    # Every command that writes a file replaces it (docs/cli.md, "Files the
    # commands write"): a new file renamed over the old one, so a hard link to
    # the old file keeps the old content (a truncating rewrite would change
    # it), and no temporary file is left behind. --force is still accepted.
    "$make_trace" busy busy.trace && "$make_trace" busy base.trace || fail "make_test_trace"
    replaced() {  # FILE COMMAND...: FILE exists before; COMMAND must replace it
      local f=$1; shift
      echo old >"$f"; ln -f "$f" "$f.link"
      run "$@"; expect_rc 0
      [ "$(cat "$f.link")" = old ] || fail "$*: wrote into the old $f instead of replacing it"
      [ -s "$f" ] && [ "$(cat "$f")" != old ] || fail "$*: $f was not replaced"
      rm -f "$f.link"
    }
    replaced r.json "$cuxfer" report --json -o r.json busy.trace
    replaced r.csv "$cuxfer" report --csv -o r.csv busy.trace
    replaced r.txt "$cuxfer" report -o r.txt busy.trace
    replaced d.txt "$cuxfer" diff -o d.txt base.trace busy.trace
    replaced p.json "$cuxfer" export --perfetto p.json busy.trace
    expect_lines out 1; expect_in out "cuxfer export: wrote p.json"
    replaced run.db "$cuxfer" export --sqlite run.db busy.trace
    expect_lines out 1; expect_in out "cuxfer export: wrote run.db"
    replaced policy.json "$cuxfer" policy -q -o policy.json busy.trace
    replaced policy.json "$cuxfer" policy -q --force -o policy.json busy.trace
    replaced budget.json "$cuxfer" check --write-budget budget.json busy.trace
    replaced budget.json "$cuxfer" check --write-budget budget.json --force busy.trace
    # --html writes its file and still prints the text report.
    replaced r.html "$cuxfer" report --html r.html busy.trace
    expect_in out "Findings"; expect_in err "HTML report written to r.html"
    leftovers=$(ls -A | grep -vxE 'busy.trace|base.trace|out|err|r.json|r.csv|r.txt|d.txt|p.json|run.db|policy.json|budget.json|r.html')
    [ -z "$leftovers" ] || fail "left behind: $leftovers"
    # A file that cannot be written: one line, exit 1, the old file as it was.
    mkdir ro && echo old >ro/r.json && chmod a-w ro
    if [ ! -w ro ]; then  # root writes anyway
      run "$cuxfer" report --json -o ro/r.json busy.trace; expect_rc 1; expect_lines err 1
      expect_in err "cannot write ro/r.json"; [ "$(cat ro/r.json)" = old ] || fail "a failed write changed ro/r.json"
    fi
    chmod u+w ro
    # A directory at FILE is not replaced.
    mkdir adir; run "$cuxfer" export --perfetto adir busy.trace; expect_rc 1; expect_lines err 1 ;;
  record-exit-status)
    run "$cuxfer" record --shim "$fake_shim" -- sh -c 'exit 3'; expect_rc 3
    expect_in err "cuxfer: wrote 1 trace(s):"; expect_in err "cuxfer: see the report with: cuxfer report cuxfer-sh-1/"
    ls cuxfer-sh-1/cuxfer-*.trace >/dev/null 2>&1 || fail "no trace in the run's own folder cuxfer-sh-1/"
    run "$cuxfer" record -q --shim "$fake_shim" -- true; expect_rc 0; expect_lines err 0
    run "$cuxfer" record --shim "$fake_shim" -- sh -c 'kill -TERM $$'; expect_rc 143
    expect_in err "killed by SIGTERM" ;;
  record-env)
    mkdir traces
    LD_PRELOAD= CUXFER_TRACE_NAME=stale run env -u CUXFER_STACK_DEPTH -u CUXFER_CUPTI "$cuxfer" record -q --shim "$fake_shim" -o traces -- true
    expect_rc 0
    f=$(ls traces/cuxfer-true-*.trace) || fail "default name should be the executable's"
    grep -qx 'CUXFER_STACK_DEPTH=16' "$f" && grep -qx 'CUXFER_CUPTI=auto' "$f" && grep -qx 'CUXFER_LAUNCHER=1' "$f" \
      && grep -qx "CUXFER_OUTPUT_DIR=$work/traces" "$f" && grep -q '^CUXFER_MANIFEST=/' "$f" \
      && ! grep -q '^CUXFER_TRACE_NAME' "$f" || { cat "$f"; fail "default environment"; }
    LD_PRELOAD=/nonexistent/other.so run "$cuxfer" record --shim "$fake_shim" --name job --no-stacks --cupti=off -o traces -- sh -c true
    expect_rc 0
    f=$(ls traces/cuxfer-job-*.trace) || fail "--name"
    shim_real=$(readlink -f "$fake_shim")
    grep -qx 'CUXFER_STACK_DEPTH=0' "$f" && grep -qx 'CUXFER_CUPTI=off' "$f" && grep -qx 'CUXFER_TRACE_NAME=job' "$f" \
      && grep -qx "LD_PRELOAD=$shim_real:/nonexistent/other.so" "$f" || { cat "$f"; fail "option environment"; }
    manifest=$(sed -n 's/^CUXFER_MANIFEST=//p' "$f")
    [ ! -e "$manifest" ] && [ ! -e "$(dirname "$manifest")" ] || fail "manifest not removed"
    # --stack-depth / --cupti: not given, CUXFER_STACK_DEPTH / CUXFER_CUPTI pass through; given, they win.
    mkdir env-inherit env-given
    CUXFER_STACK_DEPTH=4 CUXFER_CUPTI=off run "$cuxfer" record -q --shim "$fake_shim" -o env-inherit -- true
    expect_rc 0
    f=$(ls env-inherit/cuxfer-true-*.trace) || fail "no trace (inherited environment)"
    grep -qx 'CUXFER_STACK_DEPTH=4' "$f" && grep -qx 'CUXFER_CUPTI=off' "$f" || { cat "$f"; fail "inherited CUXFER_STACK_DEPTH/CUXFER_CUPTI not passed through"; }
    CUXFER_STACK_DEPTH=4 CUXFER_CUPTI=off run "$cuxfer" record -q --shim "$fake_shim" --stack-depth 12 --cupti=on -o env-given -- true
    expect_rc 0
    f=$(ls env-given/cuxfer-true-*.trace) || fail "no trace (options over the environment)"
    grep -qx 'CUXFER_STACK_DEPTH=12' "$f" && grep -qx 'CUXFER_CUPTI=on' "$f" || { cat "$f"; fail "--stack-depth/--cupti did not win over the environment"; }
    # --rewrite: not given, CUXFER_REWRITE passes through (or stays unset); given, it wins.
    mkdir rw-unset rw-inherit rw-pin
    env -u CUXFER_REWRITE "$cuxfer" record -q --shim "$fake_shim" -o rw-unset -- true || fail "record (no rewrite)"
    ! grep -q '^CUXFER_REWRITE' rw-unset/cuxfer-true-*.trace || fail "CUXFER_REWRITE set without --rewrite"
    # (The fake shim has no libcuxfer_memhooks.so beside it: staging only, or record refuses.)
    CUXFER_REGISTER=off CUXFER_REWRITE=pin run "$cuxfer" record -q --shim "$fake_shim" -o rw-inherit -- true
    expect_rc 0
    grep -qx 'CUXFER_REWRITE=pin' rw-inherit/cuxfer-true-*.trace || fail "inherited CUXFER_REWRITE not passed through"
    CUXFER_REGISTER=off CUXFER_REWRITE=off run "$cuxfer" record -q --shim "$fake_shim" --rewrite=pin -o rw-pin -- true
    expect_rc 0
    [ "$(grep -c '^CUXFER_REWRITE=' rw-pin/cuxfer-true-*.trace)" = 1 ] \
      && grep -qx 'CUXFER_REWRITE=pin' rw-pin/cuxfer-true-*.trace || fail "--rewrite=pin"
    run "$cuxfer" record --shim "$fake_shim" --rewrite=zero-copy -- true; expect_rc 2; expect_lines err 1
    expect_in err "--rewrite is pin or off" ;;
  record-refusals)
    run "$cuxfer" record --shim "$fake_shim" -- no-such-program-cuxfer; expect_rc 127; expect_lines err 1
    expect_in err "command not found"
    touch notadir
    # A directory that cannot be created (its parent is a file) is refused...
    run "$cuxfer" record --shim "$fake_shim" -o notadir/sub -- true; expect_rc 2; expect_lines err 1
    expect_in err "cannot create output directory"
    # ...one that merely does not exist yet is created.
    run "$cuxfer" record --shim "$fake_shim" -o new/nested -- true; expect_rc 0
    [ -d new/nested ] || fail "missing output directory not created"
    run "$cuxfer" record --shim "$fake_shim" -o notadir -- true; expect_rc 2; expect_lines err 1
    run "$cuxfer" record --shim /nonexistent/libcuxfer.so -- true; expect_rc 2; expect_lines err 1
    expect_in err "shim"
    echo data >plain; chmod 644 plain
    run "$cuxfer" record --shim "$fake_shim" -- ./plain; expect_rc 126; expect_lines err 1
    python3 - <<'PY' || fail "could not write the static ELF"
import struct
eh = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, 1, 0, 0, 0)
ph = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, 0, 0, 0)
open("static-app", "wb").write(eh + ph)
PY
    chmod 755 static-app
    run "$cuxfer" record --shim "$fake_shim" -- ./static-app; expect_rc 2; expect_lines err 1
    expect_in err "statically linked" ;;
  record-unwritable-dir)
    # An output directory no file can be created in is refused before the
    # command runs: as root, where access() says yes to everything, sysfs;
    # otherwise a directory without write permission.
    if [ -w /sys/kernel ] && ! (: >/sys/kernel/.cuxfer-test) 2>/dev/null; then
      dir=/sys/kernel
    else
      mkdir ro; chmod 555 ro; dir=ro
    fi
    run "$cuxfer" record --shim "$fake_shim" -o "$dir" -- sh -c ': >"$0"/ran' "$work"
    expect_rc 2; expect_lines err 1; expect_in err "output directory $dir is not writable"
    [ ! -e ran ] || fail "the command ran before the output directory was found unwritable" ;;
  record-check-program)
    # A budget for a program the command does not name is refused before the
    # command runs (the check would refuse its traces only after the run).
    printf '{"schema": "cuxfer.budget/1", "program": "train", "entries": [{"max_bytes": 1}]}\n' >b.json
    run "$cuxfer" record --shim "$fake_shim" --check b.json -- sh -c ': >"$0"/ran' "$work"
    expect_rc 2; expect_lines err 1
    expect_in err "cuxfer record: --check b.json: the budget is for program 'train', which the command does not name (it runs 'sh')"
    [ ! -e ran ] || fail "the command ran with a budget for another program"
    ! ls -d cuxfer-sh-* >/dev/null 2>&1 || fail "a refused record left a run folder"
    # Named by the command line: as an argument (a launcher's), through a
    # link's real path, or as the interpreter of a script it runs.
    printf '#!/bin/sh\n: >"$(dirname "$0")/ran"\n' >train; chmod +x train
    run "$cuxfer" record -q --shim "$fake_shim" --check b.json -- env ./train
    [ -e ran ] || fail "a budget for 'train' refused 'env ./train'"; rm -f ran
    ! grep -q "does not name" err || fail "'env ./train' said not to name train"
    mkdir bin; cp train bin/tool-1.2; ln -s tool-1.2 bin/tool
    printf '#!/usr/bin/env tool\n' >job; chmod +x job
    printf '{"schema": "cuxfer.budget/1", "program": "tool-1.2", "entries": [{"max_bytes": 1}]}\n' >tool.json
    PATH="$work/bin:$PATH" run "$cuxfer" record -q --shim "$fake_shim" --check tool.json -- tool
    ! grep -q "does not name" err || fail "'tool' (a link to tool-1.2) said not to name tool-1.2"
    PATH="$work/bin:$PATH" run "$cuxfer" record -q --shim "$fake_shim" --check tool.json -- ./job
    ! grep -q "does not name" err || fail "'./job' (#!/usr/bin/env tool) said not to name tool-1.2"
    rm -f ran
    # --any-program runs it anyway; it goes with --check only.
    run "$cuxfer" record -q --shim "$fake_shim" --check b.json --any-program -- sh -c ': >"$0"/ran' "$work"
    [ -e ran ] || fail "--any-program did not run the command"
    ! grep -q "does not name" err || fail "--any-program still refused"
    run "$cuxfer" record --any-program -- true; expect_rc 2; expect_lines err 1; expect_in err "--any-program goes with --check" ;;
  record-forwards-signals)
    "$cuxfer" record -q --shim "$fake_shim" -- sh -c 'trap "exit 7" TERM; sleep 10 & wait' >out 2>err &
    pid=$!
    # Wait until the command runs (the fake shim has written its trace), then
    # signal cuxfer itself, as `kill` or a batch scheduler would.
    for _ in $(seq 100); do ls cuxfer-sh-1/cuxfer-*.trace >/dev/null 2>&1 && break; sleep 0.1; done
    sleep 0.2
    kill -TERM $pid
    wait $pid; rc=$?
    expect_rc 7 ;;
  record-shim-version)
    # The command and the shim come from one build, or nothing runs.
    version_line=$("$cuxfer" --version) || fail "--version"
    [[ $version_line =~ ^cuxfer\ [0-9]+\.[0-9]+\.[0-9]+\ \(commit\ [0-9a-z]+,\ built\ [0-9]{4}-[0-9]{2}-[0-9]{2}\)$ ]] ||
      fail "--version printed '$version_line'"
    run "$cuxfer" record --shim "$other_build_shim" -- touch ran; expect_rc 2; expect_lines err 1
    expect_in err "is from cuxfer 0.0.9+0123456789ab, this cuxfer is "
    [[ ! -e ran ]] || fail "the command ran under a shim of another build"
    # A library that is no shim at all (no stamp): refused the same way.
    run "$cuxfer" record --shim /lib/x86_64-linux-gnu/libc.so.6 -- touch ran; expect_rc 2; expect_lines err 1
    expect_in err "carries no cuxfer build stamp"
    [[ ! -e ran ]] || fail "the command ran under a library that is no shim"
    # This build's own stand-in passes the check.
    run "$cuxfer" record -q --shim "$fake_shim" -- touch ran; expect_rc 0
    [[ -e ran ]] || fail "the command did not run under this build's shim" ;;
  *) echo "unknown case $case_name" >&2; exit 2 ;;
esac
exit 0
