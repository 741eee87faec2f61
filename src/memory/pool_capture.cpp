#include <graphstep/error.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <utility>

#include "memory/detail/graph_lease.hpp"
#include "memory/detail/pool_state.hpp"

namespace graphstep::memory {

pool_capture::pool_capture(std::shared_ptr<detail::pool_state> state,
                           unsigned long long capture_id) noexcept
    : state_{std::move(state)}, capture_id_{capture_id} {}

pool_capture::pool_capture(pool_capture&& other) noexcept
    : state_{std::move(other.state_)}, capture_id_{other.capture_id_} {}

pool_capture& pool_capture::operator=(pool_capture&& other) noexcept {
  if (this != &other) {
    abandon();
    state_ = std::move(other.state_);
    capture_id_ = other.capture_id_;
  }
  return *this;
}

pool_capture::~pool_capture() {
  abandon();
}

std::string pool_capture::problem() const {
  GRAPHSTEP_EXPECTS(open(), "pool_capture::problem: the capture was already ended");
  return state_->capture_problem(capture_id_);
}

void pool_capture::join(cuda::stream_view side, cuda::stream_view into) {
  GRAPHSTEP_EXPECTS(open(), "pool_capture::join: the capture was already ended");
  state_->join(capture_id_, side.get(), into.get());
}

pool_lease::pool_lease(std::shared_ptr<detail::graph_lease> lease) noexcept
    : lease_{std::move(lease)} {}

void pool_lease::before_replay(cuda::stream_view stream) const {
  if (lease_) lease_->before_replay(stream.get());
}

void pool_lease::after_replay(cuda::stream_view stream, cudaEvent_t launch) const {
  if (lease_) lease_->after_replay(stream.get(), launch);
}

bool pool_lease::replay_is_settled(cuda::stream_view stream, cudaEvent_t launch) const noexcept {
  return !lease_ || lease_->replay_is_settled(stream.get(), launch);
}

pool_lease pool_capture::commit() {
  GRAPHSTEP_EXPECTS(open(), "pool_capture::commit: the capture was already ended");
  std::shared_ptr<detail::pool_state> const state = std::move(state_);
  return pool_lease{state->finish_capture(capture_id_, true)};
}

pool_lease pool_capture::commit_with(pool_lease other_lease) {
  GRAPHSTEP_EXPECTS(static_cast<bool>(other_lease),
                    "pool_capture::commit_with: the other lease is empty; give the lease the "
                    "other pool's commit returned, or call commit()");
  pool_lease lease = commit();
  if (lease.lease_) lease.lease_->hold_also(std::move(other_lease.lease_));
  return lease;
}

void pool_capture::abandon() noexcept {
  if (!state_) return;
  std::shared_ptr<detail::pool_state> const state = std::move(state_);
  static_cast<void>(state->finish_capture(capture_id_, false));
}

}  // namespace graphstep::memory
