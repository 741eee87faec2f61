#!/usr/bin/env python3
"""The simulated device's surface: every function that cuda_runtime_api.h, cublasLt.h or nccl.h
declares is either implemented by the simulator or refused by name at run time.

    api_surface.py generate --api <runtime|cublaslt|nccl> --header <h> --library <libgraphstep_cuda_sim.a>
    api_surface.py check    --api <runtime|cublaslt|nccl> --header <h> --library <libgraphstep_cuda_sim.a>

`generate` writes the API's refusals (sim/src/<api>_refusals.cpp: a definition returning the
API's "not supported" status, after a message naming the function, for every declared function
no other object of the library defines) and its coverage page (sim/docs/<api>_coverage.md).
NCCL's profiling names (`pncclAllReduce`) are generated as calls of the plain ones. `check`
fails when a declared function is defined nowhere (a new release's addition: generate again,
then implement it or leave it refused), when one is both implemented and refused, when a
function that returns no status is not implemented (a refusal could not say so), or when either
generated file is not what `generate` would write now. (The runtime's refusals that return a
value return an empty one: cudaGetLastError says they failed.) With a header older than the one the
refusals were generated from (they are compiled out there) it says SKIPPED.
"""

import argparse
import dataclasses
import pathlib
import re
import subprocess
import sys

SIM = pathlib.Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class api:
    name: str              # runtime, cublaslt, nccl: the files' prefix
    header: str            # what the refusals include
    version_macro: str     # the header's version, in the refusals' #if
    status: str            # the type of a call's answer
    prefix: str            # the functions of the API: names starting so
    title: str             # for the coverage page
    refused_answer: str    # what a refusal returns
    refusal_call: str      # format: {name}, {reason}: an expression of type `status`
    refusal_include: str   # the header declaring it
    apientry: str          # the calling-convention macro a definition repeats, or ""
    last_error: bool       # whether a refused call that returns no status can still be seen
                           # (cudaGetLastError), so that it may answer an empty value

    @property
    def refusals(self) -> pathlib.Path:
        return SIM / "src" / f"{self.name}_refusals.cpp"

    @property
    def coverage(self) -> pathlib.Path:
        return SIM / "docs" / f"{self.name}_coverage.md"


APIS = {
    "runtime": api("runtime", "cuda_runtime_api.h", "CUDART_VERSION", "cudaError_t", "cuda",
                   "The CUDA runtime", "cudaErrorNotSupported",
                   'refusal::refuse("{name}", "{reason}")', "detail/refusal.hpp", "CUDARTAPI", True),
    "cublaslt": api("cublaslt", "cublasLt.h", "CUBLAS_VERSION", "cublasStatus_t", "cublasLt",
                    "cuBLASLt", "CUBLAS_STATUS_NOT_SUPPORTED",
                    'refusal::refuse_cublaslt("{name}", "{reason}")', "detail/refusal.hpp",
                    "CUBLASWINAPI", False),
    "nccl": api("nccl", "nccl.h", "NCCL_VERSION_CODE", "ncclResult_t", "nccl", "NCCL",
                "ncclInvalidUsage (its message read by ncclGetLastError)",
                'graphstep::sim::detail::nccl::refuse("{name}", "{reason}")',
                "detail/nccl_world.hpp", "", False),
}

# What the simulated device leaves out for good: no texture units, no arrays, no graphics or
# external-resource interop, no driver logs, no loaded libraries. Everything else refused is an
# API the simulator should model and does not yet.
OUT_OF_SCOPE_GROUPS = {"CUDART_EXTRES_INTEROP", "CUDART_INTEROP", "CUDART_TEXTURE_OBJECT",
                       "CUDART_SURFACE_OBJECT", "CUDART_LOGS", "CUDART_LIBRARY"}
OUT_OF_SCOPE_NAME = re.compile(r"Array|Mipmapped|ExternalSemaphore|Ipc|MemPoolExport|MemPoolImport|Graphics|NvSci|"
                               r"GPUDirectRDMA|Texture1D|ExportTable")


def without_comments(text: str) -> str:
    code = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), code)


def parameter_text(code: str, open_paren_end: int) -> tuple:
    """The text between the parentheses that open just before `open_paren_end`, and the index
    after the closing one."""
    depth, end = 1, open_paren_end
    while depth:
        depth += {"(": 1, ")": -1}.get(code[end], 0)
        end += 1
    return code[open_paren_end:end - 1], end


def declarations(the_api: api, header_text: str) -> list:
    """(name, group, return type, parameter text) of each function, in the header's order.

    The runtime's group is the doxygen group (\\defgroup or \\addtogroup) the declaration
    follows, and the block for the runtime library's own build (__CUDART_API_VERSION_INTERNAL)
    is left out. cuBLASLt's and NCCL's headers have no groups: a function's group is the object
    it works on, read from its name."""
    if the_api.name == "runtime":
        internal = header_text.find("#if defined(__CUDART_API_VERSION_INTERNAL)")
        text = header_text[:internal] if internal >= 0 else header_text
        pattern = r"\bextern\s+((?:\w+\s*|\*\s*)*?)(cuda\w+)\s*\("
    else:
        text = header_text
        pattern = (r"(?m)^[ \t]*((?:const\s+)?\w+\s*\*?\s*(?:" + re.escape(the_api.apientry)
                   + r"\s+)?)\b(p?" + the_api.prefix + r"[A-Z]\w*)\s*\(") if the_api.apientry \
            else (r"(?m)^[ \t]*((?:const\s+)?\w+\s*\*?\s*)\b(p?" + the_api.prefix
                  + r"[A-Z]\w*)\s*\(")
    events = [(m.start(), "group", m.group(1))
              for m in re.finditer(r"\\(?:defgroup|addtogroup)\s+(\w+)", text)]
    code = without_comments(text)
    for m in re.finditer(pattern, code):
        parameters, end = parameter_text(code, m.end())
        if not code[end:].lstrip().startswith(";"):
            continue  # an inline definition (cublasLtMatrixLayoutInit), not a declaration
        events.append((m.start(), "function", (m.group(2), m.group(1), parameters)))
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
                                        "CUDARTAPI", "CUBLASWINAPI", "extern"))
        returns = re.sub(r"\s*\*", "*", returns)
        the_group = group if the_api.name == "runtime" else object_of(the_api, name)
        found.append((name, the_group, returns, without_defaults(parameters)))
    return found


def object_of(the_api: api, name: str) -> str:
    """The group of a cuBLASLt or NCCL function: what it works on, read from its name."""
    bare = re.sub(r"^p?" + the_api.prefix, "", name)
    if the_api.name == "cublaslt":
        for word in ("MatmulAlgo", "MatmulPreference", "MatmulDesc", "MatrixTransformDesc",
                     "MatrixTransform", "MatrixLayout", "EmulationDesc", "Logger", "Matmul",
                     "HeuristicsCache"):
            if bare.startswith(word):
                return word
        return "the library (handles, versions, status names)"
    if bare in ("AllReduce", "Reduce", "Bcast", "Broadcast", "ReduceScatter", "AllGather",
                "AlltoAll", "Gather", "Scatter", "RedOpCreatePreMulSum", "RedOpDestroy"):
        return "collectives and reduction operators"
    if bare in ("Send", "Recv"):
        return "point-to-point"
    if bare.startswith("Group"):
        return "groups"
    if bare.startswith("Comm") and ("register" in bare.lower() or "Window" in bare) or \
            bare.startswith("Mem"):
        return "memory and registration"
    if bare.startswith("Comm"):
        return "communicators"
    return "the library (versions, ids, errors)"


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
    return ", ".join(c for c in cleaned if c)


def argument_names(parameters: str) -> str:
    """The names a call passes for a parameter list (`const void* sendbuff, size_t count` ->
    `sendbuff, count`); `void` or nothing passes nothing."""
    if parameters.strip() in ("", "void"):
        return ""
    names = []
    for piece in parameters.split(","):
        words = re.findall(r"\w+", re.sub(r"\[[^\]]*\]", "", piece))
        names.append(words[-1])
    return ", ".join(names)


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


# Refused functions with a reason more precise than "not modelled yet": what the simulated device
# lacks for them.
PRECISE_REASONS = {
    "cudaOccupancyMaxPotentialClusterSize":
        "not modelled yet: the simulated device launches no thread block clusters",
    "cudaOccupancyMaxActiveClusters":
        "not modelled yet: the simulated device launches no thread block clusters",
    "cudaDeviceGetHostAtomicCapabilities":
        "not modelled yet: the simulated device reports no host-native atomic operations",
    "cudaDeviceGetP2PAtomicCapabilities":
        "not modelled yet: the simulated device does not say which atomic capabilities each "
        "operation has over a peer link",
    "cudaDeviceReset":
        "not modelled yet: destroying every allocation, stream, event, graph and pool of the "
        "device, with later use of their handles refused, is not modelled",
}


def refusal_reason(name: str, group: str) -> str:
    if name in PRECISE_REASONS:
        return PRECISE_REASONS[name]
    if group in OUT_OF_SCOPE_GROUPS or OUT_OF_SCOPE_NAME.search(name):
        return "not modelled"
    return "not modelled yet"


def render_refusals(the_api: api, found: list, refused: list, version: str) -> str:
    profiling = [d for d in found if d[0].startswith("pnccl")]
    lines = [
        f"// GENERATED by sim/tools/api_surface.py from {the_api.header} "
        f"({the_api.version_macro} {version}):",
        "// do not edit. Every function the header declares that the simulated device does not",
        f"// implement: it links, and fails by name at run time with {the_api.refused_answer.split(' (')[0]}.",
        "// A function implemented elsewhere in sim/src is removed from here by generating again.",
        "",
        f"#include <{the_api.header}>",
        "",
        f'#include "{the_api.refusal_include}"',
        "",
        f"#if {the_api.version_macro} >= {version}",
        "",
        "// The definitions take the header's parameters unchanged (names and const included) and use",
        "// none.",
        "// NOLINTBEGIN(misc-unused-parameters,readability-named-parameter,misc-misplaced-const)",
        "#pragma GCC diagnostic push",
        '#pragma GCC diagnostic ignored "-Wunused-parameter"',
        '#pragma GCC diagnostic ignored "-Wdeprecated-declarations"',
        "",
    ]
    if the_api.name in ("runtime", "cublaslt"):
        lines += ["namespace refusal = graphstep::sim::detail;", ""]
    entry = f" {the_api.apientry}" if the_api.apientry else ""
    for name, group, returns, parameters in refused:
        if name.startswith("pnccl"):
            continue
        call = the_api.refusal_call.format(name=name, reason=refusal_reason(name, group))
        body = (f"return {call};" if returns == the_api.status
                else f"static_cast<void>({call});\n  return {{}};")
        lines += [f"{returns}{entry} {name}({parameters}) {{", f"  {body}", "}", ""]
    for name, _, returns, parameters in profiling:
        plain = name[1:]
        call = f"{plain}({argument_names(parameters)})"
        body = f"{call};" if returns == "void" else f"return {call};"
        lines += [f"// NCCL's profiling name, as libnccl defines it: the plain call.",
                  f"{returns} {name}({parameters}) {{", f"  {body}", "}", ""] \
            if name == profiling[0][0] else [f"{returns} {name}({parameters}) {{", f"  {body}",
                                             "}", ""]
    lines += ["#pragma GCC diagnostic pop",
              "// NOLINTEND(misc-unused-parameters,readability-named-parameter,misc-misplaced-const)",
              "", f"#endif  // {the_api.version_macro} >= {version}", ""]
    return "\n".join(lines)


def render_coverage(the_api: api, found: list, implemented: set, titles: dict,
                    version: str) -> str:
    # A profiling name counts as its plain one: the table lists the plain names only.
    found = [d for d in found if not d[0].startswith("pnccl")]
    rows, totals = [], [0, 0, 0, 0]
    order = []
    for _, group, _, _ in found:
        if group not in order:
            order.append(group)
    for group in order:
        names = [n for n, g, _, _ in found if g == group]
        done = [n for n in names if n in implemented]
        later = [n for n in names if n not in implemented
                 and refusal_reason(n, group).startswith("not modelled yet")]
        never = [n for n in names if n not in implemented and n not in later]
        counts = [len(names), len(done), len(later), len(never)]
        totals = [a + b for a, b in zip(totals, counts)]
        rows.append(f"| {titles.get(group, group).strip()} | "
                    + " | ".join(str(c) for c in counts) + " |")
    if the_api.name == "runtime":
        grouping = "group of the header"
        refused_how = ["`graphstep simulated device: <function> is not modelled` — *yet* where the",
                       "simulator should model it, for good where the simulated device has no "
                       "such hardware",
                       "or host integration (textures, surfaces, arrays, graphics and "
                       "external-resource interop,",
                       "IPC, driver logs, loaded libraries)."]
    else:
        grouping = "what it works on"
        refused_how = ["`graphstep simulated device: <function> is not modelled yet`: the "
                       "simulator should",
                       "model each of them." + (" Each also has its profiling name (`pnccl…`), "
                                                "which calls it." if the_api.name == "nccl" else "")]
    lines = [
        f"# {the_api.title} on the simulated device",
        "",
        f"GENERATED by `sim/tools/api_surface.py generate --api {the_api.name}` from "
        f"`{the_api.header}`",
        f"({the_api.version_macro} {version}); the test `sim.{the_api.name}_surface_is_covered` "
        "fails when this page,",
        f"`sim/src/{the_api.name}_refusals.cpp` or the simulator's library disagree with the "
        "header.",
        "",
        "Every function the header declares links. *Implemented* functions follow their",
        "documentation (sim/docs/simulator.md); *refused* ones return "
        f"{the_api.refused_answer}",
        "and print, once per function,",
    ] + refused_how + [
        "",
        f"| {grouping} | declared | implemented | refused, not yet modelled | refused for good |",
        "| --- | ---: | ---: | ---: | ---: |",
    ] + rows + [f"| **all** | " + " | ".join(f"**{t}**" for t in totals) + " |", ""]
    lines += ["## Refused, not yet modelled", ""]
    for group in order:
        later = [n for n, g, _, _ in found if g == group and n not in implemented
                 and refusal_reason(n, g).startswith("not modelled yet")]
        if later:
            lines.append(f"- {titles.get(group, group).strip()}: "
                         + ", ".join(f"`{n}`" for n in later))
    lines.append("")
    return "\n".join(lines)


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("generate", "check"))
    parser.add_argument("--api", choices=sorted(APIS), required=True)
    parser.add_argument("--header", type=pathlib.Path, required=True)
    parser.add_argument("--library", type=pathlib.Path, required=True)
    args = parser.parse_args(argv)
    the_api = APIS[args.api]
    header_text = args.header.read_text()
    if the_api.name == "cublaslt":
        # cublasLt.h takes its version from cublas_api.h beside it.
        version_text = (args.header.parent / "cublas_api.h").read_text()
        parts = [re.search(rf"#define\s+CUBLAS_VER_{p}\s+(\d+)", version_text).group(1)
                 for p in ("MAJOR", "MINOR", "PATCH")]
        version = str(int(parts[0]) * 10000 + int(parts[1]) * 100 + int(parts[2]))
    else:
        version = re.search(rf"#define\s+{the_api.version_macro}\s+(\d+)", header_text).group(1)
    found = declarations(the_api, header_text)
    defined = defined_by_objects(args.library)
    refusals_object = f"{the_api.name}_refusals"
    # Implemented: defined by an object of the library other than the refusals'; a profiling
    # name is what its plain name is.
    implemented = {n for n, objects in defined.items()
                   if any(not o.startswith(refusals_object) for o in objects)}
    implemented |= {n for n, _, _, _ in found if n.startswith("pnccl") and n[1:] in implemented}
    refused = [d for d in found if d[0] not in implemented]
    problems = [f"{name} returns {returns}, not {the_api.status}: a refusal could not say so; "
                "implement it in sim/src" for name, _, returns, _ in refused
                if returns != the_api.status and not the_api.last_error
                and not name.startswith("pnccl")]
    refusals = render_refusals(the_api, found, refused, version)
    coverage = render_coverage(the_api, found, implemented, groups(header_text), version)
    if args.mode == "generate":
        if problems:
            print("\n".join(problems))
            return 1
        the_api.refusals.write_text(refusals)
        the_api.coverage.write_text(coverage)
        print(f"{len(found)} functions: {len(found) - len(refused)} implemented, "
              f"{len(refused)} refused")
        return 0
    generated = (re.search(rf"{the_api.version_macro} (\d+)", the_api.refusals.read_text())
                 if the_api.refusals.exists() else None)
    if generated and int(version) < int(generated.group(1)):
        # An older release than the refusals': they are compiled out (#if <version macro>).
        print(f"SKIPPED: this {the_api.header} is {the_api.version_macro} {version}, older than "
              f"the {generated.group(1)} the refusals were generated from")
        return 0
    missing = [n for n, _, _, _ in found if n not in defined]
    if missing:
        problems.append(f"{len(missing)} declared function(s) defined nowhere: "
                        + ", ".join(missing))
    # Only the header's functions: an unoptimized build also emits the headers' inline functions
    # (cuda_bf16.hpp's constructors) as weak symbols in every object that includes them.
    declared = {n for n, _, _, _ in found}
    both = [n for n, objects in defined.items()
            if n in declared and len(objects) > 1
            and any(o.startswith(refusals_object) for o in objects)]
    if both:
        problems.append("implemented and refused at once: " + ", ".join(sorted(both)))
    for path, wanted in ((the_api.refusals, refusals), (the_api.coverage, coverage)):
        if not path.exists() or path.read_text() != wanted:
            problems.append(f"{path.relative_to(SIM.parent)} is not what the header and the "
                            "library give now")
    if problems:
        print("\n".join(problems))
        print(f"run: python3 sim/tools/api_surface.py generate --api {the_api.name} "
              f"--header {args.header} --library {args.library}; then rebuild")
        return 1
    print(f"all {len(found)} functions of {the_api.header} link: "
          f"{len(found) - len(refused)} implemented, {len(refused)} refused by name")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
