#pragma once

/// @file nccl/watchdog.hpp
/// @brief Turns a hung or failed collective step into an error on the training thread.
///
/// After each replay (or eager step), `launched` records an event; `poll` checks the event, the
/// communicator's asynchronous error and the deadline; on error or timeout it aborts the
/// communicator and throws `nccl_error` saying which rank, which step and what state. It polls
/// from the calling thread only, so it never issues a CUDA call from a background thread while
/// another thread captures (which would invalidate a global-mode capture).

#include <graphstep/event.hpp>
#include <graphstep/nccl/deadline.hpp>
#include <graphstep/nccl/nccl_comm.hpp>

#include <chrono>
#include <cstdint>

namespace graphstep::nccl {

class watchdog {
 public:
  /// @throws usage_error (non-positive timeout), cuda_error
  watchdog(nccl_comm& comm, std::chrono::milliseconds timeout,
           watchdog_clock now = std::chrono::steady_clock::now);

  /// @brief Step `step` was just enqueued on `stream`.
  void launched(stream_view stream, std::int64_t step);
  /// @brief True when the last launched step has finished (or none is outstanding).
  /// @throws nccl_error after aborting the communicator: an asynchronous NCCL error, or the
  /// step is past its deadline
  bool poll();
  /// @brief Polls until the outstanding step finishes.
  /// @throws nccl_error (as poll)
  void wait();

 private:
  nccl_comm& comm_;
  deadline_tracker deadline_;
  event finished_;
};

}  // namespace graphstep::nccl
