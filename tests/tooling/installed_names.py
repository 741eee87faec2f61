#!/usr/bin/env python3
"""Counts the names graphstep installs, and refuses a count above the checked-in ceiling.

The installed headers are everything under include/ (the root CMakeLists.txt installs that
folder whole, `install(DIRECTORY include/ ...)`; this check makes sure it still does). In them:

- types: classes, structs, unions, enums, aliases and typedefs defined at namespace scope in a
  public `graphstep` namespace (forward declarations and specializations are not new names);
- functions: namespace-scope functions of a public namespace, counted once per name (overloads
  are one name; hidden friends and members are the class's, not the namespace's);
- variables: namespace-scope variables and constants of a public namespace;
- detail: every namespace-scope name (type, function or variable) of an installed `detail`
  namespace, which users can reach and a release must keep or break as much as a public one;
- raw-pointer parameters (a figure, not part of the name count): the parameters of public
  functions, members of public classes included (constructors too), whose type is a pointer at
  the top level; C strings (`char const*`) and deleted overloads are left out.

A word that names one concept belongs to one component (docs/design.md, "Parts and where they
live"): an installed name with a word of WORDS_OF_ONE_COMPONENT outside that component's
namespace is refused, so that "bucket" stays a group of gradients (`nccl`) and the sizes a graph
cache captures stay capture sizes.

Usage: installed_names.py <source dir>             print the figures; exit 1 where the count of
                                                   installed names (types + functions +
                                                   variables + detail) or of raw-pointer
                                                   parameters is above its ceiling in
                                                   tests/tooling/installed_names_ceiling.json
       installed_names.py <source dir> --list      print every name and pointer parameter too
       installed_names.py <source dir> --self-test also plant, in a copy of the installed
                                                   headers, one name of each kind and a pointer
                                                   parameter, and expect each counted and the
                                                   ceiling refused
"""

import argparse
import collections
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layering import code_only, namespace_blocks  # noqa: E402  (one reading of C++ for both)

CEILING_FILE = os.path.join("tests", "tooling", "installed_names_ceiling.json")
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inl")
INSTALL_RULE = re.compile(r'install\s*\(\s*DIRECTORY\s+include/\s+DESTINATION')
CLASS_KEY = re.compile(r'^(class|struct|union|enum(?:\s+(?:class|struct))?)\s+([A-Za-z_]\w*)\s*'
                       r'(<)?')
ACCESS_LABEL = re.compile(r'^(public|private|protected)\s*:(?!:)\s*')
ATTRIBUTE = re.compile(r'\[\[.*?\]\]|\balignas\s*\([^()]*\)')
MACRO = re.compile(r'\bGRAPHSTEP_[A-Z0-9_]+\b(?:\s*\([^()]*\))?')
OPERATOR = re.compile(r'\boperator\s*(<=>|<<=|>>=|<<|>>|<=|>=|==|!=|->\*|->|\(\)|\[\]|&&|\|\||'
                      r'\+\+|--|[-+*/%^&|~!=<>,]=?|new|delete|""\s*\w+|[A-Za-z_][\w:\s<>*&]*?'
                      r'(?=\s*\())')
IDENTIFIER = re.compile(r'[A-Za-z_]\w*')
KEYWORDS = {"const", "constexpr", "inline", "static", "extern", "volatile", "noexcept",
            "override", "final", "explicit", "virtual", "friend", "mutable", "typename",
            "template", "auto", "decltype", "unsigned", "signed", "operator"}


def statements(text):
    """The top-level statements of `text` (code_only'd): each as (head, body), head the text
    before its first top-level brace (the whole statement where it has none), body the text
    inside that brace or None. A brace inside parentheses (a default argument `= {}`) is part
    of the head; a function's body ends its statement, a class's or an initializer's runs on to
    the semicolon."""
    out = []
    start = 0
    depth = parens = 0
    head = body_start = body = None
    i = 0
    while i < len(text):
        c = text[i]
        if c in "([":
            parens += 1
        elif c in ")]":
            parens -= 1
        elif c == "{" and parens == 0:
            if depth == 0 and head is None:
                head, body_start = text[start:i], i + 1
            depth += 1
        elif c == "}" and parens == 0:
            depth -= 1
            if depth == 0 and body is None:
                body = text[body_start:i]
                if is_function_head(head):
                    out.append((head, body))
                    start, head, body = i + 1, None, None
        elif c == ";" and depth == 0 and parens == 0:
            out.append((head if head is not None else text[start:i], body))
            start, head, body = i + 1, None, None
        i += 1
    if text[start:].strip():
        out.append((head if head is not None else text[start:], body))
    return out


def normalized(head):
    head = ATTRIBUTE.sub(" ", head)
    head = MACRO.sub(" ", head)
    head = " ".join(head.split())
    while head.startswith("template"):  # template <...>: drop the balanced angle brackets
        open_at = head.find("<")
        depth = 0
        for j in range(open_at, len(head)):
            depth += {"<": 1, ">": -1}.get(head[j], 0)
            if depth == 0:
                head = head[j + 1:].strip()
                break
        else:
            break
    return head


def first_call_paren(head):
    """The index of the first `(` outside angle brackets, `operator` tokens read as one word,
    or -1."""
    masked = OPERATOR.sub(lambda m: "operator" + "@" * (len(m.group(0)) - 8), head)
    angle = 0
    for j, c in enumerate(masked):
        if c == "<":
            angle += 1
        elif c == ">" and angle:
            angle -= 1
        elif c == "(" and angle == 0:
            return j
        elif c == "=" and angle == 0:
            return -1  # an initializer: a variable
    return -1


def is_function_head(head):
    if head is None:
        return False
    head = normalized(head)
    return not CLASS_KEY.match(head) and first_call_paren(head) > 0


def function_name(head, paren):
    before = head[:paren].rstrip()
    operator = re.search(r'\boperator\b.*$', before)
    if operator:
        return "operator" + "".join(operator.group(0)[8:].split()), before[:operator.start()]
    match = re.search(r'(~?[A-Za-z_]\w*)$', before)
    if not match:
        return None, before
    return match.group(1), before[:match.start()]


def parameters(head, paren):
    depth = 0
    for j in range(paren, len(head)):
        depth += {"(": 1, ")": -1}.get(head[j], 0)
        if depth == 0:
            inner = head[paren + 1:j]
            break
    else:
        return []
    params, depth, start = [], 0, 0
    for j, c in enumerate(inner):
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        elif c == "," and depth == 0:
            params.append(inner[start:j].strip())
            start = j + 1
    if inner[start:].strip():
        params.append(inner[start:].strip())
    return [p for p in params if p and p != "void"]


def is_raw_pointer(param):
    param = param.split("=")[0]
    depth = 0
    top = []
    for c in param:
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        elif depth == 0:
            top.append(c)
    top = "".join(top)
    if "*" not in top:
        return False
    words = re.sub(r'[*&]', " ", top).split()
    return not ("char" in words and "const" in words)  # a C string, not a device pointer


class Surface:
    def __init__(self):
        self.names = collections.defaultdict(set)  # kind -> {qualified name}
        self.pointer_parameters = []  # "qualified function: parameter"

    def read_namespace(self, namespace, text, where):
        in_detail = "detail" in namespace.split("::")
        for head, body in statements(text):
            self.read_statement(namespace, None, in_detail, head, body, where)

    def read_statement(self, scope, class_name, in_detail, head, body, where):
        """One statement at namespace scope (class_name None) or in the public part of a public
        class (class_name its qualified name)."""
        head = normalized(head)
        if not head or head.startswith(("static_assert", "using namespace", "namespace",
                                        "extern template", "friend", "template <>")):
            return
        kind = "detail" if in_detail else None
        match = CLASS_KEY.match(head)
        if match:
            if body is None or match.group(3):  # a forward declaration or a specialization
                return
            qualified = f"{scope}::{match.group(2)}"
            if class_name is None:
                self.names[kind or "types"].add(qualified)
            if not in_detail:
                self.read_class(qualified, match.group(1), body, where)
            return
        if head.startswith("using "):
            alias = re.match(r'using\s+([A-Za-z_]\w*)\s*=', head)
            if alias and class_name is None:
                self.names[kind or "types"].add(f"{scope}::{alias.group(1)}")
            return
        if head.startswith("typedef "):
            if class_name is None:
                name = IDENTIFIER.findall(head.split("(")[0])
                if name:
                    self.names[kind or "types"].add(f"{scope}::{name[-1]}")
            return
        paren = first_call_paren(head)
        if paren > 0:
            name, before = function_name(head, paren)
            if name is None or before.endswith("::"):  # an out-of-class member definition
                return
            qualified = f"{scope}::{name}"
            if class_name is None:
                self.names[kind or "functions"].add(qualified)
            deleted = re.search(r'=\s*delete\s*$', head)
            if not in_detail and not deleted:
                for param in parameters(head, paren):
                    if is_raw_pointer(param):
                        self.pointer_parameters.append(f"{qualified}({param})  [{where}]")
            return
        if class_name is None:
            words = [w for w in IDENTIFIER.findall(head.split("=")[0]) if w not in KEYWORDS]
            if len(words) >= 2:  # a type and a name
                self.names[kind or "variables"].add(f"{scope}::{words[-1]}")

    def read_class(self, qualified, key, body, where):
        """The public members of a public class: their pointer parameters, and nested classes."""
        access = "private" if key == "class" else "public"
        for head, inner in statements(body):
            while True:
                label = ACCESS_LABEL.match(head.strip())
                if not label:
                    break
                access = label.group(1)
                head = head.strip()[label.end():]
            if access != "public":
                continue
            self.read_statement(qualified, qualified, False, head, inner, where)


def installed_headers(root):
    include = os.path.join(root, "include")
    for directory, folders, files in os.walk(include):
        folders.sort()
        for file in sorted(files):
            if file.endswith(HEADER_SUFFIXES):
                yield os.path.relpath(os.path.join(directory, file), root)


def read_surface(root):
    with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
        if not INSTALL_RULE.search(f.read()):
            raise SystemExit("CMakeLists.txt no longer installs include/ whole "
                             "(install(DIRECTORY include/ DESTINATION ...)): teach "
                             "tests/tooling/installed_names.py which headers are installed")
    surface = Surface()
    for rel in installed_headers(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            code = code_only(f.read())
        for _, namespace, text in namespace_blocks(code):
            if namespace.split("::")[0] != "graphstep":
                continue  # std:: specializations, CUDA's types: not graphstep's names
            surface.read_namespace(namespace, text, rel)
    return surface


# A word and the one namespace whose names may use it.
WORDS_OF_ONE_COMPONENT = {"bucket": "graphstep::nccl"}


def misplaced_words(surface):
    """The installed names that use a word of another component."""
    problems = []
    for kind in ("types", "functions", "variables", "detail"):
        for name in sorted(surface.names[kind]):
            namespace, _, last = name.rpartition("::")
            for word, owner in WORDS_OF_ONE_COMPONENT.items():
                if word in last.lower() and not (namespace + "::").startswith(owner + "::"):
                    problems.append(f"{name}: '{word}' names a concept of {owner} alone "
                                    "(docs/design.md, \"Parts and where they live\"); name "
                                    "this for what it is in its own component")
    return problems


def figures(surface):
    counts = {kind: len(surface.names[kind])
              for kind in ("types", "functions", "variables", "detail")}
    return counts, sum(counts.values()), len(surface.pointer_parameters)


def check(root, listing=False):
    """Prints the figures of the tree at `root`; returns the problems (empty when within the
    ceiling)."""
    surface = read_surface(root)
    counts, total, pointers = figures(surface)
    if listing:
        for kind in counts:
            for name in sorted(surface.names[kind]):
                print(f"{kind:9} {name}")
        for entry in sorted(surface.pointer_parameters):
            print(f"pointer   {entry}")
    print(f"installed names: {total} ({counts['types']} types, {counts['functions']} functions, "
          f"{counts['variables']} variables at public namespace scope; {counts['detail']} in "
          f"detail namespaces); raw-pointer parameters of public functions: {pointers}")
    with open(os.path.join(root, CEILING_FILE), encoding="utf-8") as f:
        ceiling = json.load(f)
    problems = misplaced_words(surface)
    for figure, value in (("installed_names", total), ("raw_pointer_parameters", pointers)):
        if value > ceiling[figure]:
            problems.append(f"{figure}: {value}, above the ceiling of {ceiling[figure]} in "
                            f"{CEILING_FILE}. The surface goes down, not sideways: remove a name "
                            "for the one added (move an internal into src/, merge a duplicate), "
                            "or say in review why the ceiling must rise")
        elif value < ceiling[figure]:
            print(f"{figure}: {value}, below the ceiling of {ceiling[figure]}: lower it to "
                  f"{value} in {CEILING_FILE}")
    return problems


# One of each kind, planted in a copy: each must be counted, and the ceiling refused.
PLANTED = """#pragma once
namespace graphstep::memory {
struct planted_type { void take(int* planted) const; };
struct planted_bucket {};
using planted_alias = planted_type;
[[nodiscard]] inline int planted_function(float const* a, char const* label = "") { return 0; }
inline constexpr int planted_constant = 1;
class forward_declared_only;
namespace detail {
void planted_detail_function(int* not_public);
struct planted_detail_type {};
}  // namespace detail
}  // namespace graphstep::memory
"""
PLANTED_NAMES = {"types": 3, "functions": 1, "variables": 1, "detail": 2}
PLANTED_POINTERS = 2  # take(int*) and planted_function(float const*); not the C string


def self_test(root):
    failures = []
    before_counts, before_total, before_pointers = figures(read_surface(root))
    with tempfile.TemporaryDirectory() as copy:
        shutil.copytree(os.path.join(root, "include"), os.path.join(copy, "include"))
        shutil.copy(os.path.join(root, "CMakeLists.txt"), copy)
        os.makedirs(os.path.dirname(os.path.join(copy, CEILING_FILE)))
        with open(os.path.join(copy, CEILING_FILE), "w", encoding="utf-8") as f:
            json.dump({"installed_names": before_total,
                       "raw_pointer_parameters": before_pointers}, f)
        with open(os.path.join(copy, "include", "graphstep", "memory", "planted.hpp"), "w",
                  encoding="utf-8") as f:
            f.write(PLANTED)
        counts, total, pointers = figures(read_surface(copy))
        for kind, added in PLANTED_NAMES.items():
            if counts[kind] - before_counts[kind] != added:
                failures.append(f"self-test: {added} planted {kind}, "
                                f"{counts[kind] - before_counts[kind]} counted")
        if pointers - before_pointers != PLANTED_POINTERS:
            failures.append(f"self-test: {PLANTED_POINTERS} planted pointer parameters, "
                            f"{pointers - before_pointers} counted")
        with contextlib.redirect_stdout(io.StringIO()):
            problems = check(copy)
        if len(problems) != 3 or not any("planted_bucket" in p for p in problems):
            failures.append("self-test: the planted names and pointers were not both refused "
                            "above the ceiling, and 'planted_bucket' outside nccl with them: "
                            f"{problems}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--list", action="store_true", help="print every name as well")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    problems = check(args.root, args.list)
    if args.self_test:
        problems += self_test(args.root)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print("the installed surface is within its ceiling")
    return 0


if __name__ == "__main__":
    sys.exit(main())
