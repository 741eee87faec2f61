#!/usr/bin/env python3
"""Checks that docs/troubleshooting.md keeps its promise: every case names the tests that
provoke it, and every test it names exists.

A case is a paragraph that starts with ``**`` together with the paragraphs that follow it up to
the next case or heading. Its tests are the backquoted names inside square brackets, e.g.
``[`capture_test.nested_capture_is_a_usage_error`, gpu]``; a name may end in ``*``. A name
matches a GoogleTest test ``suite.name`` of any binary given on the command line, with the
prefix and suffix of value-parameterized tests (``prefix/suite.name/param``) ignored.

Usage: troubleshooting_catalogue.py CATALOGUE MIN_CASES TEST_BINARY...
"""

import fnmatch
import re
import subprocess
import sys


def listed_tests(binary):
    """Every suite.name the GoogleTest binary lists, without parameter prefixes or suffixes."""
    output = subprocess.run([binary, "--gtest_list_tests"], check=True, capture_output=True,
                            text=True, timeout=120).stdout
    names = set()
    suite = None
    for line in output.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip().rstrip(".").split("/")[-1]
        elif suite is not None:
            test = line.split("#")[0].strip().split("/")[0]
            names.add(f"{suite}.{test}")
    return names


def cases(text):
    """(title, body) of each case: a '**' paragraph and its continuation paragraphs."""
    found = []
    in_code = False
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.lstrip().startswith("```"):
            in_code = not in_code if paragraph.count("```") % 2 else in_code
            if found and found[-1] is not None:  # code right after a heading belongs to no case
                found[-1][1] += "\n\n" + paragraph
            continue
        if in_code:
            if found and found[-1] is not None:
                found[-1][1] += "\n\n" + paragraph
            continue
        if paragraph.startswith("#"):
            found.append(None)  # a heading ends the case before it
        elif paragraph.startswith("**"):
            found.append([paragraph.splitlines()[0], paragraph])
        elif found and found[-1] is not None:
            found[-1][1] += "\n\n" + paragraph
    return [case for case in found if case is not None]


def referenced_tests(body):
    names = []
    for bracket in re.findall(r"\[([^\[\]]*`[^\[\]]*)\]", body):
        names += re.findall(r"`([A-Za-z0-9_]+\.[A-Za-z0-9_*]+)`", bracket)
    return names


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    catalogue, minimum, binaries = argv[1], int(argv[2]), argv[3:]
    tests = set()
    for binary in binaries:
        tests |= listed_tests(binary)
    with open(catalogue, encoding="utf-8") as f:
        all_cases = cases(f.read())

    problems = []
    if len(all_cases) < minimum:
        problems.append(f"the catalogue has {len(all_cases)} cases; it should keep at least "
                        f"{minimum}")
    for title, body in all_cases:
        names = referenced_tests(body)
        if not names:
            problems.append(f"no test is named for the case {title[:90]!r}: add one in "
                            "brackets, e.g. [`suite.test_name`]")
        for name in names:
            if not any(fnmatch.fnmatchcase(test, name) for test in tests):
                problems.append(f"the case {title[:60]!r} names `{name}`, which no test binary "
                                "lists: fix the name, or write the test")
    for problem in problems:
        print(f"{catalogue}: {problem}", file=sys.stderr)
    print(f"{len(all_cases)} cases, {len(tests)} tests listed by {len(binaries)} binaries, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
