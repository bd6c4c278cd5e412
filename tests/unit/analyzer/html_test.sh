#!/usr/bin/env bash
# cuxfer report --html end to end: a self-contained file that Chromium renders.
#   html_test.sh CUXFER APP_SIM1 APP_SIM2
# Exit 0 pass, 1 fail, 77 skip (no headless Chromium: the rendering check
# cannot run; the file checks before it still ran and passed).
set -euo pipefail
CUXFER=$1 APP1=$2 APP2=$3
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export CUXFER_PROFILE_DIR="$W/no-profiles"
"$CUXFER" record -q -o "$W/t" -- "$APP1" 4 8M >/dev/null || fail "record $APP1"
"$CUXFER" record -q -o "$W/t" -- "$APP2" 2 4M >/dev/null || fail "record $APP2"
"$CUXFER" report --html "$W/r.html" "$W/t" 2>"$W/err" || fail "report --html: $(cat "$W/err")"
grep -q "HTML report written to $W/r.html" "$W/err" || fail "no confirmation line"
H="$W/r.html"
for want in "<svg" "Findings" "Achieved bandwidth against transfer size" "Bytes and time per direction" \
            "Timeline" "Top call sites" "SIMULATED CUDA" "H2D pageable" "async_streams"; do
  grep -q "$want" "$H" || fail "the HTML lacks '$want'"
done
# The build tree has no installed docs: they are named, and nothing links into nowhere.
grep -q "docs/report.md explains every number" "$H" || fail "the HTML does not name docs/report.md"
if grep -q "<a " "$H"; then fail "the HTML links where no docs are installed: $(grep -o "<a [^>]*>" "$H" | head -3)"; fi
# Self-contained: nothing fetched at view time, no script.
if grep -Eiq "<script|src=['\"]?https?:|href=['\"]?https?:|@import|url\(" "$H"; then fail "the HTML refers to the network or runs script"; fi
python3 - "$H" <<'PY' || fail "the HTML is not well-formed enough"
import sys, html.parser
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.svg = 0; self.depth = 0
    def handle_starttag(self, tag, a):
        if tag == "svg": self.svg += 1
p = P(); p.feed(open(sys.argv[1]).read())
assert p.svg >= 3, p.svg
PY
# --html with --json: both written; a bad --html is a usage error.
"$CUXFER" report --html "$W/r2.html" --json -o "$W/r.json" "$W/t" || fail "--html with --json"
[[ -s $W/r2.html && -s $W/r.json ]] || fail "--html with --json: a file is missing"
set +e; "$CUXFER" report --html "" "$W/t" >/dev/null 2>&1; rc=$?; set -e
[[ $rc == 2 ]] || fail "--html '' should be a usage error (exit $rc)"

# Render it: headless Chromium screenshot; a blank or broken page compresses to a few KiB.
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $CHROME ]]; then
  echo "SKIP: no headless Chromium (Debian package 'chromium'): the HTML was checked but not rendered"
  exit 77
fi
timeout 120 "$CHROME" --headless --disable-gpu --no-sandbox --hide-scrollbars --window-size=1240,2400 \
  --screenshot="$W/r.png" "file://$H" >/dev/null 2>&1 || fail "chromium failed"
size=$(stat -c %s "$W/r.png")
(( size > 60000 )) || fail "the screenshot is $size bytes: the page looks blank"
if [[ -n ${CUXFER_KEEP_SCREENSHOT:-} ]]; then cp "$W/r.png" "$CUXFER_KEEP_SCREENSHOT"; fi
echo "html_test: OK (screenshot $size bytes)"
