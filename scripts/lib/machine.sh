# Shell functions the scripts share (source it): what this machine has.

# True when a CUDA GPU is visible (through the driver's nvidia-smi).
gpu_visible() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

# Where scripts/install-torch.sh puts PyTorch, outside the checkout so that every clone shares it
# (the default of CMake's GRAPHSTEP_TORCH_VENV, CMakeLists.txt, names the same place).
torch_venv=${XDG_CACHE_HOME:-${HOME}/.cache}/graphstep/torch-venv
