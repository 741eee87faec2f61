#pragma once

/// @file nccl/detail/device_choice.hpp
/// @brief How a rank picks its GPU and checks a device list: the rules the communicators'
/// constructors apply (nccl_comm, communicator_from_environment, communicator_from_mpi).
/// graphstep_core: plain C++, includes no CUDA header.

#include <graphstep/nccl/launch_environment.hpp>
#include <string>
#include <vector>

namespace graphstep::nccl::detail {

/// @brief True when NCCL_MULTI_RANK_GPU_ENABLE is a nonzero integer, as NCCL reads it.
/// @throws usage_error when it is set to something other than an integer
[[nodiscard]] bool ranks_may_share_a_gpu(environment_reader const& read);

/// @brief The first NCCL version (NCCL_VERSION_CODE, 2.30.0) that accepts several ranks of one
/// communicator on one GPU, with NCCL_MULTI_RANK_GPU_ENABLE=1.
inline constexpr int first_nccl_version_with_multi_rank_gpus = 23000;

/// @brief The GPU of a process's local rank: the local rank itself, one rank per visible GPU
/// on each host; or, when there are more local ranks than GPUs and ranks may share a GPU
/// (NCCL_MULTI_RANK_GPU_ENABLE with NCCL 2.30 or later), the local rank modulo the visible
/// GPUs. `who` starts the message ("nccl_comm: LOCAL_RANK=3", "communicator_from_mpi: local
/// rank 3"); `nccl_version` is what ncclGetVersion reports.
/// @throws usage_error when local_rank ≥ visible_devices and ranks may not share a GPU, or the
/// loaded NCCL is older than 2.30
[[nodiscard]] int local_device(std::string const& who, int local_rank, int visible_devices,
                               bool ranks_may_share_a_gpu, int nccl_version);

/// @brief Checks a single-process device list: not empty, no negative id, no device twice
/// (NCCL runs one rank per GPU and refuses a duplicate).
/// @throws usage_error naming the device
void check_local_device_list(std::vector<int> const& devices);

}  // namespace graphstep::nccl::detail
