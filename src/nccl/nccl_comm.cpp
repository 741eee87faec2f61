#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <graphstep/nccl/nccl_comm.hpp>
#include <memory>
#include <string>
#include <thread>

#include "detail/comm_state.hpp"
#include "nccl/detail/device_choice.hpp"

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

// Polls a non-blocking initialization until every rank has joined, NCCL fails it, or the
// timeout passes.
void wait_for_initialization(ncclComm_t handle, int rank, int world_size,
                             std::chrono::milliseconds timeout) {
  auto const deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds{50};
  while (true) {
    ncclResult_t const state = detail::async_result(handle);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      graphstep::detail::throw_nccl_error(static_cast<int>(state), ncclGetErrorString(state),
                                          "ncclCommInitRankConfig (initialization)", __FILE__,
                                          __LINE__);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds{5000});
  }
  throw nccl_error{static_cast<int>(ncclInProgress),
                   "nccl_comm: rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                       ": the other ranks did not all join the communicator within " +
                       std::to_string(timeout.count()) +
                       " ms; the initialization was aborted. Check that every rank started, "
                       "that all of them use the same unique id and world size, and that they "
                       "reach each other (NCCL_DEBUG=INFO shows the bootstrap); or allow more "
                       "time with nccl_comm_options::init_timeout"};
}

}  // namespace

nccl_comm::nccl_comm(std::shared_ptr<detail::comm_state> state) noexcept
    : state_{std::move(state)} {}

nccl_comm& nccl_comm::operator=(nccl_comm&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->close(true);
    state_ = std::move(other.state_);
  }
  return *this;
}

nccl_comm::~nccl_comm() {
  // Destroyed while an exception unwinds: this rank is failing, and its peers are told so.
  if (state_ != nullptr) state_->close(std::uncaught_exceptions() == 0);
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
  GRAPHSTEP_EXPECTS(options.init_timeout.count() > 0,
                    "nccl_comm: the init timeout must be positive, not " +
                        std::to_string(options.init_timeout.count()) + " ms");
  cuda::require_device();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t handle = nullptr;
  ncclResult_t const started =
      ncclCommInitRankConfig(&handle, world_size, to_nccl(id), rank, &config);
  // Owned from here: a failure or a timeout below aborts it (the initialization too).
  std::unique_ptr<ncclComm, detail::comm_deleter> guard{handle, detail::comm_deleter{true}};
  if (started != ncclSuccess && started != ncclInProgress) {
    graphstep::detail::throw_nccl_error(static_cast<int>(started), ncclGetErrorString(started),
                                        "ncclCommInitRankConfig", __FILE__, __LINE__);
  }
  wait_for_initialization(handle, rank, world_size, options.init_timeout);
  return nccl_comm{detail::comm_state::create(guard.release(), options.slot)};
}

std::vector<nccl_comm> nccl_comm::for_local_devices(std::vector<int> const& devices) {
  detail::check_local_device_list(devices);
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
