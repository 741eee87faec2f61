#!/usr/bin/env python3
"""Prints ctest's -I argument that selects, of the tests a ctest command line selects in one build
directory, those that another build directory has not already run as the very same test: same
name, same command and properties, from binaries built by the same commands. scripts/check.sh
runs graphstep_core's tests in the build without CUDA and gives this to the default build's
ctest, so that the same binaries do not run the same tests twice. Where any output that both
builds make is built by different commands (other flags, another compiler), every test is
selected.

Usage: tests_not_run_in.py <build dir> <build dir that already ran its tests> -- <ctest args>
The ctest arguments (a preset, label filters) must be those of the ctest run that is given the
-I argument: with a filter, ctest numbers the tests it selects, not the build's tests.
"""

import json
import os
import re
import subprocess
import sys


def build_commands(build):
    """Every output of the build (objects, libraries, executables) and the command making it."""
    listing = subprocess.run(["ninja", "-C", build, "-t", "commands"], capture_output=True,
                             text=True, check=True).stdout
    commands = {}
    for line in listing.splitlines():
        output = re.search(r" -o (\S+)", line)
        if output:
            commands[output.group(1)] = line.replace(os.path.abspath(build), "<build>")
    return commands


def registered_tests(build, ctest_arguments):
    """The tests the arguments select, in ctest's order (the number -I takes is the position + 1),
    each as (name, its definition with the build directory taken out, or None where the test
    reads the build directory itself)."""
    listing = subprocess.run(["ctest", *ctest_arguments, "-N", "--show-only=json-v1"],
                             capture_output=True, text=True, check=True).stdout
    build = os.path.abspath(build)
    tests = []
    for test in json.loads(listing)["tests"]:
        command = test.get("command") or [""]
        properties = test.get("properties", [])
        # A build directory as an argument or in the environment is what the test examines (its
        # registered tests, a configuration made there): another build's run is another check.
        # As the program or the working directory it is only where the same binary lies.
        examined = [command[1:]] + [p for p in properties if p["name"] != "WORKING_DIRECTORY"]
        if build in json.dumps(examined):
            tests.append((test["name"], None))
            continue
        text = json.dumps({"command": command, "properties": properties}, sort_keys=True)
        tests.append((test["name"], text.replace(build, "<build>")))
    return tests


def main():
    if len(sys.argv) < 4 or sys.argv[3] != "--":
        sys.exit("usage: tests_not_run_in.py <build dir> <build dir that already ran its tests> "
                 "-- <ctest arguments>")
    build, other = (path.rstrip("/") for path in sys.argv[1:3])
    here = registered_tests(build, sys.argv[4:])
    mine, theirs = build_commands(build), build_commands(other)
    differing = [output for output in mine.keys() & theirs.keys() if mine[output] != theirs[output]]
    already_run = set() if differing else set(registered_tests(other, ["--test-dir", other]))
    numbers = [str(number) for number, test in enumerate(here, start=1)
               if test[1] is None or test not in already_run]
    print(f"tests_not_run_in.py: {len(here) - len(numbers)} of {build}'s {len(here)} tests ran "
          f"in {other} from binaries built alike"
          + (f" (none skipped: {len(differing)} outputs built differently, e.g. {differing[0]})"
             if differing else ""), file=sys.stderr)
    # Start, end and stride 0 select no range: only the numbers listed (ctest -I). With no number
    # -I would select every test: nothing is printed then.
    print(",".join(["0", "0", "0"] + numbers) if numbers else "")


if __name__ == "__main__":
    main()
