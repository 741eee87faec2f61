#pragma once

/// @file nccl/mpi_bootstrap.hpp
/// @brief Communicators bootstrapped through MPI, for jobs started by mpirun. Available when
/// graphstep is configured with -DGRAPHSTEP_WITH_MPI=ON (which defines GRAPHSTEP_WITH_MPI).

#if defined(GRAPHSTEP_WITH_MPI)

#include <functional>
#include <graphstep/nccl/nccl_comm.hpp>
#include <graphstep/nccl/unique_id.hpp>

// Only MPI's C interface is used: keep the deprecated C++ bindings (and their warnings) out.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

namespace graphstep::nccl {

/// @brief Rank 0's `root_id` on every rank of `comm` (MPI_Bcast).
/// @throws nccl_error (an MPI failure)
[[nodiscard]] unique_id_bytes broadcast_unique_id(MPI_Comm comm, unique_id_bytes const& root_id);

/// @brief The steps of `communicator_from_mpi` up to the id, with what they do as arguments:
/// every rank of `comm` runs `prepare` (there, selecting its GPU), rank 0 then runs `make_id`,
/// and MPI broadcasts the id it returned. When either throws, on any rank, every rank still
/// takes part in the same collectives (MPI_Bcast, then MPI_Allreduce), so no rank is left
/// waiting, and then every rank throws: none goes on to create a communicator that a rank
/// will never join.
/// @return rank 0's id, on every rank
/// @throws what `prepare` or `make_id` threw, on the rank where it threw; on every other rank,
/// nccl_error (ncclSystemError) saying that rank 0 failed to create the id and why (its
/// exception's message), or which rank failed (the lowest); nccl_error (an MPI failure)
[[nodiscard]] unique_id_bytes bootstrap_unique_id(MPI_Comm comm,
                                                  std::function<void()> const& prepare,
                                                  std::function<unique_id_bytes()> const& make_id);

/// @brief This process's rank among the ranks of `comm` on the same host.
/// @throws nccl_error (an MPI failure)
[[nodiscard]] int local_rank(MPI_Comm comm);

/// @brief A communicator over the ranks of `comm` (MPI must be initialized): rank 0 creates
/// the id, MPI broadcasts it, and each rank uses the GPU of its local rank. A rank that fails
/// before the id is shared fails every rank (`bootstrap_unique_id`), instead of leaving them
/// waiting.
/// @throws nccl_error (also on the ranks that did not fail themselves), usage_error (more
/// ranks on a host than visible GPUs), no_device_error
[[nodiscard]] nccl_comm communicator_from_mpi(MPI_Comm comm, nccl_comm_options const& options = {});

}  // namespace graphstep::nccl

#endif
