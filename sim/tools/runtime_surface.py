#!/usr/bin/env python3
"""The CUDA runtime's surface on the simulated device: every function cuda_runtime_api.h
declares is either implemented by the simulator or refused by name at run time.

    runtime_surface.py generate --header <cuda_runtime_api.h> --library <libgraphstep_cuda_sim.a>
    runtime_surface.py check    --header <cuda_runtime_api.h> --library <libgraphstep_cuda_sim.a>

`generate` writes sim/src/runtime_refusals.cpp (a definition returning cudaErrorNotSupported,
with a message naming the function, for every declared function no other object of the library
defines) and sim/docs/runtime_coverage.md (the table by the header's own groups). `check` fails
when a declared function is defined nowhere (a new toolkit's addition: generate again, then
implement it or leave it refused), when one is both implemented and refused, or when either
generated file is not what `generate` would write now. With a toolkit older than the one the
refusals were generated from (they are compiled out there) it says SKIPPED.
"""

import argparse
import pathlib
import re
import subprocess
import sys

SIM = pathlib.Path(__file__).resolve().parent.parent
REFUSALS = SIM / "src" / "runtime_refusals.cpp"
COVERAGE = SIM / "docs" / "runtime_coverage.md"

# What the simulated device leaves out for good: no texture units, no arrays, no graphics or
# external-resource interop, no driver logs, no loaded libraries. Everything else refused is
# runtime the simulator should model and does not yet.
OUT_OF_SCOPE_GROUPS = {"CUDART_EXTRES_INTEROP", "CUDART_INTEROP", "CUDART_TEXTURE_OBJECT",
                       "CUDART_SURFACE_OBJECT", "CUDART_LOGS", "CUDART_LIBRARY"}
OUT_OF_SCOPE_NAME = re.compile(r"Array|Mipmapped|ExternalSemaphore|Ipc|Graphics|NvSci|"
                               r"GPUDirectRDMA|Texture1D|ExportTable")


def declarations(header_text: str) -> list:
    """(name, group, return type, parameter text) of each function, in the header's order.
    The group is the doxygen group (\\defgroup or \\addtogroup) the declaration follows; the
    block for the runtime library's own build (__CUDART_API_VERSION_INTERNAL) is left out."""
    internal = header_text.find("#if defined(__CUDART_API_VERSION_INTERNAL)")
    text = header_text[:internal] if internal >= 0 else header_text
    events = [(m.start(), "group", m.group(1))
              for m in re.finditer(r"\\(?:defgroup|addtogroup)\s+(\w+)", text)]
    code = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), text, flags=re.S)
    code = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), code)
    for m in re.finditer(r"\bextern\s+((?:\w+\s*|\*\s*)*?)(cuda\w+)\s*\(", code):
        depth, end = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            end += 1
        if not code[end:].lstrip().startswith(";"):
            continue
        events.append((m.start(), "function", (m.group(2), m.group(1), code[m.end():end - 1])))
    found, seen, group = [], set(), None
    for _, kind, value in sorted(events, key=lambda e: e[0]):
        if kind == "group":
            group = value
            continue
        name, prefix, parameters = value
        if name in seen:
            continue
        seen.add(name)
        returns = " ".join(w for w in prefix.split()
                           if w not in ("__host__", "__cudart_builtin__", "__CUDA_DEPRECATED",
                                        "CUDARTAPI"))
        found.append((name, group, returns, without_defaults(parameters)))
    return found


def without_defaults(parameters: str) -> str:
    """A parameter list as a definition must write it: no default argument (`__dv(x)` or
    `= x`), one space between words."""
    pieces, depth, start = [], 0, 0
    for i, c in enumerate(parameters + ","):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            pieces.append(parameters[start:i])
            start = i + 1
    cleaned = []
    for piece in pieces:
        piece = re.sub(r"__dv\([^)]*\)", "", piece).split("=")[0]
        cleaned.append(re.sub(r"\s+", " ", piece).strip())
    return ", ".join(cleaned)


def groups(header_text: str) -> dict:
    """doxygen group -> its title."""
    return dict(re.findall(r"\\defgroup\s+(\w+)\s+([^\n*]+)", header_text))


def defined_by_objects(library: pathlib.Path) -> dict:
    """name -> the objects of the static library that define it (nm)."""
    out = subprocess.run(["nm", "--defined-only", str(library)], capture_output=True, text=True,
                         check=True).stdout
    defined, current = {}, None
    for line in out.splitlines():
        if line.endswith(".o:"):
            current = line[:-1]
            continue
        fields = line.split()
        if len(fields) == 3 and fields[1] in ("T", "W"):
            defined.setdefault(fields[2], []).append(current)
    return defined


def refusal_reason(name: str, group: str) -> str:
    if group in OUT_OF_SCOPE_GROUPS or OUT_OF_SCOPE_NAME.search(name):
        return "not modelled"
    return "not modelled yet"


def render_refusals(refused: list, version: str) -> str:
    lines = [
        "// GENERATED by sim/tools/runtime_surface.py from cuda_runtime_api.h "
        f"(CUDART_VERSION {version}):",
        "// do not edit. Every function the header declares that the simulated device does not",
        "// implement: it links, and fails by name at run time with cudaErrorNotSupported. A",
        "// function implemented elsewhere in sim/src is removed from here by generating again.",
        "",
        "#include <cuda_runtime_api.h>",
        "",
        '#include "detail/refusal.hpp"',
        "",
        f"#if CUDART_VERSION >= {version}",
        "",
        "// The definitions take the header's parameters unchanged, names included, and use none.",
        "// NOLINTBEGIN(misc-unused-parameters,readability-named-parameter)",
        "#pragma GCC diagnostic push",
        '#pragma GCC diagnostic ignored "-Wunused-parameter"',
        "",
        "namespace refusal = graphstep::sim::detail;",
        "",
    ]
    for name, group, returns, parameters in refused:
        reason = refusal_reason(name, group)
        call = f'refusal::refuse("{name}", "{reason}")'
        if returns == "cudaError_t":
            body = f"return {call};"
        else:
            body = f"static_cast<void>({call});\n  return {{}};"
        lines += [f"{returns} CUDARTAPI {name}({parameters}) {{", f"  {body}", "}", ""]
    lines += ["#pragma GCC diagnostic pop", "// NOLINTEND(misc-unused-parameters,readability-named-parameter)",
              "", f"#endif  // CUDART_VERSION >= {version}", ""]
    return "\n".join(lines)


def render_coverage(found: list, implemented: set, titles: dict, version: str) -> str:
    rows, totals = [], [0, 0, 0, 0]
    order = []
    for _, group, _, _ in found:
        if group not in order:
            order.append(group)
    for group in order:
        names = [n for n, g, _, _ in found if g == group]
        done = [n for n in names if n in implemented]
        later = [n for n in names if n not in implemented
                 and refusal_reason(n, group) == "not modelled yet"]
        never = [n for n in names if n not in implemented and n not in later]
        counts = [len(names), len(done), len(later), len(never)]
        totals = [a + b for a, b in zip(totals, counts)]
        rows.append(f"| {titles.get(group, group).strip()} | "
                    + " | ".join(str(c) for c in counts) + " |")
    lines = [
        "# The CUDA runtime on the simulated device",
        "",
        "GENERATED by `sim/tools/runtime_surface.py generate` from `cuda_runtime_api.h` "
        f"(CUDART_VERSION {version}); the test `sim.runtime_surface_is_covered` fails when this",
        "page, `sim/src/runtime_refusals.cpp` or the simulator's library disagree with the header.",
        "",
        "Every function the header declares links. *Implemented* functions follow their",
        "documentation (sim/docs/simulator.md); *refused* ones return `cudaErrorNotSupported` and",
        "print, once per function, `graphstep simulated device: <function> is not modelled` —",
        "*yet* where the simulator should model it, for good where the simulated device has no such",
        "hardware or host integration (textures, surfaces, arrays, graphics and external-resource",
        "interop, IPC, driver logs, loaded libraries).",
        "",
        "| group of the header | declared | implemented | refused, not yet modelled | refused for good |",
        "| --- | ---: | ---: | ---: | ---: |",
    ] + rows + [f"| **all** | " + " | ".join(f"**{t}**" for t in totals) + " |", ""]
    lines += ["## Refused, not yet modelled", ""]
    for group in order:
        later = [n for n, g, _, _ in found if g == group and n not in implemented
                 and refusal_reason(n, g) == "not modelled yet"]
        if later:
            lines.append(f"- {titles.get(group, group).strip()}: " + ", ".join(f"`{n}`" for n in later))
    lines.append("")
    return "\n".join(lines)


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("generate", "check"))
    parser.add_argument("--header", type=pathlib.Path, required=True)
    parser.add_argument("--library", type=pathlib.Path, required=True)
    args = parser.parse_args(argv)
    header_text = args.header.read_text()
    version = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", header_text).group(1)
    found = declarations(header_text)
    defined = defined_by_objects(args.library)
    # Implemented: defined by an object of the library other than the refusals'.
    implemented = {n for n, objects in defined.items()
                   if any(not o.startswith("runtime_refusals") for o in objects)}
    refused = [d for d in found if d[0] not in implemented]
    refusals = render_refusals(refused, version)
    coverage = render_coverage(found, implemented, groups(header_text), version)
    if args.mode == "generate":
        REFUSALS.write_text(refusals)
        COVERAGE.write_text(coverage)
        print(f"{len(found)} functions: {len(found) - len(refused)} implemented, "
              f"{len(refused)} refused")
        return 0
    generated = re.search(r"CUDART_VERSION (\d+)", REFUSALS.read_text()) if REFUSALS.exists() \
        else None
    if generated and int(version) < int(generated.group(1)):
        # An older toolkit than the refusals': they are compiled out (#if CUDART_VERSION).
        print(f"SKIPPED: this toolkit's header is CUDART_VERSION {version}, older than the "
              f"{generated.group(1)} the refusals were generated from")
        return 0
    problems = []
    missing = [n for n, _, _, _ in found if n not in defined]
    if missing:
        problems.append(f"{len(missing)} declared function(s) defined nowhere: "
                        + ", ".join(missing))
    both = [n for n, objects in defined.items()
            if len(objects) > 1 and any(o.startswith("runtime_refusals") for o in objects)]
    if both:
        problems.append("implemented and refused at once: " + ", ".join(sorted(both)))
    for path, wanted in ((REFUSALS, refusals), (COVERAGE, coverage)):
        if not path.exists() or path.read_text() != wanted:
            problems.append(f"{path.relative_to(SIM.parent)} is not what the header and the "
                            "library give now")
    if problems:
        print("\n".join(problems))
        print(f"run: python3 sim/tools/runtime_surface.py generate --header {args.header} "
              f"--library {args.library}; then rebuild")
        return 1
    print(f"all {len(found)} functions of the header link: "
          f"{len(found) - len(refused)} implemented, {len(refused)} refused by name")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
