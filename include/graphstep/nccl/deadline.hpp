#pragma once

/// @file nccl/deadline.hpp
/// @brief When an outstanding collective step has run too long. Plain C++, with the clock
/// injected so tests control time.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace graphstep::nccl {

using watchdog_clock = std::function<std::chrono::steady_clock::time_point()>;

/// @brief Tracks the one outstanding step of a communicator against a deadline.
class deadline_tracker {
 public:
  /// @throws usage_error (a non-positive timeout)
  explicit deadline_tracker(std::chrono::milliseconds timeout,
                            watchdog_clock now = std::chrono::steady_clock::now);

  /// @brief Step `step` was launched now.
  void started(std::int64_t step);
  /// @brief The outstanding step finished.
  void finished() noexcept { outstanding_.reset(); }
  /// @brief The description of the timeout when the outstanding step has passed its deadline.
  [[nodiscard]] std::optional<std::string> overdue(int rank) const;
  [[nodiscard]] std::optional<std::int64_t> outstanding_step() const noexcept {
    if (!outstanding_) return std::nullopt;
    return outstanding_->step;
  }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  struct pending {
    std::int64_t step;
    std::chrono::steady_clock::time_point since;
  };
  std::chrono::milliseconds timeout_;
  watchdog_clock now_;
  std::optional<pending> outstanding_;
};

}  // namespace graphstep::nccl
