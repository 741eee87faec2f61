#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/schedule/replay_scheduler.hpp>
#include <utility>

namespace graphstep::schedule {

replay_scheduler::replay_scheduler(step_spec const& spec,
                                   std::map<std::string, segment_body> bodies,
                                   std::map<std::string, cuda::stream_view> streams,
                                   memory::memory_pool& pool, scheduler_options options)
    : plan_{plan_step(spec)}, pool_{pool}, options_{std::move(options)} {
  graphs::validate(options_.lifecycle, "replay_scheduler");
  for (auto const& name : spec.streams) {
    auto found = streams.find(name);
    GRAPHSTEP_EXPECTS(found != streams.end(),
                      "replay_scheduler: no stream was given for stream name '" + name + "'");
    streams_.push_back(found->second);
  }
  segments_.resize(plan_.segments.size());
  for (std::size_t i = 0; i < plan_.segments.size(); ++i) {
    auto const& name = plan_.segments[i].name;
    auto found = bodies.find(name);
    GRAPHSTEP_EXPECTS(found != bodies.end() && found->second,
                      "replay_scheduler: segment '" + name + "' has no body");
    segments_[i].body = std::move(found->second);
    segments_[i].stream = streams_[plan_.stream_of[i]];
    if (options_.time_segments) {
      segments_[i].start.emplace();
      segments_[i].stop.emplace();
    }
  }
  joins_.resize(streams_.size());
}

void replay_scheduler::run() {
  bool const warming_up = steps_ < static_cast<std::size_t>(options_.lifecycle.warmup_runs);
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    auto& s = segments_[i];
    for (std::size_t dependency : plan_.cross_waits[i]) s.stream.wait(segments_[dependency].done);
    if (s.start) s.start->record(s.stream);
    if (!plan_.segments[i].graphed || warming_up) {
      s.body(s.stream);
    } else {
      if (s.captured.empty()) {  // a failed capture leaves it empty: captured again next step
        graphs::capture_options how = options_.lifecycle.capture;
        how.name += " " + plan_.segments[i].name;
        graphs::capture(
            s.captured, s.stream, pool_, [&] { s.body(s.stream); }, how);
      }
      s.captured.replay(s.stream);
    }
    if (s.stop) s.stop->record(s.stream);
    s.done.record(s.stream);
  }
  // Join every stream into the first: the step ends there.
  for (std::size_t k = 1; k < streams_.size(); ++k) {
    joins_[k].record(streams_[k]);
    streams_.front().wait(joins_[k]);
  }
  ++steps_;
}

std::map<std::string, float> replay_scheduler::segment_milliseconds() const {
  GRAPHSTEP_EXPECTS(options_.time_segments,
                    "replay_scheduler: segment timing is off; set "
                    "scheduler_options::time_segments");
  GRAPHSTEP_EXPECTS(steps_ > 0, "replay_scheduler: no step has run yet");
  std::map<std::string, float> times;
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    segments_[i].stop->synchronize();
    times[plan_.segments[i].name] =
        cuda::timed_event::elapsed_ms(*segments_[i].start, *segments_[i].stop);
  }
  return times;
}

graphs::graph_exec const& replay_scheduler::graph_of(std::string const& segment) const {
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    if (plan_.segments[i].name == segment) {
      GRAPHSTEP_EXPECTS(!segments_[i].captured.empty(),
                        "replay_scheduler: segment '" + segment + "' is not captured (yet)");
      return segments_[i].captured;
    }
  }
  throw usage_error{"replay_scheduler: no segment is named '" + segment + "'"};
}

}  // namespace graphstep::schedule
