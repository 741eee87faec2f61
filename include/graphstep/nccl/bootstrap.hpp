#pragma once

/// @file nccl/bootstrap.hpp
/// @brief A communicator made from the launcher's environment: torchrun's variables or srun's
/// (the id travels by graphstep's TCP rendezvous, or torchrun's store), NCCL_COMM_ID (NCCL
/// bootstraps itself), mpirun (MPI, in builds with it), or none (one rank).

#include <chrono>
#include <graphstep/nccl/nccl_comm.hpp>

namespace graphstep::nccl {

/// @brief How `communicator_from_environment` makes the communicator.
struct bootstrap_options {
  /// How long the TCP rendezvous waits for every rank (the rendezvous's own default).
  std::chrono::milliseconds rendezvous_timeout{std::chrono::seconds{120}};
  /// The communicator's `nccl_comm_options::slot`.
  int slot{0};
  /// The communicator's `nccl_comm_options::init_timeout`: how long NCCL's own initialization
  /// waits for every rank, once the id has reached them.
  std::chrono::milliseconds init_timeout{default_init_timeout};
  /// Watch the other ranks' processes for the communicator's life (RANK/WORLD_SIZE and srun
  /// launches: graphstep's rendezvous and torchrun's store): every rank keeps a TCP connection to
  /// rank 0, and a rank whose process ends without closing its communicator (killed, crashed)
  /// aborts the communicator on every other rank within a second, naming that rank, instead of
  /// leaving them to the step deadline. A vanished host is found by TCP keepalive in about
  /// 15 s; a stopped process only by the step deadline. Under mpirun, the launcher ends every
  /// rank when one fails; with NCCL_COMM_ID there is no channel to watch through.
  bool watch_peers{true};
};

/// @brief From the launcher's environment (see `read_launch_environment`): RANK/WORLD_SIZE/
/// MASTER_ADDR/MASTER_PORT or srun's variables (the id is exchanged by graphstep's TCP
/// rendezvous), NCCL_COMM_ID
/// (NCCL bootstraps itself), mpirun (MPI_Bcast, in builds with MPI; MPI must be initialized),
/// or, with no launcher variables, a one-rank communicator. Makes LOCAL_RANK's device current.
/// @throws usage_error (bad environment, LOCAL_RANK without a GPU, mpirun without MPI_Init),
/// nccl_error (rendezvous or NCCL failure), no_device_error
[[nodiscard]] nccl_comm communicator_from_environment(bootstrap_options const& options = {});

}  // namespace graphstep::nccl
