#pragma once

/// @file nccl/detail/deadline.hpp
/// @brief When an outstanding collective step has run too long. Plain C++, with the clock
/// injected so tests control time.
/// graphstep_core: plain C++, includes no CUDA header.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <graphstep/nccl/step_deadline.hpp>
#include <optional>
#include <string>
#include <vector>

namespace graphstep::nccl {

/// @brief The clock a watchdog measures deadlines with (tests inject their own).
using watchdog_clock = std::function<std::chrono::steady_clock::time_point()>;

namespace detail {

/// @brief Tracks the launched, unfinished steps of a communicator against a deadline. Steps
/// finish in launch order (they run on one stream), so only the oldest can be late first; a
/// step is measured from its own launch, so launching more steps never hides a hung one. The
/// durations of the first finished steps feed an adaptive deadline.
class deadline_tracker {
 public:
  /// @throws usage_error (a limit that is not positive)
  explicit deadline_tracker(step_deadline deadline,
                            watchdog_clock now = std::chrono::steady_clock::now);

  /// @brief Step `step` was launched now.
  /// @throws usage_error (a step not greater than the last one launched)
  void started(std::int64_t step);
  /// @brief Step `step`, and every step launched before it, finished now.
  void finished(std::int64_t step);
  /// @brief Every outstanding step finished now.
  void finished();
  /// @brief Whether NCCL now answers ncclInProgress for the communicator: a call still waits
  /// for its work to be issued (on a non-blocking communicator, the first collective of a kind
  /// waits for every peer to issue it too). Measured from the first look that saw it.
  void call_in_progress(bool in_progress);
  /// @brief The description of the timeout when the oldest outstanding step, or a call in
  /// progress, has passed its deadline: which rank, which step, how long, and how many steps
  /// wait behind it.
  [[nodiscard]] std::optional<std::string> overdue(int rank) const;
  /// @brief The oldest outstanding step.
  [[nodiscard]] std::optional<std::int64_t> outstanding_step() const noexcept {
    if (outstanding_.empty()) return std::nullopt;
    return outstanding_.front().step;
  }
  [[nodiscard]] std::size_t outstanding_count() const noexcept { return outstanding_.size(); }
  /// @brief The limit the next look applies.
  [[nodiscard]] std::chrono::milliseconds timeout() const { return deadline_.limit(measured_); }

 private:
  struct pending {
    std::int64_t step{0};
    std::chrono::steady_clock::time_point since;
  };
  [[nodiscard]] std::string limit_text() const;  // "deadline 600 ms" and how it came about
  step_deadline deadline_;
  watchdog_clock now_;
  std::vector<std::chrono::milliseconds> measured_;  // the first finished steps' durations
  std::deque<pending> outstanding_;
  std::optional<std::chrono::steady_clock::time_point> in_progress_since_;
};

/// @brief NCCL's asynchronous state of a communicator, as ncclCommGetAsyncError reports it.
enum class async_state {
  fine,         ///< ncclSuccess
  in_progress,  ///< ncclInProgress: a non-blocking call is still under way
  failed,       ///< any other result
};

/// @brief What one look of the watchdog saw.
struct watchdog_observation {
  int rank{0};
  /// The step whose event reported a CUDA error on the watched stream, and the error.
  std::optional<std::int64_t> stream_error_step;
  std::string stream_error;
  async_state async{async_state::fine};
  std::string async_result;  ///< the result's name and text when `async` is failed
  /// deadline_tracker::overdue's description, when the oldest step is past its deadline.
  std::optional<std::string> overdue;
  std::size_t outstanding{0};
  std::optional<std::int64_t> oldest_outstanding;
};

/// @brief Why the communicator must be aborted, or "" when nothing is wrong. A CUDA error on
/// the watched stream comes first (it explains the rest), then NCCL's asynchronous error, then
/// a missed deadline; every reason names the rank and the steps still outstanding.
[[nodiscard]] std::string watchdog_verdict(watchdog_observation const& seen);

}  // namespace detail
}  // namespace graphstep::nccl
