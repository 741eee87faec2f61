#include <cuda_runtime_api.h>

#include <graphstep/error.hpp>
#include <graphstep/nccl/watchdog.hpp>
#include <utility>

#include "detail/comm_state.hpp"

namespace graphstep::nccl {

watchdog::watchdog(nccl_comm_view comm, watchdog_options options)
    : comm_{std::move(comm)},
      poll_interval_{options.poll_interval},
      deadline_{options.timeout, std::move(options.clock)} {
  GRAPHSTEP_EXPECTS(options.poll_interval.count() > 0,
                    "watchdog: the poll interval must be positive");
  if (options.background) thread_ = std::thread{[this] { watch(); }};
}

watchdog::watchdog(nccl_comm_view comm, std::chrono::milliseconds timeout, watchdog_clock now)
    : watchdog{std::move(comm),
               watchdog_options{timeout, false, std::chrono::milliseconds{100}, std::move(now)}} {}

watchdog::~watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock{stop_mutex_};
    stop_ = true;
  }
  stop_signal_.notify_all();
  thread_.join();
}

void watchdog::check() const {
  detail::comm_access::state(comm_).throw_if_aborted("watchdog");
}

std::optional<std::int64_t> watchdog::outstanding_step() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return deadline_.outstanding_step();
}

void watchdog::starting(std::int64_t step) {
  check();
  std::lock_guard<std::mutex> lock{mutex_};
  deadline_.started(step);
  starting_ = step;
}

void watchdog::launched(cuda::stream_view stream, std::int64_t step) {
  check();
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "watchdog::launched: the stream is capturing; call it after replaying the "
                    "graph, not inside the capture (the event would become part of the graph)");
  std::lock_guard<std::mutex> lock{mutex_};
  GRAPHSTEP_EXPECTS(!starting_ || *starting_ == step,
                    "watchdog::launched: step " + std::to_string(step) +
                        " was launched, but step " + std::to_string(starting_.value_or(0)) +
                        " was starting; call launched with the step given to starting");
  cuda::event marker = spare_.empty() ? cuda::event{} : std::move(spare_.back());
  if (!spare_.empty()) spare_.pop_back();
  marker.record(stream);
  if (starting_) {
    starting_.reset();  // its deadline runs since `starting`
  } else {
    deadline_.started(step);
  }
  pending_.emplace_back(step, std::move(marker));
}

void watchdog::inspect() {
  auto& state = detail::comm_access::state(comm_);
  if (state.aborted()) return;
  detail::watchdog_observation seen;
  seen.rank = comm_.rank();
  try {
    while (!pending_.empty() && pending_.front().second.query()) {
      deadline_.finished(pending_.front().first);
      spare_.push_back(std::move(pending_.front().second));
      pending_.pop_front();
    }
  } catch (cuda_error const& e) {
    seen.stream_error_step = pending_.front().first;
    seen.stream_error = e.what();
  }
  // Read after the steps' events: a collective that NCCL ends with an error (a peer gone) lets
  // its step's event complete, and NCCL sets the error before its kernel exits, so a step seen
  // finished here is checked against it. A training thread stuck inside an NCCL call holds the
  // communicator's lock; then the deadline alone decides this round.
  ncclResult_t const async_error =
      state.async_error(std::chrono::milliseconds{10}).value_or(ncclSuccess);
  deadline_.call_in_progress(async_error == ncclInProgress);
  if (async_error == ncclInProgress) {
    seen.async = detail::async_state::in_progress;
  } else if (async_error != ncclSuccess) {
    seen.async = detail::async_state::failed;
    seen.async_result =
        std::string{graphstep::detail::nccl_result_name(static_cast<int>(async_error))} + " (" +
        ncclGetErrorString(async_error) + ")";
  }
  seen.overdue = deadline_.overdue(seen.rank);
  // Counted by the deadline: a step still being enqueued (`starting`) is outstanding too.
  seen.outstanding = deadline_.outstanding_count();
  seen.oldest_outstanding = deadline_.outstanding_step();
  if (std::string const reason = detail::watchdog_verdict(seen); !reason.empty()) {
    state.abort("watchdog: " + reason);
  }
}

bool watchdog::poll() {
  std::lock_guard<std::mutex> lock{mutex_};
  inspect();
  check();
  return pending_.empty();
}

void watchdog::wait() {
  while (!poll()) std::this_thread::sleep_for(std::chrono::microseconds{200});
}

void watchdog::watch() {
  // The communicator's device first: any runtime call before it would use (and on a GPU
  // create) device 0's primary context, as CUDA initializes device 0 for a thread that set none.
  static_cast<void>(cudaSetDevice(comm_.device()));
  // Relaxed: this thread's calls must never count as the "unsafe call from another thread"
  // that invalidates a global-mode capture running on the training thread. It only queries
  // events and NCCL's error state; it issues no work and touches no capturing stream.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  static_cast<void>(cudaThreadExchangeStreamCaptureMode(&mode));
  std::unique_lock<std::mutex> stop_lock{stop_mutex_};
  while (!stop_) {
    stop_signal_.wait_for(stop_lock, poll_interval_, [this] { return stop_; });
    if (stop_) break;
    stop_lock.unlock();
    try {
      std::lock_guard<std::mutex> lock{mutex_};
      inspect();
    } catch (std::exception const& e) {
      detail::comm_access::state(comm_).abort(std::string{"watchdog: rank "} +
                                              std::to_string(comm_.rank()) +
                                              ": polling failed: " + e.what());
    }
    stop_lock.lock();
    if (comm_.aborted()) break;  // nothing is left to watch; the training thread will throw
  }
}

}  // namespace graphstep::nccl
