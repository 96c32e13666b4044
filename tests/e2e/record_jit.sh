#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# JIT code named from /tmp/perf-PID.map: build/workloads/jit_map runs machine code it copied into
# anonymous executable memory and announced in its perf map; at least 90% of its samples must
# have the leaf frame jit_hot_loop, named at the end of recording, after the process exited, and
# its 2 s of CPU (its own clock: however loaded the machine) make at least 500 samples.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/record.sh
. "$here/lib/record.sh"
need_workloads jit_map
if [ "$(uname -m)" != x86_64 ]; then
	echo "SKIP record_jit: the JIT workload's machine code is x86-64"
	exit 0
fi
name=record_jit/perfmap
rec "$name" 60 -F 999 -o "$TMPDIR/j.pb.gz" -- "$WL/jit_map" 2
code=$rc
f=$(_fname "$name")
if [ "$code" -ne 0 ]; then
	fail "$name" "strobe record failed (exit $code): $(recerr "$name")"
else
	"$STROBE" convert -t folded --sample-index samples -o "$TMPDIR/j.folded" "$TMPDIR/j.pb.gz"
	read -r total jit < <(awk '{ n = $NF; t += n; s = $0; sub(/ [0-9]+$/, "", s); k = split(s, f, ";");
		if (f[k] == "jit_hot_loop") j += n } END { print t + 0, j + 0 }' "$TMPDIR/j.folded")
	if [ "$total" -lt 500 ]; then
		fail "$name" "only $total samples"
	elif [ $((100 * jit)) -lt $((90 * total)) ]; then
		fail "$name" "jit_hot_loop is the leaf of $jit of $total samples: $(sort -t' ' -k2 -nr "$TMPDIR/j.folded" | head -2 | cut -c1-150 | tr '\n' ' ')"
	else
		ok "$name" "jit_hot_loop is the leaf of $jit of $total samples"
	fi
fi
# the workload's own map file
for m in /tmp/perf-*.map; do
	[ -f "$m" ] && grep -q ' jit_hot_loop$' "$m" && rm -f "$m"
done
exit $st
