#!/usr/bin/env python3
"""LeakSanitizer's check at exit survives a dlopen'd library whose thread-local block sits at
page offset 16 (see tls_landing_probe.cpp). Runs the probe steering the block to offset 16 from
a few allocations ahead, since the loader allocates in between; passes when a run put it there
and every run exited cleanly, under the sanitizer options of the environment it is given.

Usage: tls_landing.py <probe> <module>
"""

import re
import subprocess
import sys


def main():
    probe, module = sys.argv[1], sys.argv[2]
    problems = []
    landed = []
    for ahead in range(1, 9):
        run = subprocess.run([probe, module, str(ahead)], capture_output=True, text=True,
                             timeout=60)
        match = re.search(r"tls block at page offset (\d+)", run.stdout)
        if match is not None and int(match.group(1)) == 16:
            landed.append(ahead)
        if run.returncode != 0 or match is None:
            problems.append(f"k={ahead}: exit {run.returncode}\n{run.stdout}{run.stderr}")
    for problem in problems:
        print(problem)
    if problems:
        return 1
    if not landed:
        print("no run put the TLS block at page offset 16: the probe no longer steers the "
              "allocator, and the check tests nothing")
        return 1
    print(f"the leak check survived a TLS block at page offset 16 (k={landed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
