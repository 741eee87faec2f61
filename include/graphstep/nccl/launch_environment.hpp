#pragma once

/// @file nccl/launch_environment.hpp
/// @brief The rank layout a launcher (torchrun, mpirun, SLURM scripts) passes in environment
/// variables, read and checked, and the choice of bootstrap that follows from it. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace graphstep::nccl {

/// @brief How the communicator of this process will be set up.
enum class bootstrap_kind {
  rendezvous,      ///< RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: graphstep's TCP exchange
  torchrun_store,  ///< the same under torchrun (TORCHELASTIC_USE_AGENT_STORE=True): the id
                   ///< travels through the c10d store its agent serves at MASTER_PORT
  nccl_comm_id,    ///< NCCL_COMM_ID=host:port: NCCL bootstraps itself
  mpi,             ///< started by mpirun, graphstep built with MPI: the id travels by MPI_Bcast
  single_process   ///< no launcher variables: one process drives its local GPUs
};

/// @brief "rendezvous", "torchrun_store", "nccl_comm_id", "mpi" or "single_process".
[[nodiscard]] char const* name(bootstrap_kind kind) noexcept;

/// @brief RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as
/// torchrun sets them (or the rank variables of Open MPI / MPICH when mpirun started the job,
/// or srun's).
struct launch_environment {
  int rank{0};
  int local_rank{0};
  int world_size{1};
  int local_world_size{1};
  std::string master_addr{"127.0.0.1"};
  int master_port{29500};
  bootstrap_kind bootstrap{bootstrap_kind::single_process};
  /// Where the rank layout came from: "RANK/WORLD_SIZE", "OMPI_COMM_WORLD_*", "PMI_*",
  /// "SLURM_PROCID/SLURM_STEP_NUM_TASKS" or "none".
  std::string rank_source{"none"};
  /// GRAPHSTEP_RENDEZVOUS_TOKEN: what every rank of this job presents at graphstep's
  /// rendezvous, so clients of other jobs or strangers on MASTER_PORT are kept out (empty: none).
  std::string rendezvous_token;
  /// TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT: torchrun's job and how often its
  /// agent restarted the workers; they name the keys of a `torchrun_store` exchange.
  std::string run_id{"none"};
  int restart_count{0};
  /// NCCL_MULTI_RANK_GPU_ENABLE is set: NCCL 2.30 and later then accept several ranks of one
  /// communicator on one GPU (see detail::ranks_may_share_a_gpu()).
  bool ranks_may_share_a_gpu{false};
};

/// @brief Reads a variable; empty when unset. Tests inject their own.
using environment_reader = std::function<std::optional<std::string>(char const* name)>;

/// @brief The process environment.
[[nodiscard]] environment_reader process_environment();

/// @brief True when this build of graphstep::nccl has the MPI bootstrap (GRAPHSTEP_WITH_MPI).
[[nodiscard]] bool built_with_mpi() noexcept;

/// @brief Reads and checks the launcher's variables and chooses the bootstrap.
///
/// The rank layout comes from RANK/WORLD_SIZE (torchrun and friends), else from the variables
/// mpirun sets (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE for Open MPI; PMI_RANK/PMI_SIZE,
/// MPI_LOCALRANKID/MPI_LOCALNRANKS for MPICH and Intel MPI), else from srun's in a multi-task
/// job step (SLURM_PROCID of SLURM_STEP_NUM_TASKS, SLURM_LOCALID of the node's count in
/// SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID), else the process is rank 0 of 1.
/// The bootstrap is then, in this order: `nccl_comm_id` when NCCL_COMM_ID is set;
/// `torchrun_store` with RANK/WORLD_SIZE and TORCHELASTIC_USE_AGENT_STORE=True (torchrun's
/// agent then already listens on MASTER_PORT); `rendezvous` with RANK/WORLD_SIZE or srun's
/// layout; `mpi` with mpirun's variables when `mpi_available`; `single_process` for a world of
/// one. Under srun, MASTER_ADDR defaults to the step's first node (SLURM_STEP_NODELIST, else
/// SLURM_JOB_NODELIST: rank 0's under srun's block and cyclic distributions), MASTER_PORT to
/// `detail::slurm_rendezvous_port(SLURM_JOB_ID, SLURM_STEP_ID)`, and the rendezvous token to
/// "slurm/<job>.<step>", so other jobs' tasks on the same port are kept out.
/// @throws usage_error naming the variable: not an integer, out of range (rank ≥ world size,
/// local rank ≥ local world size, port outside 1..65535, a negative restart count), one of
/// RANK/WORLD_SIZE set without
/// the other, MASTER_ADDR or MASTER_PORT missing for a multi-rank rendezvous (under srun: and
/// no node list or job id to derive them from), a multi-rank mpirun job in a build without MPI
/// and without NCCL_COMM_ID, a task of a multi-task srun step without SLURM_PROCID
[[nodiscard]] launch_environment read_launch_environment(environment_reader const& read,
                                                         bool mpi_available = built_with_mpi());

/// @brief A line for logs that says which bootstrap applies and why:
/// "rank 1 of 4 (local 1 of 2), rendezvous at host:port".
[[nodiscard]] std::string describe(launch_environment const& environment);

}  // namespace graphstep::nccl
