#!/usr/bin/env python3
"""Counts the lines of glue a port needs: the lines between "// graphstep glue begin" and
"// graphstep glue end" marks of a source, blank lines and lines of comment alone left out, and
fails when there are more than the limit.

  count_glue.py tests/train/llmc_port_gpu_test.cu 60
"""

import sys


def main():
    path, limit = sys.argv[1], int(sys.argv[2])
    inside = False
    regions = 0
    lines = 0
    with open(path, encoding="utf-8") as source:
        for line in source:
            text = line.strip()
            if text == "// graphstep glue begin":
                if inside:
                    sys.exit(f"{path}: a glue region begins inside another")
                inside = True
                regions += 1
            elif text == "// graphstep glue end":
                if not inside:
                    sys.exit(f"{path}: a glue region ends that did not begin")
                inside = False
            elif inside and text and not text.startswith("//"):
                lines += 1
    if inside:
        sys.exit(f"{path}: the last glue region does not end")
    if regions == 0:
        sys.exit(f"{path}: no glue region: mark the glue with the begin and end comments")
    print(f"{path}: {lines} lines of glue in {regions} region(s), at most {limit}")
    if lines > limit:
        sys.exit(1)


if __name__ == "__main__":
    main()
