#!/usr/bin/env bash
# ccache from Debian's packages: every preset compiles through it when it is on the path
# (cmake/graphstep_compiler_cache.cmake), so that a rebuild, another preset and a fresh clone
# reuse what this machine compiled before. Nothing is done when it is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
if ! command -v ccache >/dev/null 2>&1 && ! apt_install ccache; then
  echo "install-ccache.sh: ccache is not installed and this script can only install it as root" \
       "with apt-get; install it with your package manager (e.g. sudo apt-get install ccache)" >&2
  exit 1
fi
echo "install-ccache.sh: $(ccache --version | head -n 1)"
