#include <graphstep/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/nccl_comm.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

namespace graphstep::nccl {
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

std::unique_ptr<detail::comm_state> make_state(ncclComm_t handle) {
  auto state = std::make_unique<detail::comm_state>();
  state->handle = handle;
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

nccl_comm nccl_comm::from_unique_id(unique_id_bytes const& id, int rank, int world_size) {
  GRAPHSTEP_EXPECTS(world_size >= 1 && rank >= 0 && rank < world_size,
                    "nccl_comm: rank " + std::to_string(rank) + " must lie in [0, " +
                        std::to_string(world_size) + ")");
  require_device();
  ncclComm_t handle = nullptr;
  GRAPHSTEP_NCCL_TRY(ncclCommInitRank(&handle, world_size, to_nccl(id), rank));
  return nccl_comm{make_state(handle)};
}

nccl_comm nccl_comm::from_environment(nccl_comm_options const& options) {
  launch_environment const env = read_launch_environment(process_environment());
  require_device();
  int const devices = device_count();
  GRAPHSTEP_EXPECTS(env.local_rank < devices,
                    "nccl_comm: LOCAL_RANK=" + std::to_string(env.local_rank) + " but only " +
                        std::to_string(devices) + " device(s) are visible: start at most one "
                        "rank per visible GPU on each host");
  GRAPHSTEP_CUDA_TRY(cudaSetDevice(env.local_rank));
  switch (env.bootstrap) {
    case bootstrap_kind::single_process: {
      ncclComm_t handle = nullptr;
      int const device = env.local_rank;
      GRAPHSTEP_NCCL_TRY(ncclCommInitAll(&handle, 1, &device));
      return nccl_comm{make_state(handle)};
    }
    case bootstrap_kind::nccl_comm_id:
      // With NCCL_COMM_ID set, every rank's ncclGetUniqueId returns the same id.
      return from_unique_id(new_unique_id(), env.rank, env.world_size);
    case bootstrap_kind::rendezvous: {
      unique_id_bytes root_id{};
      if (env.rank == 0) root_id = new_unique_id();
      unique_id_bytes const id = exchange_unique_id(env, root_id, options.rendezvous_timeout);
      return from_unique_id(id, env.rank, env.world_size);
    }
  }
  throw usage_error{"nccl_comm: unknown bootstrap"};
}

std::vector<nccl_comm> nccl_comm::for_local_devices(std::vector<int> const& devices) {
  GRAPHSTEP_EXPECTS(!devices.empty(), "nccl_comm::for_local_devices: no device was listed");
  require_device();
  std::vector<ncclComm_t> handles(devices.size(), nullptr);
  GRAPHSTEP_NCCL_TRY(
      ncclCommInitAll(handles.data(), static_cast<int>(devices.size()), devices.data()));
  std::vector<nccl_comm> comms;
  for (ncclComm_t handle : handles) comms.push_back(nccl_comm{make_state(handle)});
  return comms;
}

nccl_comm& nccl_comm::operator=(nccl_comm&& other) noexcept {
  if (this != &other) {
    destroy();
    state_ = std::move(other.state_);
  }
  return *this;
}

nccl_comm::~nccl_comm() { destroy(); }

nccl_comm_view nccl_comm::view() const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "this nccl_comm was moved from: use the one it moved to");
  return nccl_comm_view{state_.get()};
}

void nccl_comm::abort() noexcept {
  if (state_ == nullptr || state_->aborted) return;
  state_->aborted = true;
  if (ncclResult_t const status = ncclCommAbort(state_->handle); status != ncclSuccess) {
    std::fprintf(stderr, "graphstep: ncclCommAbort failed: %s\n", ncclGetErrorString(status));
  }
}

void nccl_comm::destroy() noexcept {
  if (state_ == nullptr) return;
  if (!state_->aborted) {
    ncclResult_t async_error = ncclSuccess;
    ncclCommGetAsyncError(state_->handle, &async_error);
    // A communicator in error cannot finish its work: abort it instead of waiting forever.
    ncclResult_t const status = async_error == ncclSuccess ? ncclCommDestroy(state_->handle)
                                                           : ncclCommAbort(state_->handle);
    if (status != ncclSuccess) {
      std::fprintf(stderr, "graphstep: destroying a communicator failed: %s\n",
                   ncclGetErrorString(status));
    }
  }
  state_.reset();
}

}  // namespace graphstep::nccl
