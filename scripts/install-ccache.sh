#!/usr/bin/env bash
# ccache from Debian's packages: every preset compiles through it when it is on the path
# (cmake/graphstep_compiler_cache.cmake), so that a rebuild, another preset and a fresh clone
# reuse what this machine compiled before. Nothing is done when it is already installed.
set -euo pipefail
if command -v ccache >/dev/null 2>&1; then
  echo "install-ccache.sh: $(ccache --version | head -n 1)"
  exit 0
fi
if [[ ${EUID} -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-ccache.sh: ccache is not installed and this script can only install it as root" \
       "with apt-get; install it with your package manager (e.g. sudo apt-get install ccache)" >&2
  exit 1
fi
apt-get install -y ccache >/dev/null 2>&1 || {
  apt-get update >/dev/null && apt-get install -y ccache >/dev/null
}
echo "install-ccache.sh: $(ccache --version | head -n 1)"
