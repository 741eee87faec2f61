#pragma once

/// @file nccl/detail/mpi_bootstrap.hpp
/// @brief The steps of `communicator_from_mpi` (<graphstep/nccl/mpi_bootstrap.hpp>).

#include <graphstep/nccl/mpi_bootstrap.hpp>

#if defined(GRAPHSTEP_WITH_MPI)

#include <functional>
#include <graphstep/nccl/unique_id.hpp>

namespace graphstep::nccl::detail {

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

}  // namespace graphstep::nccl::detail

#endif
