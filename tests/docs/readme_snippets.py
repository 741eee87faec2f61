#!/usr/bin/env python3
"""Every C++ snippet of the README is code a test compiles and runs.

The test source marks the README's lines with `// README begin` and `// README end`; the marked
regions, each with its common indentation removed and joined by one blank line, must equal the
README's C++ snippets joined the same way, character for character. Exits 1 naming the first
line that differs.

  readme_snippets.py README.md tests/docs/readme_snippet_gpu_test.cu
"""

import sys
import textwrap


def readme_snippets(path):
    snippets, current = [], None
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            stripped = line.rstrip("\n")
            if current is None and stripped == "```cpp":
                current = []
            elif current is not None and stripped == "```":
                snippets.append("\n".join(current))
                current = None
            elif current is not None:
                current.append(stripped)
    return snippets


def marked_regions(path):
    regions, current = [], None
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            stripped = line.strip()
            if stripped == "// README begin":
                current = []
            elif stripped == "// README end":
                regions.append(textwrap.dedent("\n".join(current)).rstrip("\n"))
                current = None
            elif current is not None:
                current.append(line.rstrip("\n"))
    return regions


def difference(snippets, regions, readme, test):
    """What differs between the README's snippets and the marked regions, or None."""
    if not snippets:
        return f"{readme}: no ```cpp snippet found"
    want = "\n\n".join(snippets).split("\n")
    have = "\n\n".join(regions).split("\n")
    for number, (a, b) in enumerate(zip(want, have), start=1):
        if a != b:
            return (f"line {number} of the README's C++ differs from the tested code:\n"
                    f"  README: {a!r}\n  test:   {b!r}\nEdit {test} and {readme} together.")
    if len(want) != len(have):
        return (f"the README's C++ has {len(want)} lines, the tested code {len(have)}: "
                f"edit {test} and {readme} together")
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    readme, test = sys.argv[1], sys.argv[2]
    snippets = readme_snippets(readme)
    regions = marked_regions(test)
    # The check must be able to fail: one character changed, one line more, are both caught.
    if regions:
        changed = [regions[0].replace("g", "q", 1)] + regions[1:]
        longer = regions + ["int one_more_line;"]
        for planted in (changed, longer):
            if difference(snippets, planted, readme, test) is None:
                print("the check missed a planted difference")
                return 1
    problem = difference(snippets, regions, readme, test)
    if problem:
        print(problem)
        return 1
    print(f"{len(snippets)} snippet(s): the README's C++ is the tested code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
