#include <graphstep/nccl/nccl_comm_view.hpp>

#include "detail/comm_state.hpp"

namespace graphstep::nccl {

nccl_comm_view::nccl_comm_view(ncclComm_t handle) : state_{detail::comm_state::borrow(handle)} {}

nccl_comm_view::nccl_comm_view(std::shared_ptr<detail::comm_state> state) noexcept
    : state_{std::move(state)} {}

ncclComm_t nccl_comm_view::get() const noexcept {
  return state_->handle();
}

int nccl_comm_view::rank() const noexcept {
  return state_->rank();
}

int nccl_comm_view::size() const noexcept {
  return state_->size();
}

int nccl_comm_view::device() const noexcept {
  return state_->device();
}

int nccl_comm_view::slot() const noexcept {
  return state_->slot();
}

bool nccl_comm_view::aborted() const noexcept {
  return state_->aborted();
}

std::optional<std::string> nccl_comm_view::failure() const {
  return state_->failure_reason();
}

collective_log nccl_comm_view::captured() const {
  return state_->captured();
}

}  // namespace graphstep::nccl
