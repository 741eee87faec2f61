// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <functional>
#include <graphstep/error.hpp>
#include <graphstep/schedule/step_plan.hpp>
#include <map>
#include <set>

namespace graphstep::schedule {
namespace {

// Depth-first search for a cycle; returns it as "a -> b -> a", or "" when there is none.
std::string find_cycle(std::vector<std::vector<std::size_t>> const& edges,
                       std::vector<segment_spec> const& segments) {
  enum class mark { none, active, done };
  std::vector<mark> marks(edges.size(), mark::none);
  std::vector<std::size_t> path;
  std::string cycle;
  std::function<bool(std::size_t)> visit = [&](std::size_t node) {
    marks[node] = mark::active;
    path.push_back(node);
    for (std::size_t next : edges[node]) {
      if (marks[next] == mark::active) {
        auto from = std::find(path.begin(), path.end(), next);
        for (auto it = from; it != path.end(); ++it) cycle += segments[*it].name + " -> ";
        cycle += segments[next].name;
        return true;
      }
      if (marks[next] == mark::none && visit(next)) return true;
    }
    path.pop_back();
    marks[node] = mark::done;
    return false;
  };
  for (std::size_t i = 0; i < edges.size(); ++i) {
    if (marks[i] == mark::none && visit(i)) return cycle;
  }
  return {};
}

}  // namespace

step_plan plan_step(step_spec const& spec) {
  GRAPHSTEP_EXPECTS(!spec.segments.empty(), "step: no segment was given");
  std::map<std::string, std::size_t> stream_index;
  for (std::size_t i = 0; i < spec.streams.size(); ++i) stream_index.emplace(spec.streams[i], i);
  std::map<std::string, std::size_t> segment_index;
  for (std::size_t i = 0; i < spec.segments.size(); ++i) {
    auto const& s = spec.segments[i];
    GRAPHSTEP_EXPECTS(!s.name.empty(), "step: segment " + std::to_string(i) + " has no name");
    GRAPHSTEP_EXPECTS(segment_index.emplace(s.name, i).second,
                      "step: two segments are named '" + s.name + "'");
    GRAPHSTEP_EXPECTS(stream_index.count(s.stream) != 0,
                      "step: segment '" + s.name + "' runs on stream '" + s.stream +
                          "', which is not among the step's streams");
  }
  // Dependencies: known names first, then cycles, then issue order.
  std::vector<std::vector<std::size_t>> edges(spec.segments.size());
  for (std::size_t i = 0; i < spec.segments.size(); ++i) {
    for (auto const& dependency : spec.segments[i].after) {
      auto found = segment_index.find(dependency);
      GRAPHSTEP_EXPECTS(found != segment_index.end(), "step: segment '" + spec.segments[i].name +
                                                          "' waits for '" + dependency +
                                                          "', which is not a segment of the step");
      edges[i].push_back(found->second);
    }
  }
  std::string const cycle = find_cycle(edges, spec.segments);
  GRAPHSTEP_EXPECTS(cycle.empty(), "step: the dependencies form a cycle: " + cycle);
  step_plan plan;
  plan.segments = spec.segments;
  std::set<std::string> available{spec.static_inputs.begin(), spec.static_inputs.end()};
  std::map<std::string, std::size_t> writer;  // the last segment that wrote each buffer
  // ancestors[i]: segments ordered before i, by stream order or dependencies (transitively).
  std::vector<std::set<std::size_t>> ancestors(spec.segments.size());
  std::vector<std::size_t> last_on_stream(spec.streams.size(), spec.segments.size());
  for (std::size_t i = 0; i < spec.segments.size(); ++i) {
    auto const& s = spec.segments[i];
    plan.stream_of.push_back(stream_index.at(s.stream));
    std::size_t const previous = last_on_stream[plan.stream_of.back()];
    std::vector<std::size_t> before = edges[i];
    if (previous < spec.segments.size()) before.push_back(previous);
    for (std::size_t b : before) {
      if (b >= i) continue;  // reported below
      ancestors[i].insert(b);
      ancestors[i].insert(ancestors[b].begin(), ancestors[b].end());
    }
    last_on_stream[plan.stream_of.back()] = i;
    std::vector<std::size_t> waits;
    for (std::size_t dependency : edges[i]) {
      GRAPHSTEP_EXPECTS(dependency < i, "step: segment '" + s.name + "' waits for '" +
                                            spec.segments[dependency].name +
                                            "', which is issued after it: reorder the segments");
      if (stream_index.at(spec.segments[dependency].stream) != plan.stream_of.back()) {
        waits.push_back(dependency);
      }
    }
    for (auto const& buffer : s.reads) {
      GRAPHSTEP_EXPECTS(available.count(buffer) != 0,
                        "step: segment '" + s.name + "' reads '" + buffer +
                            "', which no earlier segment writes and no static input provides");
      auto const w = writer.find(buffer);
      GRAPHSTEP_EXPECTS(w == writer.end() || ancestors[i].count(w->second) != 0,
                        "step: segment '" + s.name + "' reads '" + buffer + "', written by '" +
                            (w == writer.end() ? std::string{} : spec.segments[w->second].name) +
                            "' on another stream, without waiting for it: add it to '" + s.name +
                            "'s after list");
    }
    available.insert(s.writes.begin(), s.writes.end());
    for (auto const& buffer : s.writes) writer[buffer] = i;
    plan.cross_waits.push_back(std::move(waits));
  }
  return plan;
}

}  // namespace graphstep::schedule
