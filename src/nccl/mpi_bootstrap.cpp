// Built into graphstep_nccl only when configured with GRAPHSTEP_WITH_MPI.
#include <graphstep/nccl/mpi_bootstrap.hpp>

#if defined(GRAPHSTEP_WITH_MPI)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <string>
#include <type_traits>

#include "nccl/detail/device_choice.hpp"
#include "nccl/detail/mpi_bootstrap.hpp"

namespace graphstep::nccl {
namespace {

void check_mpi(int status, char const* call) {
  if (status == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  MPI_Error_string(status, text.data(), &length);
  throw nccl_error{2, std::string{call} +
                          " failed: " + std::string{text.data(), static_cast<std::size_t>(length)}};
}

// What rank 0 broadcasts: its id, or that it failed and why. One message of a fixed size, so
// that every rank posts the same MPI_Bcast whatever happened on rank 0.
struct root_message {
  unsigned char failed{0};
  unique_id_bytes id{};
  std::array<char, 1024> reason{};  // NUL-terminated; the start of a longer reason
};
static_assert(std::is_trivially_copyable_v<root_message>, "root_message travels as bytes");

void set_reason(root_message& message, std::exception_ptr const& failure) {
  std::string reason = "an exception that is not a std::exception";
  try {
    std::rethrow_exception(failure);
  } catch (std::exception const& e) {
    reason = e.what();
  } catch (...) {
  }
  std::size_t const length = std::min(reason.size(), message.reason.size() - 1);
  std::copy_n(reason.data(), length, message.reason.data());
  message.reason[length] = '\0';
}

}  // namespace

namespace detail {

unique_id_bytes broadcast_unique_id(MPI_Comm comm, unique_id_bytes const& root_id) {
  unique_id_bytes id = root_id;
  check_mpi(MPI_Bcast(id.data(), static_cast<int>(id.size()), MPI_BYTE, 0, comm), "MPI_Bcast");
  return id;
}

unique_id_bytes bootstrap_unique_id(MPI_Comm comm, std::function<void()> const& prepare,
                                    std::function<unique_id_bytes()> const& make_id) {
  int rank = 0;
  int size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  // Every rank takes part in both collectives below whatever failed here, and only then
  // throws. A rank that left early would keep the others waiting: the non-root ranks wait in
  // MPI_Bcast for rank 0's message, and although rank 0's MPI_Bcast usually returns without
  // them, rank 0 would then wait in ncclCommInitRank for a rank that never comes (until
  // nccl_comm_options::init_timeout, 10 minutes by default). It would also match its next
  // collective on `comm` against these ones.
  std::exception_ptr failure;
  root_message message;
  try {
    prepare();
    if (rank == 0) message.id = make_id();
  } catch (...) {
    failure = std::current_exception();
    if (rank == 0) {
      message.failed = 1;
      set_reason(message, failure);
    }
  }
  check_mpi(MPI_Bcast(&message, static_cast<int>(sizeof message), MPI_BYTE, 0, comm), "MPI_Bcast");
  // Rank 0's message says nothing of the others: the lowest rank that failed, or `size`.
  int const mine = failure ? rank : size;
  int first_failed = size;
  check_mpi(MPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (failure) std::rethrow_exception(failure);
  if (message.failed != 0) {
    throw nccl_error{2,
                     "MPI bootstrap: rank 0 failed to create the NCCL unique id, so no rank "
                     "can join the communicator: " +
                         std::string{message.reason.data()} +
                         " (see rank 0's error, fix what it names and start the job again)"};
  }
  if (first_failed < size) {
    std::string const failed = "rank " + std::to_string(first_failed);
    throw nccl_error{2, "MPI bootstrap: " + failed +
                            " failed before the NCCL unique id was shared (the lowest rank that "
                            "failed), so no rank can join the communicator; this rank did not "
                            "fail (see " +
                            failed + "'s error, fix what it names and start the job again)"};
  }
  return message.id;
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

}  // namespace detail

nccl_comm communicator_from_mpi(MPI_Comm comm, nccl_comm_options const& options) {
  int rank = 0;
  int size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  int const local = detail::local_rank(comm);
  auto const select_device = [local] {
    cuda::require_device();
    int const device = detail::local_device(
        "communicator_from_mpi: local rank " + std::to_string(local), local, cuda::device_count(),
        detail::ranks_may_share_a_gpu(process_environment()), loaded_nccl_version());
    GRAPHSTEP_CUDA_TRY(cudaSetDevice(device));
  };
  unique_id_bytes const id =
      detail::bootstrap_unique_id(comm, select_device, nccl_comm::new_unique_id);
  return nccl_comm::from_unique_id(id, rank, size, options);
}

}  // namespace graphstep::nccl

#endif
