# SPDX-License-Identifier: Apache-2.0
# A Python program with a known CPU split for the Python-frames tests (tests/e2e/agent_python.sh):
# hot_py_alpha and hot_py_beta burn CPU 2:1 in pure Python, one after the other on one thread,
# and each call's thread CPU time (time.thread_time) is added to its function's total.
#   python3 hot_py.py TRUTH SECONDS
# TRUTH gets "NAME MS" for both, then "line NAME FIRST LAST" (the lines of each function's body).
import sys
import time


def hot_py_alpha(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x


def hot_py_beta(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x


def main():
    out, secs = sys.argv[1], float(sys.argv[2])
    ta = tb = 0.0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        t0 = time.thread_time()
        hot_py_alpha(40000)
        t1 = time.thread_time()
        hot_py_beta(20000)
        t2 = time.thread_time()
        ta += t1 - t0
        tb += t2 - t1
    with open(out + ".tmp", "w") as f:
        f.write("hot_py_alpha %.3f\nhot_py_beta %.3f\n" % (ta * 1000, tb * 1000))
        for fn in (hot_py_alpha, hot_py_beta):
            c = fn.__code__
            last = max(l for _, _, l in c.co_lines() if l is not None)
            f.write("line %s %d %d\n" % (fn.__name__, c.co_firstlineno, last))
    import os
    os.rename(out + ".tmp", out)


if __name__ == "__main__":
    main()
