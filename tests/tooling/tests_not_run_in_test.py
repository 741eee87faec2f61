#!/usr/bin/env python3
"""scripts/lib/tests_not_run_in.py leaves out exactly the tests another build already ran alike.

A small CMake project is configured and built three times: `a` with one test more than `b` and
the same flags, `c` with another optimisation level. Of a's tests, those b ran alike are left
out, never the one that examines its own build directory nor the one b lacks; nothing is left
out against c, whose binaries are built by other commands; a label filter numbers the tests as
ctest does under it; a selection that would be empty prints nothing (an empty -I would select
every test). Usage: tests_not_run_in_test.py <source dir>
"""

import os
import re
import subprocess
import sys
import tempfile

PROJECT = """cmake_minimum_required(VERSION 3.25)
project(probe CXX)
add_executable(probe probe.cpp)
enable_testing()
add_test(NAME unlabelled COMMAND probe)
add_test(NAME same COMMAND probe)
add_test(NAME examines_its_build COMMAND probe ${PROJECT_BINARY_DIR})
set_tests_properties(same examines_its_build PROPERTIES LABELS picked)
if(EXTRA)
  add_test(NAME only_here COMMAND probe extra)
  set_tests_properties(only_here PROPERTIES LABELS picked)
endif()
"""

failures = []


def expect(what, condition):
    print(("ok    " if condition else "FAILED ") + what)
    if not condition:
        failures.append(what)


def configure_and_build(root, name, *options):
    build = os.path.join(root, name)
    subprocess.run(["cmake", "-S", root, "-B", build, "-G", "Ninja", *options], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build], check=True, stdout=subprocess.DEVNULL)
    return build


def selected(script, build, other, *ctest_arguments):
    """The names the script's -I argument selects, run as check.sh runs it (None: it printed
    nothing)."""
    spec = subprocess.run([sys.executable, script, build, other, "--", "--test-dir", build,
                           *ctest_arguments], capture_output=True, text=True,
                          check=True).stdout.strip()
    if not spec:
        return None
    listing = subprocess.run(["ctest", "--test-dir", build, "-N", *ctest_arguments, "-I", spec],
                             capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"Test +#\d+: (\S+)", listing))


def main():
    script = os.path.join(sys.argv[1], "scripts", "lib", "tests_not_run_in.py")
    with tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, "CMakeLists.txt"), "w") as out:
            out.write(PROJECT)
        with open(os.path.join(root, "probe.cpp"), "w") as out:
            out.write("int main() { return 0; }\n")
        a = configure_and_build(root, "a", "-DEXTRA=ON", "-DCMAKE_BUILD_TYPE=Release")
        b = configure_and_build(root, "b", "-DCMAKE_BUILD_TYPE=Release")
        c = configure_and_build(root, "c", "-DCMAKE_BUILD_TYPE=Debug")

        expect("of a's tests, those b ran alike are left out",
               selected(script, a, b) == {"examines_its_build", "only_here"})
        expect("under a label filter, the numbers are those ctest gives under it",
               selected(script, a, b, "-L", "picked") == {"examines_its_build", "only_here"})
        expect("nothing is left out where the binaries are built by other commands",
               selected(script, a, c, "-L", "picked") ==
               {"same", "examines_its_build", "only_here"})
        expect("a selection left empty prints nothing",
               selected(script, b, a, "-R", "^same$") is None)
    if failures:
        sys.exit(f"{len(failures)} expectation(s) failed")
    print("every expectation held")


if __name__ == "__main__":
    main()
