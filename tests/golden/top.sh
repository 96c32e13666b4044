#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `strobe top` on one pprof reads it with the streaming reader (no profile built); any transform
# sends it through the full decoder and the model. Both must print the same table, for every
# real Go profile and every sample type, --cum and -n included (--focus . keeps everything and
# forces the model path).
set -u
st=0
[ -f "$GOPROF/go_cpu.pb.gz" ] || { echo "FAIL top: no Go fixtures in $GOPROF (make fixtures)"; exit 1; }
for f in "$GOPROF"/*.pb.gz "$(dirname "$0")"/../fuzz/corpus/fuzz_pprof/handmade-everything.pb; do
  [ -f "$f" ] || continue
  b=$(basename "$f")
  for t in 0 1 2 3; do
    for extra in "" "--cum -n 5"; do
      a=$("$STROBE" top --sample-index $t $extra "$f" 2>&1; echo "rc=$?")
      m=$("$STROBE" top --sample-index $t $extra --focus . "$f" 2>&1; echo "rc=$?")
      name="top/paths/$b/$t${extra:+/cum-n5}"
      if [ "$a" = "$m" ]; then echo "ok $name"; else
        echo "FAIL $name: streaming and model paths differ:"; diff <(echo "$m") <(echo "$a") | head -8; st=1; fi
    done
  done
done
# The streaming path keeps memory to the tables: a Go CPU profile's top in well under 30 MB.
if command -v /usr/bin/time >/dev/null; then
  rss=$( { /usr/bin/time -f '%M' "$STROBE_FAST" top "$GOPROF/go_cpu.pb.gz" > /dev/null; } 2>&1 | tail -1)
  if [ "$rss" -lt 30000 ]; then echo "ok top/streaming-rss (${rss} KB)"; else
    echo "FAIL top/streaming-rss: ${rss} KB"; st=1; fi
else
  echo "SKIP top/streaming-rss: /usr/bin/time (package time) is not installed"
fi
exit $st
