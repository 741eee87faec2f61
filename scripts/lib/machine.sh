# Shell functions the scripts share (source it): what this machine has.

# True when a CUDA GPU is visible (through the driver's nvidia-smi).
gpu_visible() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

# Installs Debian packages with apt-get, updating the package lists first when the install fails;
# false, without trying, unless this is root on a machine with apt-get.
apt_install() {
  [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null 2>&1 || return 1
  apt-get install -y "$@" >/dev/null 2>&1 || {
    apt-get update >/dev/null && apt-get install -y "$@" >/dev/null
  }
}

# graphstep's directory outside the checkout, shared by every clone on the machine: PyTorch's
# virtual environment (scripts/install-torch.sh; the default of CMake's GRAPHSTEP_TORCH_VENV,
# CMakeLists.txt, names the same place) and clang-tidy's cache (scripts/tidy.sh).
graphstep_cache=${XDG_CACHE_HOME:-${HOME}/.cache}/graphstep
torch_venv=${graphstep_cache}/torch-venv
