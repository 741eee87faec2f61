#!/usr/bin/env bash
# Copies the test and benchmark dependencies of a build machine into third_party/, for a GPU
# machine that has the CUDA toolkit but no package registry. third_party/ is git-ignored;
# ship it with the source tree, and scripts/gpu-check.sh picks it up.
#   third_party/googletest   GoogleTest sources (Debian's googletest package)
#   third_party/prefix       Google Benchmark headers, shared library and CMake package
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -d /usr/src/googletest ]]; then
  echo "vendor-deps: /usr/src/googletest missing: apt-get install googletest" >&2
  exit 1
fi
rm -rf third_party/googletest third_party/prefix
mkdir -p third_party/prefix/include third_party/prefix/lib
cp -r /usr/src/googletest third_party/googletest

multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/${multiarch}
if [[ -d /usr/include/benchmark && -d ${libdir}/cmake/benchmark ]]; then
  cp -r /usr/include/benchmark third_party/prefix/include/
  mkdir -p "third_party/prefix/lib/${multiarch}/cmake"
  cp -P "${libdir}"/libbenchmark*.so* "${libdir}"/libbenchmark_main.a \
    "third_party/prefix/lib/${multiarch}/"
  cp -r "${libdir}/cmake/benchmark" "third_party/prefix/lib/${multiarch}/cmake/"
else
  echo "vendor-deps: Google Benchmark not installed here (libbenchmark-dev); benchmarks will be"\
       "skipped where it is missing" >&2
fi
du -sh third_party
