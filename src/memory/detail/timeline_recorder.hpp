#pragma once

/// @file memory/detail/timeline_recorder.hpp
/// @brief Records a pool's memory timeline: the pool's engine tells it each event, under the
/// engine's lock, while `memory_pool::begin_timeline` is in force.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/memory/pool_timeline.hpp>
#include <map>
#include <string>
#include <unordered_map>

namespace graphstep::memory::detail {

class timeline_recorder {
 public:
  /// Records at most `max_allocations` allocations (a long run allocating every step would
  /// otherwise grow the timeline without end); later ones are counted as dropped.
  explicit timeline_recorder(std::size_t max_allocations);

  /// What the pool held when recording began, all at event 0: a segment, a live block (its
  /// owner graph, 0 for eager).
  void existing_segment(std::uintptr_t base, std::size_t bytes);
  void existing_allocation(std::uintptr_t address, std::size_t bytes, std::uint64_t graph);

  void segment_grown(std::uintptr_t base, std::size_t added_bytes);
  void segment_shrunk(std::uintptr_t base, std::size_t removed_bytes);
  void allocated(std::uintptr_t address, std::size_t bytes, std::uint64_t graph, bool planned);
  void freed(std::uintptr_t address);
  void capture_began(std::uint64_t graph, std::string const& name);
  /// The capture into `graph` ended; when it failed, its live allocations went back.
  void capture_ended(std::uint64_t graph, bool committed);
  /// The graph's memory went back: its live allocations but those kept after it.
  void graph_released(std::uint64_t graph);
  void kept_after_graph(std::uintptr_t address);
  /// Names the live allocation at `address`; false when none is recorded there.
  bool name(std::uintptr_t address, std::string name);

  /// The timeline so far (`pool`, `backing` and `alignment` are the caller's to fill).
  [[nodiscard]] pool_timeline const& timeline() const noexcept { return timeline_; }

 private:
  std::uint64_t next_event() { return timeline_.events++; }
  void free_live_of(std::uint64_t graph, std::uint64_t at, bool keep_kept);
  void add(std::uintptr_t address, std::size_t bytes, std::uint64_t graph, std::uint64_t at,
           bool planned, bool before_timeline);

  std::size_t max_allocations_;
  pool_timeline timeline_;
  std::map<std::uintptr_t, std::size_t> live_segments_;               // base -> index
  std::unordered_map<std::uintptr_t, std::size_t> live_allocations_;  // address -> index
  std::unordered_map<std::uint64_t, std::size_t> open_captures_;      // graph -> index
  std::unordered_map<std::uint64_t, std::size_t> graph_captures_;     // graph -> its last capture
};

}  // namespace graphstep::memory::detail
