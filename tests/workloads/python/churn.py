# SPDX-License-Identifier: Apache-2.0
# Fork-heavy Python (tests/e2e/agent_python.sh/churn): a multiprocessing pool (fork) whose
# children burn 0.7 s of CPU in Python each and are replaced after every task, for SECONDS.
#   python3 churn.py SECONDS
import multiprocessing as mp
import sys
import time


def churn_child(secs):
    x = 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        for i in range(10000):
            x += i % 7
    return x


def main():
    end = time.monotonic() + float(sys.argv[1])
    ctx = mp.get_context("fork")
    with ctx.Pool(4, maxtasksperchild=1) as pool:
        while time.monotonic() < end:
            pool.map(churn_child, [0.7] * 8)


if __name__ == "__main__":
    main()
