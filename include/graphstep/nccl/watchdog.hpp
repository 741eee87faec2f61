#pragma once

/// @file nccl/watchdog.hpp
/// @brief Turns a hung or failed collective step into an error on the training thread.
///
/// After each replay (or eager step) of a step with collectives, `launched` records an event.
/// `poll` checks the events, the communicator's asynchronous error and the deadline of the
/// oldest unfinished step; on error or timeout it aborts the communicator and throws
/// `nccl_error` saying which rank, which step and what state. Graphs captured with
/// collectives are invisible to NCCL's own error handling once launched, so nothing else
/// notices a hang inside a replay.
///
/// With `watchdog_options::background`, a thread polls as well, so a training thread blocked
/// in a launch (the stream's queue full behind a hung collective) is released: the thread
/// aborts the communicator, and the training thread's next call (`check`, `launched`, `poll`,
/// or any collective on the communicator) throws the same `nccl_error`. The thread never
/// invalidates a capture in progress on another thread: it runs in
/// `cudaStreamCaptureModeRelaxed`, so its event queries are not the "unsafe calls from
/// another thread" that end a global-mode capture, it never touches the capturing stream, and
/// it issues no work.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <graphstep/cuda/event.hpp>
#include <graphstep/nccl/detail/deadline.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <graphstep/nccl/step_deadline.hpp>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace graphstep::nccl {

/// @brief How a watchdog watches.
struct watchdog_options {
  /// How long a launched step may take before it counts as hung: by default a limit that adapts
  /// to the steps measured (see `step_deadline`); a duration gives a fixed one.
  step_deadline timeout{};
  /// Poll from a background thread as well as from `poll`.
  bool background{false};
  /// How often the background thread polls.
  std::chrono::milliseconds poll_interval{std::chrono::milliseconds{100}};
  /// The clock deadlines are measured with (tests inject their own; it must be thread-safe
  /// when `background` is set).
  watchdog_clock clock{std::chrono::steady_clock::now};
};

/// @brief Watches the steps launched on one communicator: of an `nccl_comm`, or of a raw
/// `ncclComm_t` (which the watchdog aborts, hence frees, when it finds it failed or hung). Must
/// not outlive it. Not copyable or movable (a background thread refers to it).
class watchdog {
 public:
  /// @throws usage_error (a deadline or poll interval that is not positive), cuda_error
  watchdog(nccl_comm_view comm, watchdog_options options);
  /// @brief A watchdog without a background thread, with a fixed limit per step.
  /// @throws usage_error (non-positive timeout)
  watchdog(nccl_comm_view comm, std::chrono::milliseconds timeout,
           watchdog_clock now = std::chrono::steady_clock::now);
  /// @brief Stops and joins the background thread; never throws.
  ~watchdog();
  watchdog(watchdog const&) = delete;
  watchdog& operator=(watchdog const&) = delete;

  /// @brief Step `step` (numbers increase) is about to be enqueued: its deadline starts now, so
  /// that a thread blocked while enqueueing it (an NCCL call waiting for a peer that never
  /// comes) is released at the deadline by the background thread. Follow it with
  /// `launched(stream, step)`; without it, the deadline starts at `launched`.
  /// @throws nccl_error (the communicator was aborted), usage_error (steps out of order)
  void starting(std::int64_t step);
  /// @brief Step `step` (numbers increase) was just enqueued on `stream`: records an event
  /// after it. Call it after the replay, outside any capture.
  /// @throws nccl_error (the communicator was aborted: the message says why), usage_error
  /// (`stream` is capturing, steps out of order), cuda_error
  void launched(cuda::stream_view stream, std::int64_t step);
  /// @brief True when every launched step has finished.
  /// @throws nccl_error after aborting the communicator: an asynchronous NCCL error, a CUDA
  /// error on the watched stream, or the oldest step is past its deadline
  bool poll();
  /// @brief Polls until every launched step has finished.
  /// @throws nccl_error (as poll)
  void wait();
  /// @brief Throws what the background thread (or anyone) found, without any CUDA call; cheap
  /// enough to call before every replay.
  /// @throws nccl_error once the communicator was aborted
  void check() const;
  /// @brief The oldest unfinished step.
  [[nodiscard]] std::optional<std::int64_t> outstanding_step() const;

 private:
  void inspect();  // with mutex_ held: retires finished steps; aborts on error or timeout
  void watch();    // the background thread

  nccl_comm_view comm_;
  std::chrono::milliseconds poll_interval_;
  mutable std::mutex mutex_;  // guards deadline_, pending_ and spare_
  detail::deadline_tracker deadline_;
  std::optional<std::int64_t> starting_;  // a step `starting` began and `launched` has not seen
  std::deque<std::pair<std::int64_t, cuda::event>> pending_;
  std::vector<cuda::event> spare_;
  std::mutex stop_mutex_;
  std::condition_variable stop_signal_;
  bool stop_{false};
  std::thread thread_;
};

}  // namespace graphstep::nccl
