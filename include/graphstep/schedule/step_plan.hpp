#pragma once

/// @file schedule/step_plan.hpp
/// @brief A training step described as an ordered list of segments — graphed ones and eager
/// ones (code that cannot be captured: data-dependent control flow, host logic) — each on a
/// named stream, with dependencies between them; validated before anything runs. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <string>
#include <vector>

namespace graphstep::schedule {

struct segment_spec {
  std::string name;
  bool graphed{true};
  std::string stream;               ///< one of step_spec::streams
  std::vector<std::string> after;   ///< segments that must finish before this one starts
  std::vector<std::string> reads;   ///< buffers it reads (names, for validation)
  std::vector<std::string> writes;  ///< buffers it writes
};

struct step_spec {
  std::vector<std::string> streams;
  std::vector<std::string> static_inputs;  ///< buffers filled before the step
  std::vector<segment_spec> segments;      ///< in issue order
};

/// @brief The validated step: for each segment, the earlier segments on other streams it must
/// wait for (same-stream order is implied by the stream).
struct step_plan {
  std::vector<segment_spec> segments;
  std::vector<std::size_t> stream_of;                 ///< index into the stream list
  std::vector<std::vector<std::size_t>> cross_waits;  ///< per segment: segments to wait for
};

/// @brief Validates `spec` and computes its waits.
/// @throws usage_error naming the segment: an empty or duplicate name, an unknown stream or
/// dependency, a dependency cycle (listing it), a dependency on a segment issued later, a read
/// of a buffer that no earlier segment writes and no static input provides
[[nodiscard]] step_plan plan_step(step_spec const& spec);

}  // namespace graphstep::schedule
