#include <cstring>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bootstrap.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <graphstep/nccl/nccl_comm.hpp>

#include "detail/comm_state.hpp"

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

}  // namespace

nccl_comm::nccl_comm(std::shared_ptr<detail::comm_state> state) noexcept
    : state_{std::move(state)} {}

nccl_comm& nccl_comm::operator=(nccl_comm&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->close();
    state_ = std::move(other.state_);
  }
  return *this;
}

nccl_comm::~nccl_comm() {
  if (state_ != nullptr) state_->close();
}

nccl_comm nccl_comm::from_environment() {
  return communicator_from_environment();
}

int loaded_nccl_version() {
  int version = 0;
  GRAPHSTEP_NCCL_TRY(ncclGetVersion(&version));
  return version;
}

unique_id_bytes nccl_comm::new_unique_id() {
  ncclUniqueId id;
  GRAPHSTEP_NCCL_TRY(ncclGetUniqueId(&id));
  return from_nccl(id);
}

nccl_comm nccl_comm::adopt(ncclComm_t handle, nccl_comm_options const& options) {
  return nccl_comm{detail::comm_state::adopt(handle, options.slot)};
}

nccl_comm nccl_comm::from_unique_id(unique_id_bytes const& id, int rank, int world_size,
                                    nccl_comm_options const& options) {
  GRAPHSTEP_EXPECTS(world_size >= 1 && rank >= 0 && rank < world_size,
                    "nccl_comm: rank " + std::to_string(rank) + " must lie in [0, " +
                        std::to_string(world_size) + ")");
  cuda::require_device();
  ncclComm_t handle = nullptr;
  GRAPHSTEP_NCCL_TRY(ncclCommInitRank(&handle, world_size, to_nccl(id), rank));
  return nccl_comm{detail::comm_state::create(handle, options.slot)};
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
  for (auto& handle : owned) {
    comms.push_back(nccl_comm{detail::comm_state::create(handle.release(), 0)});
  }
  return comms;
}

nccl_comm_view nccl_comm::view() const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "this nccl_comm was moved from: use the one it moved to");
  return detail::comm_access::view(state_);
}

ncclComm_t nccl_comm::get() const noexcept {
  return state_ == nullptr ? nullptr : state_->handle();
}

void nccl_comm::abort() noexcept {
  if (state_ == nullptr) return;
  state_->abort("aborted by nccl_comm::abort on rank " + std::to_string(state_->rank()));
}

}  // namespace graphstep::nccl
