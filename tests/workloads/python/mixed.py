# SPDX-License-Identifier: Apache-2.0
# Mixed stack (tests/e2e/agent_python.sh/mixed): Python calling the C extension burnmod (built
# by the test into the directory given) that burns the CPU.   python3 mixed.py DIR SECONDS
import sys
import time

sys.path.insert(0, sys.argv[1])
import burnmod  # noqa: E402


def call_c():
    return burnmod.burn_c(2000000)


def main():
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        call_c()


main()
