#!/usr/bin/env bash
# clang-tidy over the C++ sources of the library and of the simulated device (src/**/*.cpp and
# sim/src/**/*.cpp; the .cu kernels are not checked), with
# the checks of .clang-tidy. Every finding is an error: the script exits non-zero on any. A file
# found clean before is checked again only when its preprocessed input, its compile command, the
# configuration or the tool changed (GRAPHSTEP_TIDY_CACHE, default ~/.cache/graphstep/tidy).
# It reads the compile_commands.json of a build directory, configuring that directory with the
# default preset first when it has none.
# Usage: scripts/tidy.sh [build directory, default build]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
root=$(pwd)
build_dir=${1:-build}
started=${SECONDS}

find_tool() {
  local name
  for name in "$@"; do
    if command -v "${name}" >/dev/null 2>&1; then
      command -v "${name}"
      return 0
    fi
  done
  return 1
}

if ! find_tool clang-tidy clang-tidy-14 >/dev/null; then
  echo "tidy.sh: clang-tidy not found; trying apt-get install -y clang-tidy"
  if ! apt_install clang-tidy; then
    echo "tidy.sh: clang-tidy is required but not installed;" \
         "install it with: sudo apt-get install clang-tidy" >&2
    exit 2
  fi
fi
clang_tidy=$(find_tool clang-tidy clang-tidy-14)

if [[ ! -f "${build_dir}/compile_commands.json" ]]; then
  if [[ "${build_dir}" != build ]]; then
    echo "tidy.sh: ${build_dir}/compile_commands.json is missing; configure that build directory" \
         "with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON first" >&2
    exit 2
  fi
  echo "tidy.sh: ${build_dir}/compile_commands.json is missing; configuring the default preset"
  cmake --preset default -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
fi

# The translation units to check: the compilation database's entries for src/**/*.cpp and
# sim/src/**/*.cpp. Sources that this configuration does not build (src/nccl/ without NCCL) have
# no entry and are skipped.
mapfile -t files < <(python3 - "${build_dir}/compile_commands.json" "${root}" <<'EOF'
import json, os, sys
database, root = sys.argv[1], os.path.realpath(sys.argv[2])
source_dirs = tuple(os.path.join(root, d) + os.sep for d in ("src", os.path.join("sim", "src")))
seen = set()
for entry in json.load(open(database)):
    path = os.path.realpath(os.path.join(entry.get("directory", ""), entry["file"]))
    if path.startswith(source_dirs) and path.endswith(".cpp") and path not in seen:
        seen.add(path)
        print(path)
EOF
)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "tidy.sh: no src/**/*.cpp or sim/src/**/*.cpp entries in ${build_dir}/compile_commands.json" >&2
  exit 2
fi
unbuilt=$(comm -23 <(find "${root}/src" "${root}/sim/src" -name '*.cpp' | sort) <(printf '%s\n' "${files[@]}" | sort))
if [[ -n "${unbuilt}" ]]; then
  echo "tidy.sh: not built in ${build_dir}, so not checked:"
  sed -e "s|^${root}/|  |" <<<"${unbuilt}"
fi

# Files found clean before, with the same input, configuration and tool, are not checked again
# (scripts/lib/tidy_cached.py): the cache lives outside the checkout and every clone shares it.
cache_dir=${GRAPHSTEP_TIDY_CACHE:-${graphstep_cache}/tidy}
jobs=$(nproc)
status=0
result=$(python3 scripts/lib/tidy_cached.py "${clang_tidy}" "${build_dir}" "${root}" "${cache_dir}" \
  "${jobs}" "${files[@]}") || status=$?
echo "${result}"
echo
echo "tidy.sh: $("${clang_tidy}" --version | grep -o 'version [0-9.]*'), $(tail -n 1 <<<"${result}")," \
     "${jobs} jobs, $((SECONDS - started)) s"
if [[ ${status} -ne 0 ]]; then
  echo "tidy.sh: FAILED" >&2
  exit 1
fi
echo "tidy.sh: clean"
