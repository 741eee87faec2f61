#!/usr/bin/env python3
"""Checks that every GPU test that measures memory shared by the whole device or process
(cudaMemGetInfo, resident pages) matches a pattern of graphstep_device_memory_tests in the
top-level CMakeLists.txt, so that ctest runs it alone: another test process on the same GPU
moves what it measures.

Usage: device_memory_tests_run_alone.py SOURCE_DIR (the patterns are read from its
CMakeLists.txt; the GPU tests of tests/ and sim/tests/ are checked)
"""

import fnmatch
import pathlib
import re
import sys

MEASURES = re.compile(r"cudaMemGetInfo|resident_pages\(\)")
TEST = re.compile(r"^TEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.MULTILINE)


def serial_patterns(cmake_lists: pathlib.Path) -> list:
    match = re.search(r'set\(graphstep_device_memory_tests\s+"([^"]*)"', cmake_lists.read_text())
    if not match:
        sys.exit(f"{cmake_lists}: no set(graphstep_device_memory_tests \"...\") found")
    return [p for p in match.group(1).split(":") if p]


def measuring_tests(source: pathlib.Path) -> list:
    """(suite, name) of each test whose body, up to the next test, measures device memory."""
    # Comments are not calls: one above the next test may name what that test measures.
    text = re.sub(r"//[^\n]*", "", source.read_text())
    tests = list(TEST.finditer(text))
    found = []
    for i, test in enumerate(tests):
        end = tests[i + 1].start() if i + 1 < len(tests) else len(text)
        if MEASURES.search(text, test.end(), end):
            found.append((test.group(1), test.group(2)))
    return found


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    source_dir = pathlib.Path(sys.argv[1])
    patterns = serial_patterns(source_dir / "CMakeLists.txt")
    sources = sorted(p for d in ("tests", "sim/tests")
                     for p in (source_dir / d).rglob("*_gpu_test.*") if p.suffix in (".cu", ".cpp"))
    checked = 0
    problems = []
    for source in sources:
        for suite, name in measuring_tests(source):
            checked += 1
            if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
                problems.append(f"{source.relative_to(source_dir)}: {suite}.{name} measures "
                                "device or process memory but matches none of "
                                f"{':'.join(patterns)}; "
                                "name it so, or add a pattern to graphstep_device_memory_tests")
    for p in problems:
        print(p)
    print(f"{checked} tests measure device or process memory, {len(problems)} would not run alone")
    if checked == 0:
        print("no test measures memory: the check is looking in the wrong place")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
