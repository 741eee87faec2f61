#pragma once

/// @file graphs/lifecycle_options.hpp
/// @brief `lifecycle_options`: how graphstep's runners (the graph cache, the replay scheduler,
/// graphed callables) bring work from eager runs to replays: warm up, capture once, replay.

#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>

namespace graphstep::graphs {

/// @brief Warm-up → capture → replay, the one lifecycle of every runner.
///
/// The first `warmup_runs` runs of a piece of work are eager: lazy initialization (cuBLAS
/// handles and heuristics, NCCL connections, first-step special cases such as optimizer
/// state) happens there, not inside a capture, where it would break it or be frozen into the
/// graph. The next run is captured with `capture` and replayed; every later run replays.
struct lifecycle_options {
  /// Eager runs before the capture (3, as PyTorch's make_graphed_callables).
  int warmup_runs{3};
  /// How the capture is made; runners add to `capture.name` what they capture (a bucket, a
  /// segment, forward or backward).
  capture_options capture{};
};

/// @brief Checks `options`, naming `who` in the error.
/// @throws usage_error (negative warm-up)
inline void validate(lifecycle_options const& options, char const* who) {
  GRAPHSTEP_EXPECTS(
      options.warmup_runs >= 0,
      std::string{who} + ": warmup_runs must be >= 0, not " + std::to_string(options.warmup_runs));
}

}  // namespace graphstep::graphs
