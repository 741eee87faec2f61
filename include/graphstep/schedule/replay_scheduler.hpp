#pragma once

/// @file schedule/replay_scheduler.hpp
/// @brief Runs a step of graphed and eager segments in order, each on its stream, with event
/// dependencies between streams: graphed segments are captured once (after warm-up runs) and
/// replayed; eager segments run as they are, between them.

#include <functional>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/lifecycle_options.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/schedule/step_plan.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace graphstep::schedule {

struct scheduler_options {
  /// Eager runs of the whole step before its graphed segments are captured, and how they are
  /// captured; each segment's graph is named "<lifecycle.capture.name> <segment>".
  graphs::lifecycle_options lifecycle{};
  /// Record CUDA events around every segment, for `segment_milliseconds`.
  bool time_segments{false};
};

class replay_scheduler {
 public:
  using segment_body = std::function<void(cuda::stream_view stream)>;

  /// @param bodies the work of each segment, by name
  /// @param streams the stream of each stream name
  /// @throws usage_error (invalid step: see plan_step; a segment without a body; a stream name
  /// without a stream)
  replay_scheduler(step_spec const& spec, std::map<std::string, segment_body> bodies,
                   std::map<std::string, cuda::stream_view> streams, memory::memory_pool& pool,
                   scheduler_options options = {});

  /// @brief Runs one step: eagerly during warm-up, then with the graphed segments replayed.
  /// Every stream of the step is joined into the first one at the end, so work issued to it
  /// afterwards sees the whole step.
  void run();

  /// @brief GPU milliseconds of each segment in the last step (synchronizes).
  /// @throws usage_error (time_segments was off, or no step ran)
  [[nodiscard]] std::map<std::string, float> segment_milliseconds() const;
  [[nodiscard]] std::size_t steps() const noexcept { return steps_; }
  /// @brief The captured graph of a graphed segment (empty before capture).
  [[nodiscard]] graphs::graph_exec const& graph_of(std::string const& segment) const;

 private:
  struct segment_state {
    segment_body body;
    cuda::stream_view stream{cudaStreamPerThread};
    graphs::graph_exec captured;
    cuda::event done;
    std::optional<cuda::timed_event> start;
    std::optional<cuda::timed_event> stop;
  };

  step_plan plan_;
  std::vector<segment_state> segments_;
  std::vector<cuda::stream_view> streams_;
  std::vector<cuda::event> joins_;
  memory::memory_pool& pool_;
  scheduler_options options_;
  std::size_t steps_{};
};

}  // namespace graphstep::schedule
