#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/mpi_bootstrap.hpp>
#include <graphstep/nccl/nccl_comm.hpp>

namespace graphstep::nccl {

namespace detail {

void comm_deleter::operator()(pointer handle) const noexcept {
  if (handle == nullptr) return;
  ncclResult_t async_error = ncclSuccess;
  if (ncclCommGetAsyncError(handle, &async_error) != ncclSuccess) async_error = ncclSystemError;
  bool const in_error =
      abort_on_release || (async_error != ncclSuccess && async_error != ncclInProgress);
  ncclResult_t const status = in_error ? ncclCommAbort(handle) : ncclCommDestroy(handle);
  if (status != ncclSuccess) {
    static_cast<void>(std::fprintf(stderr, "graphstep: %s of a communicator failed: %s\n",
                                   in_error ? "ncclCommAbort" : "ncclCommDestroy",
                                   ncclGetErrorString(status)));
  }
}

void comm_state::fail(std::string const& reason) noexcept {
  abort(reason);
}

void comm_state::abort(std::string const& reason) noexcept {
  try {
    std::lock_guard<std::mutex> lock{failure_mutex};
    if (failure.empty()) failure = reason;
  } catch (...) {
    // Keeping the reason is best effort; the abort itself must happen.
  }
  // A training-thread call that enqueues work holds the mutex for microseconds; one that is
  // stuck inside NCCL can only be released by the abort itself, so do not wait for it forever.
  bool const locked = enqueue_mutex.try_lock_for(std::chrono::seconds{2});
  if (!aborted.exchange(true)) {
    ncclComm* const raw = handle.release();
    if (raw != nullptr) {
      if (ncclResult_t const status = ncclCommAbort(raw); status != ncclSuccess) {
        static_cast<void>(std::fprintf(stderr, "graphstep: ncclCommAbort failed: %s\n",
                                       ncclGetErrorString(status)));
      }
    }
  }
  if (locked) enqueue_mutex.unlock();
}

std::optional<std::string> comm_state::failure_reason() const {
  if (!aborted.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock{failure_mutex};
  return failure;
}

void comm_state::throw_if_aborted(char const* what) const {
  if (auto const reason = failure_reason()) {
    throw nccl_error{static_cast<int>(ncclInvalidUsage),
                     std::string{what} + ": the communicator (rank " + std::to_string(rank) +
                         " of " + std::to_string(size) + ") was aborted: " + *reason +
                         ". Create a new communicator (and capture again) to go on"};
  }
}

}  // namespace detail

namespace {

ncclUniqueId to_nccl(unique_id_bytes const& bytes) {
  static_assert(sizeof(ncclUniqueId) == sizeof(unique_id_bytes));
  ncclUniqueId id;
  std::memcpy(&id, bytes.data(), sizeof id);
  return id;
}

unique_id_bytes from_nccl(ncclUniqueId const& id) {
  unique_id_bytes bytes;
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

// Takes the handle first, so it is released even when a query below throws.
std::unique_ptr<detail::comm_state> make_state(ncclComm_t handle, int slot) {
  auto state = std::make_unique<detail::comm_state>();
  state->handle.reset(handle);
  state->slot = slot;
  GRAPHSTEP_NCCL_TRY(ncclCommUserRank(handle, &state->rank));
  GRAPHSTEP_NCCL_TRY(ncclCommCount(handle, &state->size));
  GRAPHSTEP_NCCL_TRY(ncclCommCuDevice(handle, &state->device));
  return state;
}

}  // namespace

unique_id_bytes nccl_comm::new_unique_id() {
  ncclUniqueId id;
  GRAPHSTEP_NCCL_TRY(ncclGetUniqueId(&id));
  return from_nccl(id);
}

nccl_comm nccl_comm::adopt(ncclComm_t handle, nccl_comm_options const& options) {
  GRAPHSTEP_EXPECTS(handle != nullptr, "nccl_comm::adopt: the handle is null");
  return nccl_comm{make_state(handle, options.slot)};
}

nccl_comm nccl_comm::from_unique_id(unique_id_bytes const& id, int rank, int world_size,
                                    nccl_comm_options const& options) {
  GRAPHSTEP_EXPECTS(world_size >= 1 && rank >= 0 && rank < world_size,
                    "nccl_comm: rank " + std::to_string(rank) + " must lie in [0, " +
                        std::to_string(world_size) + ")");
  cuda::require_device();
  ncclComm_t handle = nullptr;
  GRAPHSTEP_NCCL_TRY(ncclCommInitRank(&handle, world_size, to_nccl(id), rank));
  return nccl_comm{make_state(handle, options.slot)};
}

nccl_comm nccl_comm::from_environment(nccl_comm_options const& options) {
  launch_environment const env = read_launch_environment(process_environment());
  cuda::require_device();
  int const devices = cuda::device_count();
  if (env.bootstrap == bootstrap_kind::mpi) {
#if defined(GRAPHSTEP_WITH_MPI)
    int initialized = 0;
    MPI_Initialized(&initialized);
    GRAPHSTEP_EXPECTS(initialized != 0,
                      "nccl_comm::from_environment: this process was started "
                      "by mpirun; call MPI_Init before creating the "
                      "communicator");
    nccl_comm comm = communicator_from_mpi(MPI_COMM_WORLD);
    comm.state_->slot = options.slot;
    return comm;
#else
    throw usage_error{"nccl_comm::from_environment: the MPI bootstrap is not built in"};
#endif
  }
  check_local_device("nccl_comm: LOCAL_RANK=" + std::to_string(env.local_rank), env.local_rank,
                     devices);
  GRAPHSTEP_CUDA_TRY(cudaSetDevice(env.local_rank));
  switch (env.bootstrap) {
    case bootstrap_kind::single_process: {
      ncclComm_t handle = nullptr;
      int const device = env.local_rank;
      GRAPHSTEP_NCCL_TRY(ncclCommInitAll(&handle, 1, &device));
      return nccl_comm{make_state(handle, options.slot)};
    }
    case bootstrap_kind::nccl_comm_id:
      // With NCCL_COMM_ID set, every rank's ncclGetUniqueId returns the same id.
      return from_unique_id(new_unique_id(), env.rank, env.world_size, options);
    case bootstrap_kind::rendezvous: {
      unique_id_bytes root_id{};
      if (env.rank == 0) root_id = new_unique_id();
      unique_id_bytes const id = exchange_unique_id(env, root_id, options.rendezvous_timeout);
      return from_unique_id(id, env.rank, env.world_size, options);
    }
    case bootstrap_kind::mpi: break;
  }
  throw usage_error{"nccl_comm: unknown bootstrap"};
}

std::vector<nccl_comm> nccl_comm::for_local_devices(std::vector<int> const& devices) {
  check_local_device_list(devices);
  cuda::require_device();
  std::vector<ncclComm_t> handles(devices.size(), nullptr);
  GRAPHSTEP_NCCL_TRY(
      ncclCommInitAll(handles.data(), static_cast<int>(devices.size()), devices.data()));
  // Every handle is owned before anything below can throw.
  std::vector<std::unique_ptr<ncclComm, detail::comm_deleter>> owned;
  owned.reserve(handles.size());
  for (ncclComm_t handle : handles) owned.emplace_back(handle);
  std::vector<nccl_comm> comms;
  comms.reserve(owned.size());
  for (auto& handle : owned) comms.push_back(nccl_comm{make_state(handle.release(), 0)});
  return comms;
}

nccl_comm_view nccl_comm::view() const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "this nccl_comm was moved from: use the one it moved to");
  return nccl_comm_view{state_.get()};
}

void nccl_comm::abort() noexcept {
  if (state_ == nullptr) return;
  state_->abort("aborted by nccl_comm::abort on rank " + std::to_string(state_->rank));
}

}  // namespace graphstep::nccl
