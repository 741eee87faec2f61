#!/usr/bin/env python3
"""What ctest registered in a build directory: every test name once, and every GPU test able to
report itself skipped. A GPU test that finds no device must read as skipped, not passed; a test
registered twice runs twice and counts twice. Run it on a built directory: the test binaries
list their tests when ctest reads them.

Usage: registered_tests.py <ctest executable> <build dir>
"""

import collections
import json
import subprocess
import sys


def main():
    ctest, build = sys.argv[1], sys.argv[2]
    listing = subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"],
                             capture_output=True, text=True, check=True)
    tests = json.loads(listing.stdout)["tests"]
    problems = []
    counts = collections.Counter(t["name"] for t in tests)
    for name, count in sorted(counts.items()):
        if count > 1:
            problems.append(f"{name} is registered {count} times")
    gpu_tests = 0
    for test in tests:
        properties = {p["name"]: p["value"] for p in test.get("properties", [])}
        if "gpu" not in properties.get("LABELS", []):
            continue
        gpu_tests += 1
        # A test whose output decides it (an argument error, the line a rank prints) is judged
        # by that output with or without a device.
        if not (properties.get("SKIP_REGULAR_EXPRESSION")
                or properties.get("PASS_REGULAR_EXPRESSION")):
            problems.append(f"{test['name']} is a GPU test without SKIP_REGULAR_EXPRESSION: "
                            "without a device it would pass instead of reporting itself skipped")
    for line in problems:
        print(line)
    print(f"{len(tests)} tests registered ({gpu_tests} GPU tests), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
