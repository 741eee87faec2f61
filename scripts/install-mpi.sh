#!/usr/bin/env bash
# Open MPI from Debian's packages (openmpi-bin, libopenmpi-dev), for the MPI bootstrap (built
# wherever CMake finds MPI: GRAPHSTEP_WITH_MPI is AUTO by default) and its test mpi_bootstrap
# (tests/nccl/mpi_bootstrap_mpi_test.cpp), which runs three ranks under mpiexec and needs no GPU. Nothing is done when mpiexec and mpicc
# are already found. Needs root, or sudo, and apt-get.
# Usage: scripts/install-mpi.sh
set -euo pipefail

if command -v mpiexec >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
  echo "install-mpi.sh: MPI is already installed ($(command -v mpiexec), $(command -v mpicc))"
  exit 0
fi

fail() {
  echo "install-mpi.sh: $*" >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 ||
  fail "apt-get not found: install Open MPI or MPICH (mpiexec, mpicc, mpi.h) with this" \
    "system's package manager, or build Open MPI from source, then configure graphstep again"

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 ||
    fail "not root and no sudo: run this script as root (it calls apt-get install)"
  sudo=(sudo)
fi

packages=(openmpi-bin libopenmpi-dev)
echo "install-mpi.sh: apt-get update"
"${sudo[@]}" apt-get update ||
  fail "apt-get update failed: check the network and /etc/apt/sources.list, then run again"
echo "install-mpi.sh: apt-get install ${packages[*]}"
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
  "${packages[@]}" ||
  fail "apt-get install ${packages[*]} failed: see apt-get's message above"

if ! command -v mpiexec >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
  fail "${packages[*]} installed, yet mpiexec or mpicc is not on PATH (PATH=${PATH})"
fi
echo "install-mpi.sh: installed $(mpiexec --version 2>/dev/null | head -n 1)"
