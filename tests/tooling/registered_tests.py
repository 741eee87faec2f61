#!/usr/bin/env python3
"""What ctest registered in a build directory: every test name once, and every GPU test able to
report itself skipped. A GPU test that finds no device must read as skipped, not passed; a test
registered twice runs twice and counts twice. A test labelled `launcher` (an example started once
more by another launcher) is left out of the interleaved run, so its plain launch, the same
device work, must be a GPU test without that label. Run it on a built directory: the test binaries
list their tests when ctest reads them.

Usage: registered_tests.py <ctest executable> <build dir>
"""

import collections
import json
import re
import subprocess
import sys


def plain_launch_names(name):
    """The names the plain launch of a launcher variant may have: the name without the
    launcher (`_mpirun`, `_torchrun`, `_srun`; two hosts are two ranks on each), and for an
    example whose plain launch is registered as `example_<name>_<n>_ranks`, that name."""
    plain = re.sub(r"_(mpirun|torchrun|srun)$", "", name).replace("_2_hosts", "_2_ranks")
    return [plain, "example_" + plain.replace("_data_parallel", "")]


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
    labels = {t["name"]: next((p["value"] for p in t.get("properties", [])
                               if p["name"] == "LABELS"), []) for t in tests}
    for name, test_labels in sorted(labels.items()):
        if "launcher" not in test_labels:
            continue
        twins = [n for n in plain_launch_names(name)
                 if "gpu" in labels.get(n, []) and "launcher" not in labels.get(n, [])]
        if not twins:
            problems.append(f"{name} is labelled launcher, which the interleaved run leaves "
                            f"out, but its plain launch ({' or '.join(plain_launch_names(name))}) "
                            "is no GPU test: register it, or drop the label")
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
