#!/usr/bin/env python3
"""Checks the tree against the walls written in docs/components.json.

Every C and C++ file of the tree (any suffix, .inl and .ipp included; any folder, a new one too,
but hidden folders and build trees) belongs to a component. Its includes: one is allowed when it
stays in its component, or reaches a public header of a component its own uses (directly or
through what those use), or a private header of a component that shares its private headers
with it (`shares_private_with`, `sees_private_of`, or the tests of that component under
tests/<name>/, the root's directly in tests/). Private: everything under src/ and kernels/,
every file in a detail/ folder, and every file of a part that is not a library component
(tests, examples, bench, fuzz, models, sim). Includes that name no file of the tree (the
standard library, CUDA) are not walls and are skipped; an include through a macro, which this
check cannot follow, is refused.

Its declarations: a file opens another component's namespace (`namespace` in
docs/components.json) only to forward-declare a class of a component it uses, or as a test of
that component; anything else there (a function of that component declared by hand, which calls
past its header where no include shows it) is refused, and so is a C function declared by hand
in one component and defined in another.

Every public header of the library is in the umbrella headers, or named as left out; and only
the files named as its includers include <graphstep/graphstep.hpp>, which reaches every public
header (a file that includes it recompiles whenever any public header changes).

With --target-sources (graphstep_target_sources.txt of a build tree, written by
cmake/graphstep_target_sources.cmake): every target compiles only files of the component of the
folder that defines it and of the components that one uses.

Usage: layering.py <source dir> [--target-sources FILE]   check the tree; exit 1 and list each
                                                          problem
       layering.py <source dir> --self-test [...]         also plant each way past the walls
                                                          this check knows in a copy of the
                                                          tree (and of the listing), one at a
                                                          time, and expect each refused, named
"""

import argparse
import contextlib
import functools
import io
import json
import os
import re
import shutil
import sys
import tempfile

# Every C and C++ file, headers and inline parts (.inl, .ipp, .tpp) included.
SOURCE_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp", ".tpp", ".inc", ".c", ".cc",
                   ".cpp", ".cxx", ".cu", ".cuh")
INCLUDE_DIRECTIVE = re.compile(r'^\s*#\s*include\b(.*)')
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
PRIVATE_FOLDERS = {"src", "kernels", "detail"}
NAMESPACE_TOKEN = re.compile(r'\bnamespace\s+([A-Za-z_][\w:]*)\s*(=)?|\bnamespace\s*\{|[{}]')
FORWARD_DECLARATION = re.compile(
    r'^(?:template\s*<[^;{}]*>\s*)?(?:class|struct|union|enum(?:\s+(?:class|struct))?)\s+'
    r'[A-Za-z_]\w*(?:\s*:\s*[\w:\s]+)?$')
EXTERN_C_DECLARATION = re.compile(r'\bextern\s*""\s*[^;{}()]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)'
                                  r'[^;{}]*;')


def is_build_tree(path):
    """Build trees, wherever they were configured, hold generated and copied sources."""
    return os.path.isfile(os.path.join(path, "CMakeCache.txt"))


def source_files(root):
    """Every C and C++ file of the tree, relative to it: any folder, new ones too, but hidden
    ones and build trees."""
    for directory, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith(".") and
                            not is_build_tree(os.path.join(directory, f)) and
                            not (directory == root and f.startswith("build")))
        for file in sorted(files):
            if file.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(directory, file), root)


# What is not declarations: preprocessor lines (with their continuations), comments, string
# literals (raw ones too) and character literals (a ' after a digit separates digits).
NOT_DECLARATIONS = re.compile(r"""
    (?P<directive>^[ \t]*\#(?:[^\n\\]|\\.|\\\n)*)
  | //[^\n]*
  | /\*.*?\*/
  | \b(?:u8|u|U|L)?R"(?P<delimiter>[^()\\\s]{0,16})\(.*?\)(?P=delimiter)"
  | "(?:[^"\\\n]|\\.)*"
  | (?<![\w])'(?:[^'\\\n]|\\.)*'
""", re.MULTILINE | re.DOTALL | re.VERBOSE)


def blanked(match):
    text = match.group(0)
    kept = "\n" * text.count("\n")  # lines keep their numbers
    if text.endswith(("\"", "'")) and not match.group("directive"):
        return '""' + kept
    return " " + kept


@functools.lru_cache(maxsize=None)  # the self-test checks copies that differ in one file
def code_only(text):
    """`text` with comments, string and character literals and preprocessor lines blanked
    (lines keep their numbers): what is left is declarations and code."""
    return NOT_DECLARATIONS.sub(blanked, text)


def namespace_blocks(code):
    """The named namespace blocks of `code` (from code_only), each as (line, full name, the
    declarations directly in it, nested namespace blocks left out)."""
    blocks = []
    stack = []  # per open brace: [full name, start, pieces, piece start] or None
    names = []
    for match in NAMESPACE_TOKEN.finditer(code):
        token = match.group(0)
        if token.startswith("namespace"):
            if match.group(2):  # an alias: namespace x = y;
                continue
            name = match.group(1)
            brace = code.find("{", match.end() - 1)
            if brace < 0 or code[match.end():brace].strip():
                continue
            inner = names + (name.split("::") if name else [])
            for frame in reversed(stack):  # the enclosing namespace's own text ends here
                if frame is not None:
                    frame[2].append(code[frame[3]:match.start()])
                    break
            stack.append([inner, match.start(), [], brace + 1])
            names = inner
            continue
        if token == "{":
            # a brace that is part of a namespace token was consumed with it
            if stack and stack[-1] is not None and stack[-1][3] == match.end():
                continue
            stack.append(None)
            continue
        if not stack:
            continue
        frame = stack.pop()
        if frame is None:
            continue
        frame[2].append(code[frame[3]:match.start()])
        line = code.count("\n", 0, frame[1]) + 1
        blocks.append((line, "::".join(frame[0]), "".join(frame[2])))
        names = next((f[0] for f in reversed(stack) if f is not None), [])
        for outer in reversed(stack):  # the enclosing namespace's own text goes on here
            if outer is not None:
                outer[3] = match.end()
                break
    return blocks


def only_forward_declarations(text):
    statements = [s.strip() for s in text.split(";")]
    return all(not s or FORWARD_DECLARATION.match(" ".join(s.split())) for s in statements)


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
        self.namespaces = sorted(((c["namespace"].split("::"), name)
                                  for name, c in self.components.items() if "namespace" in c),
                                 key=lambda x: -len(x[0]))

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

    def namespace_owner(self, namespace):
        """The component whose namespace `namespace` is, or None (std, a third party's)."""
        parts = namespace.split("::")
        for prefix, name in self.namespaces:
            if parts[:len(prefix)] == prefix:
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
        codes = {}
        for rel in source_files(self.root):
            src = self.component_of(rel)
            if src is None:
                wrong.append(f"{rel}: belongs to no component of docs/components.json: "
                             "add its folder to the component it is part of")
                continue
            scanned += 1
            with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
            for number, line in enumerate(text.splitlines(), 1):
                wrong += self.check_include(rel, src, number, line)
            code = code_only(text)
            codes[rel] = (src, code)
            wrong += self.check_declarations(rel, src, code)
        return scanned, wrong + self.extern_c_across_walls(codes) + self.umbrella_gaps()

    def check_include(self, rel, src, number, line):
        if not INCLUDE_DIRECTIVE.match(line):
            return []
        match = INCLUDE.match(line)
        if not match:
            return [f"{rel}:{number}: includes through a macro ({line.strip()}), which this check "
                    "cannot follow: include the header by its name"]
        dst_rel = self.resolve(rel, match.group(2))
        if dst_rel is None:
            return []
        if dst_rel == "include/graphstep/graphstep.hpp" and not self.may_include_the_umbrella(rel):
            return [f"{rel}:{number}: includes <graphstep/graphstep.hpp>, which reaches every "
                    "public header, so that any change to one recompiles it: include the headers "
                    "of what it uses (or name it in umbrella_includers of docs/components.json, "
                    "for code shown to users)"]
        dst = self.component_of(dst_rel)
        if dst is None or self.allowed(rel, src, dst_rel, dst):
            return []
        kind = "a private header of" if self.is_private(dst_rel, dst) else "a header of"
        return [f"{rel}:{number}: {src} includes {dst_rel}, {kind} {dst}, which {src} may not "
                f"reach (docs/components.json: {src} uses {sorted(self.reach[src]) or 'nothing'})"]

    def tests_of(self, rel, component):
        """True for a test of `component`: under tests/<component>/, the root's in tests/."""
        if component == "root":
            return rel.startswith("tests/") and "/" not in rel[len("tests/"):]
        return rel.startswith(f"tests/{component}/")

    def check_declarations(self, rel, src, code):
        """Declarations in another component's namespace: a function declared by hand instead
        of through its header (which the include check cannot see), or anything else defined
        for that component outside its walls. A forward declaration of a class of a component
        `src` uses is allowed; so is a test under tests/<component>/ opening its component's."""
        wrong = []
        for line, namespace, direct in namespace_blocks(code):
            owner = self.namespace_owner(namespace)
            if owner is None or owner == src or not direct.strip():
                continue
            if src == "tests" and self.tests_of(rel, owner):
                continue
            if only_forward_declarations(direct):
                if owner in self.reach[src]:
                    continue
                wrong.append(f"{rel}:{line}: {src} forward-declares a type in namespace "
                             f"{namespace}, {owner}'s, which {src} may not reach "
                             f"(docs/components.json: {src} uses "
                             f"{sorted(self.reach[src]) or 'nothing'})")
                continue
            first = " ".join(direct.split())[:80]
            wrong.append(f"{rel}:{line}: {src} declares in namespace {namespace}, {owner}'s "
                         f"(\"{first}\"): a function of {owner} declared here by hand calls past "
                         f"its header and the walls; include {owner}'s header instead, and put "
                         f"what {owner} should have in {owner}'s own files")
        return wrong

    def extern_c_across_walls(self, codes):
        """A C function declared by hand in one component and defined in another: a call past
        the other's header, which the include check cannot see. (One defined in no C or C++
        file of the tree, in assembly or another library, is not a wall.)"""
        wrong = []
        for rel, (src, code) in codes.items():
            for match in EXTERN_C_DECLARATION.finditer(code):
                name = match.group(1)
                definition = re.compile(r"\b" + name + r"\s*\([^;{}]*\)[^;{}]*\{")
                owners = sorted({owner for other, (owner, text) in codes.items()
                                 if owner != src and definition.search(text)})
                if not owners:
                    continue
                line = code.count("\n", 0, match.start()) + 1
                wrong.append(f"{rel}:{line}: {src} declares the C function {name} by hand, which "
                             f"{', '.join(owners)} defines: a call past its header and the walls; "
                             "include the header that declares it")
        return wrong

    def check_target_sources(self, listing):
        """Each line of `listing` (written at configure time by
        cmake/graphstep_target_sources.cmake): a target, the folder whose CMakeLists.txt
        defines it and a source it compiles, tab-separated, paths relative to the tree. A
        target compiles the files of its folder's component and of the components that one
        uses, nothing else."""
        wrong = []
        unowned = set()
        with open(listing, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                fields = line.rstrip("\n").split("\t")
                if len(fields) != 3:
                    wrong.append(f"{listing}:{number}: expected target, folder and source, "
                                 "tab-separated: reconfigure the build tree")
                    continue
                target, folder, source = fields
                cmake_lists = f"{folder}/CMakeLists.txt" if folder else "CMakeLists.txt"
                owner = self.component_of(cmake_lists)
                if owner is None:
                    if cmake_lists in unowned:
                        continue
                    unowned.add(cmake_lists)
                    wrong.append(f"{cmake_lists}: defines target {target}, but belongs to no "
                                 "component of docs/components.json: add it to the component "
                                 "whose target it defines")
                    continue
                component = self.component_of(source)
                if component == owner or component in self.reach[owner]:
                    continue
                what = f"a file of {component}" if component else "a file of no component"
                wrong.append(f"{cmake_lists}: target {target} ({owner}) compiles {source}, "
                             f"{what}, which {owner} may not reach (docs/components.json: "
                             f"{owner} uses {sorted(self.reach[owner]) or 'nothing'}): build it "
                             "in a target of its own component and link that")
        return wrong


def check_tree(root, target_sources=None):
    walls = Walls(root)
    scanned, wrong = walls.check()
    if target_sources:
        wrong += walls.check_target_sources(target_sources)
    for line in wrong:
        print(line)
    return scanned, wrong


def self_test(root, target_sources):
    """Plants each way past the walls the check knows, one at a time in a copy of the tree (and
    of the target sources listing, when given), and expects each refused, naming it."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "tree")
        shutil.copytree(root, copy, ignore=lambda d, names: [
            n for n in names if n.startswith("build") or n.startswith(".") or n == "third_party"
            or is_build_tree(os.path.join(d, n))])
        listing = None
        if target_sources:
            listing = os.path.join(tmp, "graphstep_target_sources.txt")
            shutil.copyfile(target_sources, listing)

        def run():
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    code = 1 if check_tree(copy, listing)[1] else 0
                except SystemExit as e:  # docs/components.json refused as a whole
                    print(e)
                    code = 1
            return code, out.getvalue()

        def expect_refused(what, path, change, fragments):
            """Writes change(text of `path`, "" for a new file) to `path` (in the copy, or the
            listing when path is None), expects the check to fail and say each of `fragments`,
            and puts the file back (removes it, and the folders made for it, when new)."""
            planted = listing if path is None else os.path.join(copy, path)
            original = open(planted, encoding="utf-8").read() if os.path.exists(planted) else None
            made = None
            if not os.path.isdir(os.path.dirname(planted)):
                made = os.path.dirname(planted)
                while not os.path.isdir(os.path.dirname(made)):
                    made = os.path.dirname(made)
                os.makedirs(os.path.dirname(planted))
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
                if made:
                    shutil.rmtree(made)
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
        # The simulator is a project of its own: neither it nor its tests reach the library or
        # the library's test helpers.
        expect_refused("the simulator including a library header", "sim/src/launch.cpp",
                       lambda text: text + "#include <graphstep/cuda/check.hpp>\n",
                       ["sim/src/launch.cpp:", "sim includes include/graphstep/cuda/check.hpp"])
        expect_refused("a simulator test including a library header",
                       "sim/tests/race_checker_sim_test.cu",
                       lambda text: text + "#include <graphstep/memory/memory_pool.hpp>\n",
                       ["sim_tests includes include/graphstep/memory/memory_pool.hpp"])
        expect_refused("a simulator test including the library's test helpers",
                       "sim/tests/graph_editing_gpu_test.cpp",
                       lambda text: text + '#include "common/gpu_test.hpp"\n',
                       ["sim_tests includes tests/common/gpu_test.hpp"])
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
        expect_refused("an include through a macro",
                       "src/schedule/graph_cache.cpp",
                       lambda text: text + '#define PLANTED_HEADER "memory/detail/pool_state.hpp"'
                                           "\n#  include PLANTED_HEADER\n",
                       ["src/schedule/graph_cache.cpp:", "includes through a macro"])
        expect_refused("a wrong-way include in an .inl file",
                       "src/cuda/planted_parts.inl",
                       lambda text: "#include <graphstep/graphs/graph.hpp>\n",
                       ["src/cuda/planted_parts.inl:1: cuda includes "
                        "include/graphstep/graphs/graph.hpp"])
        expect_refused("C++ in a new top-level folder",
                       "planted_tools/probe/main.cpp",
                       lambda text: "#include <graphstep/graphs/graph.hpp>\nint main() {}\n",
                       ["planted_tools/probe/main.cpp: belongs to no component"])
        expect_refused("another component's function declared by hand (nested namespaces)",
                       "src/schedule/graph_cache.cpp",
                       lambda text: text + "namespace graphstep {\n/* a comment { */\n"
                                           "namespace memory::detail {\n"
                                           "void planted_release(int handle);\n}\n}\n",
                       ["src/schedule/graph_cache.cpp:", "schedule declares in namespace "
                        "graphstep::memory::detail, memory's", "planted_release"])
        expect_refused("a declaration in the root namespace from a component",
                       "src/ops/gemm_problem.cpp",
                       lambda text: text + "namespace graphstep::detail { namespace {\n"
                                           "int planted_counter = 0;\n} }\n",
                       ["ops declares in namespace graphstep::detail, root's"])
        expect_refused("a forward declaration of a component not reached",
                       "include/graphstep/cuda/stream_view.hpp",
                       lambda text: text + "namespace graphstep::graphs { class graph; }\n",
                       ["include/graphstep/cuda/stream_view.hpp:", "cuda forward-declares a type "
                        "in namespace graphstep::graphs, graphs's, which cuda may not reach"])
        # A C function defined in cuda, declared by hand in schedule:
        definition = os.path.join(copy, "src", "cuda", "planted_probe.cpp")
        with open(definition, "w", encoding="utf-8") as f:
            f.write('extern "C" int graphstep_planted_probe(int x) { return x; }\n')
        expect_refused("a C function of another component declared by hand",
                       "src/schedule/graph_cache.cpp",
                       lambda text: text + 'extern "C" int graphstep_planted_probe(int);\n',
                       ["src/schedule/graph_cache.cpp:", "declares the C function "
                        "graphstep_planted_probe by hand, which cuda defines"])
        os.remove(definition)
        if listing:
            expect_refused("a library target compiling a file of the simulator", None,
                           lambda text: text + "graphstep\t\tsim/src/launch.cpp\n",
                           ["target graphstep (umbrella) compiles sim/src/launch.cpp, a file of "
                            "sim"])
            expect_refused("a target compiling a file of no component", None,
                           lambda text: text + "graphstep_cuda_sim\tsim\tplanted/extra.cpp\n",
                           ["target graphstep_cuda_sim (sim) compiles planted/extra.cpp, a file "
                            "of no component"])

        def with_cycle(text):
            data = json.loads(text)
            data["components"]["cuda"]["uses"].append("graphs")
            return json.dumps(data)

        expect_refused("a cycle between components", "docs/components.json", with_cycle,
                       ["form a cycle"])
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="the source tree")
    parser.add_argument("--target-sources", help="graphstep_target_sources.txt of a build tree")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if args.target_sources and not os.path.isfile(args.target_sources):
        print(f"--target-sources {args.target_sources}: no such file: configure the build tree "
              "(cmake/graphstep_target_sources.cmake writes it)")
        return 1
    scanned, wrong = check_tree(root, args.target_sources)
    if wrong:
        print(f"{len(wrong)} problem(s) with the walls of docs/components.json")
        return 1
    if args.self_test:
        failures = self_test(root, args.target_sources)
        for failure in failures:
            print(failure)
        if failures:
            return 1
    print(f"{scanned} files: every include stays within the walls of docs/components.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
