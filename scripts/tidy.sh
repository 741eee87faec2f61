#!/usr/bin/env bash
# clang-tidy over the library's C++ sources (src/**/*.cpp; the .cu kernels are not checked), with
# the checks of .clang-tidy. Every finding is an error: the script exits non-zero on any.
# It reads the compile_commands.json of a build directory, configuring that directory with the
# default preset first when it has none.
# Usage: scripts/tidy.sh [build directory, default build]
set -euo pipefail
cd "$(dirname "$0")/.."
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

if ! find_tool clang-tidy clang-tidy-14 >/dev/null || ! find_tool run-clang-tidy run-clang-tidy-14 \
    run-clang-tidy.py >/dev/null; then
  if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "tidy.sh: clang-tidy not found; installing it (apt-get install -y clang-tidy)"
    apt-get install -y clang-tidy >/dev/null || {
      apt-get update >/dev/null && apt-get install -y clang-tidy >/dev/null
    }
  else
    echo "tidy.sh: clang-tidy and run-clang-tidy are required but not installed;" \
         "install them with: sudo apt-get install clang-tidy" >&2
    exit 2
  fi
fi
clang_tidy=$(find_tool clang-tidy clang-tidy-14)
run_clang_tidy=$(find_tool run-clang-tidy run-clang-tidy-14 run-clang-tidy.py)

if [[ ! -f "${build_dir}/compile_commands.json" ]]; then
  if [[ "${build_dir}" != build ]]; then
    echo "tidy.sh: ${build_dir}/compile_commands.json is missing; configure that build directory" \
         "with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON first" >&2
    exit 2
  fi
  echo "tidy.sh: ${build_dir}/compile_commands.json is missing; configuring the default preset"
  cmake --preset default -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
fi

# The translation units to check: the compilation database's entries for src/**/*.cpp. Sources
# that this configuration does not build (src/nccl/ without NCCL) have no entry and are skipped.
mapfile -t files < <(python3 - "${build_dir}/compile_commands.json" "${root}" <<'EOF'
import json, os, sys
database, root = sys.argv[1], os.path.realpath(sys.argv[2])
source_dir = os.path.join(root, "src") + os.sep
seen = set()
for entry in json.load(open(database)):
    path = os.path.realpath(os.path.join(entry.get("directory", ""), entry["file"]))
    if path.startswith(source_dir) and path.endswith(".cpp") and path not in seen:
        seen.add(path)
        print(path)
EOF
)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "tidy.sh: no src/**/*.cpp entries in ${build_dir}/compile_commands.json" >&2
  exit 2
fi
unbuilt=$(comm -23 <(find "${root}/src" -name '*.cpp' | sort) <(printf '%s\n' "${files[@]}" | sort))
if [[ -n "${unbuilt}" ]]; then
  echo "tidy.sh: not built in ${build_dir}, so not checked:"
  sed -e "s|^${root}/|  |" <<<"${unbuilt}"
fi

# run-clang-tidy takes regular expressions: one alternation of the exact paths.
pattern=$(printf '%s\n' "${files[@]}" | sed -e 's/[][\.*^$+?(){}|]/\\&/g' -e 's/.*/^&$/' |
          paste -sd '|')
jobs=$(nproc)
log=$(mktemp)
trap 'rm -f "${log}" "${log}.plain"' EXIT

status=0
"${run_clang_tidy}" -clang-tidy-binary "${clang_tidy}" -p "${build_dir}" -j "${jobs}" -quiet \
  "${pattern}" >"${log}" 2>&1 || status=$?
# run-clang-tidy always asks for colour: keep it for a terminal, strip it for logs and counting.
sed -r 's/\x1b\[[0-9;]*m//g' "${log}" >"${log}.plain"
shown=${log}.plain
[[ -t 1 ]] && shown=${log}
# Drop the per-file command lines and the "N warnings generated" chatter; keep the findings.
noise='(^|m)([^ ]*clang-tidy(-[0-9]+)? |[0-9]+ warnings? (and [0-9]+ errors? )?generated\.'
noise+='|Suppressed [0-9]+ warnings|Use -header-filter=|Use -system-headers)'
grep -v -E "${noise}" \
  "${shown}" || true

# grep finds nothing in a clean run; under pipefail that must not end the script.
findings=$({ grep -E ': (warning|error): ' "${log}.plain" || true; } | sort -u | wc -l)
if [[ ${status} -eq 0 && ${findings} -ne 0 ]]; then status=1; fi
echo
echo "tidy.sh: $("${clang_tidy}" --version | grep -o 'version [0-9.]*'), ${#files[@]} files," \
     "${jobs} jobs, $((SECONDS - started)) s: ${findings} finding(s)"
if [[ ${status} -ne 0 ]]; then
  echo "tidy.sh: FAILED" >&2
  exit 1
fi
echo "tidy.sh: clean"
