#pragma once

/// @file nccl/launch_environment.hpp
/// @brief The rank layout a launcher (torchrun, mpirun wrappers, SLURM scripts) passes in
/// environment variables, read and checked. Plain C++.

#include <functional>
#include <optional>
#include <string>

namespace graphstep::nccl {

/// @brief How the communicator of this process will be set up.
enum class bootstrap_kind {
  rendezvous,     ///< RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: graphstep's TCP exchange
  nccl_comm_id,   ///< NCCL_COMM_ID=host:port: NCCL bootstraps itself
  single_process  ///< no launcher variables: one process drives its local GPUs
};

/// @brief RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as
/// torchrun sets them.
struct launch_environment {
  int rank{0};
  int local_rank{0};
  int world_size{1};
  int local_world_size{1};
  std::string master_addr{"127.0.0.1"};
  int master_port{29500};
  bootstrap_kind bootstrap{bootstrap_kind::single_process};
};

/// @brief Reads a variable; empty when unset. Tests inject their own.
using environment_reader = std::function<std::optional<std::string>(char const* name)>;

/// @brief The process environment.
[[nodiscard]] environment_reader process_environment();

/// @brief Reads and checks the launcher's variables. With none of RANK and WORLD_SIZE set, the
/// result is a single process (rank 0 of 1), or `nccl_comm_id` when NCCL_COMM_ID is set.
/// @throws usage_error naming the variable: not an integer, out of range (rank ≥ world size,
/// port outside 1..65535), one of RANK/WORLD_SIZE set without the other, MASTER_ADDR or
/// MASTER_PORT missing for a multi-rank run without NCCL_COMM_ID
[[nodiscard]] launch_environment read_launch_environment(environment_reader const& read);

/// @brief A line for logs: "rank 1 of 4 (local 1 of 2), rendezvous at host:port".
[[nodiscard]] std::string describe(launch_environment const& environment);

}  // namespace graphstep::nccl
