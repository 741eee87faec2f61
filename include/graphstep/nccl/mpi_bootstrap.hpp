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

/// @brief A communicator over the ranks of `comm` (MPI must be initialized): rank 0 creates
/// the id, MPI broadcasts it, and each rank uses the GPU of its local rank. A rank that fails
/// before the id is shared fails every rank, instead of leaving them
/// waiting.
/// @throws nccl_error (also on the ranks that did not fail themselves), usage_error (more
/// ranks on a host than visible GPUs), no_device_error
[[nodiscard]] nccl_comm communicator_from_mpi(MPI_Comm comm, nccl_comm_options const& options = {});

}  // namespace graphstep::nccl

#endif
