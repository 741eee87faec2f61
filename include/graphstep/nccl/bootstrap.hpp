#pragma once

/// @file nccl/bootstrap.hpp
/// @brief A communicator made from the launcher's environment: torchrun's variables (the id
/// travels by graphstep's TCP rendezvous), NCCL_COMM_ID (NCCL bootstraps itself), mpirun (MPI,
/// in builds with it), or none (one rank).

#include <chrono>
#include <graphstep/nccl/detail/rendezvous.hpp>
#include <graphstep/nccl/nccl_comm.hpp>

namespace graphstep::nccl {

/// @brief How `communicator_from_environment` makes the communicator.
struct bootstrap_options {
  /// How long the TCP rendezvous waits for every rank.
  std::chrono::milliseconds rendezvous_timeout{detail::default_rendezvous_timeout};
  /// The communicator's `nccl_comm_options::slot`.
  int slot{0};
  /// The communicator's `nccl_comm_options::init_timeout`: how long NCCL's own initialization
  /// waits for every rank, once the id has reached them.
  std::chrono::milliseconds init_timeout{default_init_timeout};
};

/// @brief From the launcher's environment (see `read_launch_environment`): RANK/WORLD_SIZE/
/// MASTER_ADDR/MASTER_PORT (the id is exchanged by graphstep's TCP rendezvous), NCCL_COMM_ID
/// (NCCL bootstraps itself), mpirun (MPI_Bcast, in builds with MPI; MPI must be initialized),
/// or, with no launcher variables, a one-rank communicator. Makes LOCAL_RANK's device current.
/// @throws usage_error (bad environment, LOCAL_RANK without a GPU, mpirun without MPI_Init),
/// nccl_error (rendezvous or NCCL failure), no_device_error
[[nodiscard]] nccl_comm communicator_from_environment(bootstrap_options const& options = {});

}  // namespace graphstep::nccl
