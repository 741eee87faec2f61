#pragma once

/// @file nccl/step_deadline.hpp
/// @brief How long a launched step may take before its rank gives up on its peers: a fixed
/// limit, or (the default) one that adapts to the steps measured so far.
/// graphstep_core: plain C++, includes no CUDA header.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace graphstep::nccl {

/// @brief A step's deadline. By default it adapts: `first_step` until a step has finished (the
/// first steps connect NCCL and warm up, and a loaded machine may take minutes over them), then
/// the larger of `at_least` and `times_median` × the median duration of the first steps that
/// finished (up to `measured_steps` of them). A duration converts to a fixed limit, so
/// `options.step_timeout = std::chrono::minutes{2}` keeps every step to two minutes.
///
/// A stopped or deadlocked peer is only ever found by this deadline; a peer whose process ended
/// is found sooner by the communicator's peer watch (`bootstrap_options::watch_peers`).
struct step_deadline {
  step_deadline() = default;
  /// @brief A fixed limit for every step (checked positive where it is used).
  template <class Rep, class Period>
  step_deadline(std::chrono::duration<Rep, Period> limit)  // NOLINT(google-explicit-constructor)
      : fixed{std::chrono::duration_cast<std::chrono::milliseconds>(limit)} {}

  /// A fixed limit; unset, the limit adapts as described above.
  std::optional<std::chrono::milliseconds> fixed;
  /// Adaptive: the limit until a step has finished.
  std::chrono::milliseconds first_step{std::chrono::minutes{10}};
  /// Adaptive: the least limit once steps have been measured.
  std::chrono::milliseconds at_least{std::chrono::seconds{60}};
  /// Adaptive: the limit is this many times the median measured step.
  int times_median{20};
  /// Adaptive: how many of the first finished steps are measured.
  int measured_steps{10};

  /// @brief The limit for a step, given the durations of the steps measured so far (in the
  /// order they finished; only the first `measured_steps` count).
  [[nodiscard]] std::chrono::milliseconds limit(
      std::vector<std::chrono::milliseconds> const& measured) const;
  /// @brief How `limit` came about, for messages: "fixed" or, e.g., "adaptive: 20 × the median
  /// of 10 measured steps, 31 ms, at least 60000 ms".
  [[nodiscard]] std::string describe(std::vector<std::chrono::milliseconds> const& measured) const;
  /// @throws usage_error naming `what` and the field that is not positive
  void validate(std::string const& what) const;
};

}  // namespace graphstep::nccl
