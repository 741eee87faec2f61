#!/usr/bin/env python3
"""scripts/lib/tidy_cached.py re-checks a file exactly when what its result depends on changed.

A stand-in clang-tidy logs the files it is asked to check and reports a finding in any file
that contains the word FINDING; the real preprocessor (the compilation database's compiler)
makes the keys. Usage: tidy_cached_test.py <source dir>
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

FAKE_TIDY = r'''#!/usr/bin/env python3
import os, sys
if sys.argv[1:] == ["--version"]:
    print("stand-in clang-tidy version 1.0")
    sys.exit(0)
path = sys.argv[-1]
with open(os.environ["TIDY_LOG"], "a") as log:
    log.write(os.path.basename(path) + "\n")
if "FINDING" in open(path).read():
    print(f"{path}:1:1: warning: a finding [stand-in]")
    sys.exit(1)
'''


class Tree:
    """A project with a.cpp (including inc/h.hpp) and b.cpp, a compilation database and a
    .clang-tidy, at `root`."""

    def __init__(self, root, tool, cache):
        self.root, self.tool, self.cache = root, tool, cache
        os.makedirs(os.path.join(root, "inc"), exist_ok=True)
        os.makedirs(os.path.join(root, "build"), exist_ok=True)
        self.write("inc/h.hpp", "inline int h() { return 1; }\n")
        self.write("a.cpp", '#include "inc/h.hpp"\nint a() { return h(); }\n')
        self.write("b.cpp", "int b() { return 2; }\n")
        self.write(".clang-tidy", "Checks: '-*,bugprone-*'\n")
        database = [{"directory": os.path.join(root, "build"),
                     "command": f"c++ -I{root} -o {name}.o -c {os.path.join(root, name)}",
                     "file": os.path.join(root, name)} for name in ("a.cpp", "b.cpp")]
        self.write("build/compile_commands.json", json.dumps(database))

    def write(self, name, text):
        with open(os.path.join(self.root, name), "w") as out:
            out.write(text)

    def append(self, name, text):
        with open(os.path.join(self.root, name), "a") as out:
            out.write(text)

    def run(self, script):
        """Runs the cache over a.cpp and b.cpp: (exit status, the files the tool checked)."""
        log = os.path.join(self.root, "tidy.log")
        if os.path.exists(log):
            os.remove(log)
        files = [os.path.join(self.root, name) for name in ("a.cpp", "b.cpp")]
        run = subprocess.run([sys.executable, script, self.tool, os.path.join(self.root, "build"),
                              self.root, self.cache, "2", *files],
                             env=dict(os.environ, TIDY_LOG=log), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, check=False)
        checked = sorted(open(log).read().split()) if os.path.exists(log) else []
        return run.returncode, checked, run.stdout.decode()


def main():
    script = os.path.join(sys.argv[1], "scripts", "lib", "tidy_cached.py")
    failures = []

    def expect(what, got, wanted):
        if got != wanted:
            failures.append(f"{what}: got {got}, wanted {wanted}")

    with tempfile.TemporaryDirectory() as work:
        tool = os.path.join(work, "clang-tidy")
        with open(tool, "w") as out:
            out.write(FAKE_TIDY)
        os.chmod(tool, os.stat(tool).st_mode | stat.S_IEXEC)
        cache = os.path.join(work, "cache")
        tree = Tree(os.path.join(work, "clone1"), tool, cache)

        status, checked, _ = tree.run(script)
        expect("first run", (status, checked), (0, ["a.cpp", "b.cpp"]))
        status, checked, output = tree.run(script)
        expect("unchanged", (status, checked), (0, []))
        expect("summary", output.strip().splitlines()[-1],
               "2 files (0 checked, 2 clean in the cache), 0 with findings")

        tree.append("inc/h.hpp", "inline int g() { return 3; }\n")
        expect("a header a.cpp includes changed", tree.run(script)[:2], (0, ["a.cpp"]))
        tree.append("a.cpp", "// NOLINT(bugprone-whatever)\n")
        expect("a comment changed", tree.run(script)[:2], (0, ["a.cpp"]))
        tree.append(".clang-tidy", "WarningsAsErrors: '*'\n")
        expect("the configuration changed", tree.run(script)[:2], (0, ["a.cpp", "b.cpp"]))

        tree.append("b.cpp", "// FINDING\n")
        expect("a finding", tree.run(script)[:2], (1, ["b.cpp"]))
        expect("a finding is never cached", tree.run(script)[:2], (1, ["b.cpp"]))
        tree.write("b.cpp", "int b() { return 4; }\n")
        expect("the finding fixed", tree.run(script)[:2], (0, ["b.cpp"]))
        tree.write("b.cpp", "int b() { return 2; }\n")
        expect("back to what was found clean", tree.run(script)[:2], (0, []))

        # Another clone of the same project, at another path, finds its files in the cache.
        clone = Tree(os.path.join(work, "clone2"), tool, cache)
        for name in ("inc/h.hpp", "a.cpp", ".clang-tidy"):
            shutil.copy(os.path.join(tree.root, name), os.path.join(clone.root, name))
        expect("another clone", clone.run(script)[:2], (0, []))

    for failure in failures:
        print(f"FAILED {failure}")
    print("tidy_cached: " + ("FAILED" if failures else "every expectation held"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
