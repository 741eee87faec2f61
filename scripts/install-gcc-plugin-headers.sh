#!/usr/bin/env bash
# The headers of GCC's plugin API from Debian's packages (gcc-<major>-plugin-dev), for the
# simulated device's GCC plugin (sim/tools/thread_local_accesses_plugin.cpp), which removes the
# race checker's entry-point calls on `__shared__` storage from simulated kernels: without it
# they build and run the same, slower. Nothing is done when the headers of the g++ on PATH are
# already there. Needs root, or sudo, and apt-get.
# Usage: scripts/install-gcc-plugin-headers.sh
set -euo pipefail

fail() {
  echo "install-gcc-plugin-headers.sh: $*" >&2
  exit 1
}

command -v g++ >/dev/null 2>&1 || fail "no g++ on PATH: nothing to install headers for"
plugin_dir=$(g++ -print-file-name=plugin)
if [[ -f "${plugin_dir}/include/gcc-plugin.h" ]]; then
  echo "install-gcc-plugin-headers.sh: already installed (${plugin_dir}/include)"
  exit 0
fi
major=$(g++ -dumpversion | cut -d. -f1)
package="gcc-${major}-plugin-dev"

command -v apt-get >/dev/null 2>&1 ||
  fail "apt-get not found: install the plugin headers of GCC ${major} (${plugin_dir}/include)" \
    "with this system's package manager"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 ||
    fail "not root and no sudo: run this script as root (it calls apt-get install)"
  sudo=(sudo)
fi
echo "install-gcc-plugin-headers.sh: apt-get install ${package}"
if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
  "${package}"; then
  "${sudo[@]}" apt-get update ||
    fail "apt-get update failed: check the network and /etc/apt/sources.list, then run again"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
    "${package}" || fail "apt-get install ${package} failed: see apt-get's message above"
fi
[[ -f "${plugin_dir}/include/gcc-plugin.h" ]] ||
  fail "${package} installed, yet ${plugin_dir}/include/gcc-plugin.h is missing"
echo "install-gcc-plugin-headers.sh: installed ${package}"
