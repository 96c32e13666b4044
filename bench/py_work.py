# SPDX-License-Identifier: Apache-2.0
# One Python process of bench/python.sh: calls a small pure-Python function (three frames deep)
# for SECONDS of wall time (0: until killed) and rewrites "OPS CPU_SECONDS" (so far; its own process CPU time) in
# OUT every quarter second, so the benchmark can tell the work done per CPU-second in any window
# with and without the profiler.
#   python3 py_work.py SECONDS OUT
import sys
import time


def leaf(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x


def middle(n):
    return leaf(n)


def outer(n):
    return middle(n)


def main():
    secs = float(sys.argv[1])
    end = time.monotonic() + (secs if secs > 0 else 1e12)
    ops = 0
    c0 = time.process_time()
    f = open(sys.argv[2], "w")
    nxt = 0.0
    while True:
        now = time.monotonic()
        if now >= nxt or now >= end:
            f.seek(0)
            f.write("%12d %14.6f\n" % (ops, time.process_time() - c0))
            f.flush()
            nxt = now + 0.25
            if now >= end:
                break
        outer(2000)
        ops += 1


main()
