// graphstep_core: plain C++, includes no CUDA header.
#include "memory/detail/timeline_recorder.hpp"

#include <iterator>
#include <utility>

namespace graphstep::memory::detail {

timeline_recorder::timeline_recorder(std::size_t max_allocations)
    : max_allocations_{max_allocations} {}

void timeline_recorder::existing_segment(std::uintptr_t base, std::size_t bytes) {
  live_segments_[base] = timeline_.segments.size();
  timeline_.segments.push_back({base, {{0, bytes}}});
}

void timeline_recorder::existing_allocation(std::uintptr_t address, std::size_t bytes,
                                            std::uint64_t graph) {
  add(address, bytes, graph, 0, false, true);
}

void timeline_recorder::segment_grown(std::uintptr_t base, std::size_t added_bytes) {
  std::uint64_t const at = next_event();
  auto found = live_segments_.find(base);
  if (found == live_segments_.end()) {
    live_segments_[base] = timeline_.segments.size();
    timeline_.segments.push_back({base, {{at, added_bytes}}});
    return;
  }
  auto& sizes = timeline_.segments[found->second].sizes;
  sizes.push_back({at, sizes.back().bytes + added_bytes});
}

void timeline_recorder::segment_shrunk(std::uintptr_t base, std::size_t removed_bytes) {
  std::uint64_t const at = next_event();
  auto found = live_segments_.find(base);
  if (found == live_segments_.end()) return;
  auto& sizes = timeline_.segments[found->second].sizes;
  std::size_t const bytes = sizes.back().bytes > removed_bytes ? sizes.back().bytes - removed_bytes
                                                               : 0;
  sizes.push_back({at, bytes});
  if (bytes == 0) live_segments_.erase(found);
}

void timeline_recorder::add(std::uintptr_t address, std::size_t bytes, std::uint64_t graph,
                            std::uint64_t at, bool planned, bool before_timeline) {
  if (timeline_.allocations.size() >= max_allocations_) {
    ++timeline_.dropped_allocations;
    return;
  }
  timeline_allocation allocation;
  allocation.id = timeline_.allocations.size();
  allocation.address = address;
  allocation.bytes = bytes;
  allocation.graph = graph;
  allocation.allocated_at = at;
  allocation.planned = planned;
  allocation.before_timeline = before_timeline;
  // The segment holding it: the last one beginning at or below its address.
  auto segment = live_segments_.upper_bound(address);
  if (segment != live_segments_.begin()) {
    segment = std::prev(segment);
    allocation.segment = segment->second;
    allocation.offset = address - segment->first;
  }
  live_allocations_[address] = allocation.id;
  timeline_.allocations.push_back(std::move(allocation));
}

void timeline_recorder::allocated(std::uintptr_t address, std::size_t bytes, std::uint64_t graph,
                                  bool planned) {
  add(address, bytes, graph, next_event(), planned, false);
}

void timeline_recorder::freed(std::uintptr_t address) {
  std::uint64_t const at = next_event();
  auto found = live_allocations_.find(address);
  if (found == live_allocations_.end()) return;  // dropped
  timeline_.allocations[found->second].freed_at = at;
  live_allocations_.erase(found);
}

void timeline_recorder::capture_began(std::uint64_t graph, std::string const& name) {
  timeline_capture capture;
  capture.graph = graph;
  capture.name = name;
  capture.began_at = next_event();
  open_captures_[graph] = graph_captures_[graph] = timeline_.captures.size();
  timeline_.captures.push_back(std::move(capture));
}

void timeline_recorder::capture_ended(std::uint64_t graph, bool committed) {
  std::uint64_t const at = next_event();
  if (auto found = open_captures_.find(graph); found != open_captures_.end()) {
    timeline_.captures[found->second].ended_at = at;
    timeline_.captures[found->second].committed = committed;
    open_captures_.erase(found);
  }
  if (!committed) free_live_of(graph, at, false);
}

void timeline_recorder::graph_released(std::uint64_t graph) {
  std::uint64_t const at = next_event();
  if (auto found = graph_captures_.find(graph); found != graph_captures_.end()) {
    timeline_.captures[found->second].released_at = at;
    graph_captures_.erase(found);
  }
  free_live_of(graph, at, true);
}

void timeline_recorder::free_live_of(std::uint64_t graph, std::uint64_t at, bool keep_kept) {
  for (auto it = live_allocations_.begin(); it != live_allocations_.end();) {
    timeline_allocation& allocation = timeline_.allocations[it->second];
    if (allocation.graph != graph || (keep_kept && allocation.kept_after_graph)) {
      ++it;
      continue;
    }
    allocation.freed_at = at;
    it = live_allocations_.erase(it);
  }
}

void timeline_recorder::kept_after_graph(std::uintptr_t address) {
  if (auto found = live_allocations_.find(address); found != live_allocations_.end()) {
    timeline_.allocations[found->second].kept_after_graph = true;
  }
}

bool timeline_recorder::name(std::uintptr_t address, std::string name) {
  auto found = live_allocations_.find(address);
  if (found == live_allocations_.end()) return false;
  timeline_.allocations[found->second].name = std::move(name);
  return true;
}

}  // namespace graphstep::memory::detail
