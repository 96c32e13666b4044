#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The flame graph's embedded script, driven in chromium (playwright-core), else in a DOM (jsdom
# under node): hover, zoom, reset, search with nested matches, case toggle, on a plain, a
# differential and an odd-unit graph. Same protocol as the golden scripts (env STROBE, TMPDIR;
# ok / FAIL / SKIP lines). The modules are looked for in JSDOM_MODULES, else node_modules/ at
# the repository root (`bash scripts/deps.sh check`); chromium at CHROMIUM or /usr/bin/chromium.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
mods=${JSDOM_MODULES:-$root/node_modules}
if ! command -v node >/dev/null; then echo "SKIP browser: node not installed"; exit 0; fi
chrome=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$chrome" ] && [ -d "$mods/playwright-core" ]; then
  export CHROMIUM=$chrome
else
  unset CHROMIUM
  if [ ! -d "$mods/jsdom" ]; then echo "SKIP browser: neither chromium+playwright-core nor jsdom in $mods"; exit 0; fi
  echo "note: no chromium or playwright-core: the SVG's script runs in jsdom"
fi
st=0
printf 'main;hot 50\nmain;hot;hot 10\nmain;warm 30\nmain;cold 10\n' > "$TMPDIR/k.folded"
printf 'main;hot 30\nmain;warm 30\nmain;gone 40\n' > "$TMPDIR/b.folded"
printf 'a.b (c);x[1] 5\n' > "$TMPDIR/u.folded"
run() { # CASE STROBE-ARGS...
  local kind=$1; shift
  if ! "$STROBE" "$@" > "$TMPDIR/$kind.svg" 2> "$TMPDIR/err"; then
    echo "FAIL browser/$kind: strobe $* failed: $(head -2 "$TMPDIR/err")"; st=1; return
  fi
  NODE_PATH=$mods node "$root/tests/browser/flame.js" "$kind" "$TMPDIR/$kind.svg" || st=1
}
run plain flamegraph "$TMPDIR/k.folded"
run diff diff --no-normalize "$TMPDIR/b.folded" "$TMPDIR/k.folded"
run countname flamegraph --countname 'b+ (x)' "$TMPDIR/u.folded"
exit $st
