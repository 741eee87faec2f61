// Built into graphstep_nccl only when configured with GRAPHSTEP_WITH_MPI.
#include <graphstep/nccl/mpi_bootstrap.hpp>

#if defined(GRAPHSTEP_WITH_MPI)

#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/launch_environment.hpp>

namespace graphstep::nccl {
namespace {

void check_mpi(int status, char const* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw nccl_error{2, std::string{call} + " failed: " + std::string{text, std::size_t(length)}};
}

}  // namespace

unique_id_bytes broadcast_unique_id(MPI_Comm comm, unique_id_bytes const& root_id) {
  unique_id_bytes id = root_id;
  check_mpi(MPI_Bcast(id.data(), static_cast<int>(id.size()), MPI_BYTE, 0, comm), "MPI_Bcast");
  return id;
}

unique_id_bytes bootstrap_unique_id(MPI_Comm comm, std::function<void()> const& prepare,
                                    std::function<unique_id_bytes()> const& make_id) {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  prepare();
  unique_id_bytes root_id{};
  if (rank == 0) root_id = make_id();
  return broadcast_unique_id(comm, root_id);
}

int local_rank(MPI_Comm comm) {
  MPI_Comm host = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host),
            "MPI_Comm_split_type");
  int rank = 0;
  int const status = MPI_Comm_rank(host, &rank);
  MPI_Comm_free(&host);
  check_mpi(status, "MPI_Comm_rank");
  return rank;
}

nccl_comm communicator_from_mpi(MPI_Comm comm, nccl_comm_options const& options) {
  int rank = 0;
  int size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  int const local = local_rank(comm);
  auto const select_device = [local] {
    cuda::require_device();
    int const device = local_device(
        "communicator_from_mpi: local rank " + std::to_string(local), local, cuda::device_count(),
        ranks_may_share_a_gpu(process_environment()), loaded_nccl_version());
    GRAPHSTEP_CUDA_TRY(cudaSetDevice(device));
  };
  unique_id_bytes const id = bootstrap_unique_id(comm, select_device, nccl_comm::new_unique_id);
  return nccl_comm::from_unique_id(id, rank, size, options);
}

}  // namespace graphstep::nccl

#endif
