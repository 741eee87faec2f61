#!/usr/bin/env python3
"""Checks every #include of the tree against the walls written in docs/components.json.

An include is allowed when it stays in its component, or reaches a public header of a
component its own uses (directly or through what those use), or a private header of a component
that shares its private headers with it (`shares_private_with`, `sees_private_of`, or the tests
of that component under tests/<name>/, the root's directly in tests/). Private: everything under src/ and kernels/, every file
in a detail/ folder, and every file of a part that is not a library component (tests, examples,
bench, fuzz, models, sim). Includes that name no file of the tree (the standard library, CUDA)
are not walls and are skipped.

Every public header of the library is in the umbrella headers, or named as left out; and only
the files named as its includers include <graphstep/graphstep.hpp>, which reaches every public
header (a file that includes it recompiles whenever any public header changes).

Usage: layering.py <source dir>            check the tree; exit 1 and list each wrong include
       layering.py <source dir> --self-test also plant a wrong-way include, another component's
                                           private include, a header left out of the umbrella,
                                           an include of the umbrella and a component cycle in
                                           copies, and expect each refused
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE_SUFFIXES = (".hpp", ".h", ".cpp", ".cu", ".cuh")
SCANNED_TOP = ("include", "src", "kernels", "tests", "examples", "bench", "fuzz", "models", "sim")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
PRIVATE_FOLDERS = {"src", "kernels", "detail"}


class Walls:
    def __init__(self, root):
        self.root = root
        with open(os.path.join(root, "docs", "components.json"), encoding="utf-8") as f:
            data = json.load(f)
        self.components = data["components"]
        self.include_roots = data["include_roots"]
        self.umbrella_leaves_out = data["umbrella_leaves_out"]
        self.umbrella_includers = data["umbrella_includers"]
        self.prefixes = sorted(((p, name) for name, c in self.components.items()
                                for p in c["paths"]), key=lambda x: -len(x[0]))
        for name, c in self.components.items():
            for used in c["uses"]:
                if used not in self.components:
                    raise SystemExit(f"docs/components.json: {name} uses {used}, which is no "
                                     f"component: name one of {', '.join(self.components)}")
        self.reach = {name: self._closure(name, []) for name in self.components}

    def _closure(self, name, path):
        if name in path:
            cycle = " -> ".join(path[path.index(name):] + [name])
            raise SystemExit(f"docs/components.json: the components form a cycle ({cycle}): the "
                             "layers must point one way; remove one of these uses")
        reach = set()
        for used in self.components[name]["uses"]:
            reach.add(used)
            reach |= self._closure(used, path + [name])
        return reach

    def component_of(self, rel):
        for prefix, name in self.prefixes:
            if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
                return name
        return None

    def is_private(self, rel, name):
        if self.components[name].get("private", False):
            return True
        return bool(PRIVATE_FOLDERS.intersection(rel.split("/")[:-1]))

    def resolve(self, including, header):
        candidates = [os.path.join(os.path.dirname(including), header)]
        candidates += [os.path.join(r, header) for r in self.include_roots]
        for candidate in candidates:
            rel = os.path.normpath(candidate)
            if os.path.isfile(os.path.join(self.root, rel)):
                return rel
        return None

    def allowed(self, src_rel, src, dst_rel, dst):
        if src == dst:
            return True
        if self.is_private(dst_rel, dst):
            c = self.components[dst]
            if src in c.get("shares_private_with", []):
                return True
            if dst in self.components[src].get("sees_private_of", []):
                return True
            if src != "tests":
                return False
            if dst == "root":  # the root component's tests sit in tests/ itself
                return "/" not in src_rel[len("tests/"):]
            return src_rel.startswith(f"tests/{dst}/")
        return dst in self.reach[src]

    def umbrella_gaps(self):
        """The public headers of the library that neither umbrella header includes."""
        umbrella = ""
        for name in ("graphstep.hpp", "nccl.hpp"):
            with open(os.path.join(self.root, "include", "graphstep", name), encoding="utf-8") as f:
                umbrella += f.read()
        included = {m.group(2) for m in map(INCLUDE.match, umbrella.splitlines()) if m}
        gaps = []
        for directory, _, files in os.walk(os.path.join(self.root, "include", "graphstep")):
            for file in sorted(files):
                rel = os.path.relpath(os.path.join(directory, file), self.root)
                header = os.path.relpath(rel, "include")
                if "/detail/" in rel or header in ("graphstep/graphstep.hpp", "graphstep/nccl.hpp"):
                    continue
                if header not in included and rel not in self.umbrella_leaves_out:
                    gaps.append(f"{rel}: a public header that neither <graphstep/graphstep.hpp> "
                                "nor <graphstep/nccl.hpp> includes: include it there, or name "
                                "it in umbrella_leaves_out of docs/components.json")
        return gaps

    def may_include_the_umbrella(self, rel):
        return rel == "include/graphstep/graphstep.hpp" or any(
            rel == allowed or (allowed.endswith("/") and rel.startswith(allowed))
            for allowed in self.umbrella_includers)

    def check(self):
        wrong = []
        scanned = 0
        for top in SCANNED_TOP:
            for directory, _, files in os.walk(os.path.join(self.root, top)):
                for file in sorted(files):
                    if not file.endswith(SOURCE_SUFFIXES):
                        continue
                    rel = os.path.relpath(os.path.join(directory, file), self.root)
                    src = self.component_of(rel)
                    if src is None:
                        wrong.append(f"{rel}: belongs to no component of docs/components.json: "
                                     "add its folder to the component it is part of")
                        continue
                    scanned += 1
                    with open(os.path.join(self.root, rel), encoding="utf-8",
                              errors="replace") as f:
                        for number, line in enumerate(f, 1):
                            match = INCLUDE.match(line)
                            if not match:
                                continue
                            dst_rel = self.resolve(rel, match.group(2))
                            if dst_rel is None:
                                continue
                            if (dst_rel == "include/graphstep/graphstep.hpp" and
                                    not self.may_include_the_umbrella(rel)):
                                wrong.append(f"{rel}:{number}: includes <graphstep/graphstep.hpp>"
                                             ", which reaches every public header, so that any "
                                             "change to one recompiles it: include the headers "
                                             "of what it uses (or name it in umbrella_includers "
                                             "of docs/components.json, for code shown to users)")
                                continue
                            dst = self.component_of(dst_rel)
                            if dst is None or self.allowed(rel, src, dst_rel, dst):
                                continue
                            kind = "a private header of" if self.is_private(dst_rel, dst) \
                                else "a header of"
                            wrong.append(f"{rel}:{number}: {src} includes {dst_rel}, {kind} "
                                         f"{dst}, which {src} may not reach (docs/components.json"
                                         f": {src} uses {sorted(self.reach[src]) or 'nothing'})")
        return scanned, wrong + self.umbrella_gaps()


def check_tree(root):
    scanned, wrong = Walls(root).check()
    for line in wrong:
        print(line)
    return scanned, wrong


def self_test(root):
    """Plants a wrong-way include, another component's private include, a header left out of
    the umbrella, an include of the umbrella and a cycle, one at a time in a copy of the tree, and expects each refused."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "tree")
        shutil.copytree(root, copy, ignore=lambda d, names: [
            n for n in names if n.startswith("build") or n.startswith(".") or n == "third_party"])

        def run():
            proc = subprocess.run([sys.executable, __file__, copy], capture_output=True,
                                  text=True, check=False)
            return proc.returncode, proc.stdout + proc.stderr

        def expect_refused(what, path, change, fragments):
            """Writes change(text of `path`, "" for a new file) to `path`, expects the check to
            fail and say each of `fragments`, and puts the file back."""
            planted = os.path.join(copy, path)
            original = open(planted, encoding="utf-8").read() if os.path.exists(planted) else None
            with open(planted, "w", encoding="utf-8") as f:
                f.write(change(original or ""))
            code, out = run()
            if code == 0:
                failures.append(f"{what} passed")
            for fragment in fragments:
                if fragment not in out:
                    failures.append(f"{what}: expected \"{fragment}\" in:\n{out}")
            if original is None:
                os.remove(planted)
            else:
                with open(planted, "w", encoding="utf-8") as f:
                    f.write(original)

        code, out = run()
        if code != 0:
            failures.append(f"the copied tree fails before anything is planted:\n{out}")

        expect_refused("a wrong-way include (cuda -> graphs)",
                       "include/graphstep/cuda/stream_view.hpp",
                       lambda text: text + "#include <graphstep/graphs/graph.hpp>\n",
                       ["include/graphstep/cuda/stream_view.hpp:",
                        "cuda includes include/graphstep/graphs/graph.hpp"])
        expect_refused("an include of another component's private header",
                       "src/schedule/graph_cache.cpp",
                       lambda text: text + '#include "memory/detail/pool_state.hpp"\n',
                       ["a private header of memory"])
        expect_refused("an include of the umbrella outside its includers",
                       "tests/graphs/capture_trace_test.cpp",
                       lambda text: "#include <graphstep/graphstep.hpp>\n" + text,
                       ["capture_trace_test.cpp:1: includes <graphstep/graphstep.hpp>"])
        expect_refused("a public header missing from the umbrella",
                       "include/graphstep/cuda/planted_header.hpp",
                       lambda text: "#pragma once\n",
                       ["include/graphstep/cuda/planted_header.hpp: a public header that"])

        def with_cycle(text):
            data = json.loads(text)
            data["components"]["cuda"]["uses"].append("graphs")
            return json.dumps(data)

        expect_refused("a cycle between components", "docs/components.json", with_cycle,
                       ["form a cycle"])
    return failures


def main():
    root = os.path.abspath(sys.argv[1])
    scanned, wrong = check_tree(root)
    if wrong:
        print(f"{len(wrong)} problem(s) with the walls of docs/components.json")
        return 1
    if "--self-test" in sys.argv[2:]:
        failures = self_test(root)
        for failure in failures:
            print(failure)
        if failures:
            return 1
    print(f"{scanned} files: every include stays within the walls of docs/components.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
