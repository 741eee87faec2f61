#!/usr/bin/env python3
"""clang-tidy over translation units, re-checking only those whose input changed.

A file that clang-tidy found clean is remembered under a key made of everything its result
depends on: the tool's version, the .clang-tidy configuration, the file's compile command (with
the checkout's path taken out, so that every clone of the project on the machine shares the
cache), and its preprocessed input with comments kept (so a changed header, macro or NOLINT
changes the key). A file whose key is in the cache is not checked again; a changed configuration
or tool changes every key. Files with findings are never remembered.

Usage: tidy_cached.py CLANG_TIDY BUILD_DIR ROOT CACHE_DIR JOBS FILE...
Prints every finding, then one line: "<n> files (<c> checked, <k> clean in the cache)". Exits 1
when there is a finding, 2 when a file cannot be preprocessed.
"""

import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys


def compile_commands(build_dir):
    """The compilation database's entries, by real path of the source."""
    with open(os.path.join(build_dir, "compile_commands.json")) as database:
        entries = json.load(database)
    by_file = {}
    for entry in entries:
        path = os.path.realpath(os.path.join(entry.get("directory", ""), entry["file"]))
        by_file.setdefault(path, entry)
    return by_file


def preprocess_arguments(entry):
    """The entry's compile command turned into one that writes the preprocessed input, comments
    kept, to standard output."""
    arguments = entry.get("arguments") or shlex.split(entry["command"])
    result = []
    skip_next = False
    for argument in arguments:
        if skip_next:
            skip_next = False
            continue
        if argument in ("-o", "-MF", "-MT", "-MQ"):
            skip_next = True
            continue
        if argument in ("-c", "-MD", "-MMD") or argument.startswith(("-o", "-MF", "-MT")):
            continue
        result.append(argument)
    return result + ["-E", "-C"]


def file_key(config_key, root, entry):
    arguments = preprocess_arguments(entry)
    run = subprocess.run(arguments, cwd=entry.get("directory"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"{entry['file']}: the preprocessor failed:\n"
                           + run.stderr.decode(errors="replace"))
    digest = hashlib.sha256(config_key.encode())
    digest.update(" ".join(arguments).replace(root, "<root>").encode())
    digest.update(run.stdout.replace(root.encode(), b"<root>"))
    return digest.hexdigest()


FINDING = re.compile(r": (warning|error): ")


def tidy(clang_tidy, build_dir, path):
    run = subprocess.run([clang_tidy, "-p", build_dir, "--quiet", path], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, check=False)
    output = run.stdout.decode(errors="replace")
    findings = [line for line in output.splitlines() if FINDING.search(line)]
    return run.returncode == 0 and not findings, output


def main():
    clang_tidy, build_dir, root, cache_dir, jobs = sys.argv[1:6]
    files = sys.argv[6:]
    root = os.path.realpath(root)
    jobs = max(1, int(jobs))
    version = subprocess.run([clang_tidy, "--version"], stdout=subprocess.PIPE,
                             check=True).stdout
    with open(os.path.join(root, ".clang-tidy"), "rb") as config:
        config_key = hashlib.sha256(version + config.read()).hexdigest()
    entries = compile_commands(build_dir)
    os.makedirs(cache_dir, exist_ok=True)

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        try:
            keys = dict(zip(files, pool.map(
                lambda path: file_key(config_key, root, entries[path]), files)))
        except RuntimeError as error:
            print(f"tidy.sh: {error}", file=sys.stderr)
            return 2
        to_check = [path for path in files
                    if not os.path.exists(os.path.join(cache_dir, keys[path]))]
        results = dict(zip(to_check, pool.map(
            lambda path: tidy(clang_tidy, build_dir, path), to_check)))

    failed = 0
    noise = re.compile(r"^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$")
    for path in to_check:
        clean, output = results[path]
        if clean:
            open(os.path.join(cache_dir, keys[path]), "w").close()
            continue
        failed += 1
        print(f"==== {os.path.relpath(path, root)}")
        print("\n".join(line for line in output.splitlines() if not noise.match(line)))
    print(f"{len(files)} files ({len(to_check)} checked, {len(files) - len(to_check)} clean in "
          f"the cache), {failed} with findings")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
