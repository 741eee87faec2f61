#pragma once

/// @file memory/pool_timeline.hpp
/// @brief `pool_timeline`: what a pool held over time — its segments and every allocation with
/// the capture it belongs to — as `memory_pool::timeline()` records it, and its JSON
/// (docs/memory.md#memory-timeline has the schema; scripts/plot-memory-timeline.py draws it).
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graphstep::memory {

/// @brief A range of memory the pool holds (a mapped range, a cudaMalloc segment), and each
/// change of its size. Times are event numbers: every allocation, free, growth, trim, capture
/// begin and end, and graph release is one event, numbered from 0 in the order they happened.
struct timeline_segment {
  struct size_change {
    std::uint64_t at{};     ///< the event
    std::size_t bytes{};    ///< the segment's size from then on; 0: given back whole
  };
  std::uintptr_t base{};
  std::vector<size_change> sizes;  ///< in event order; the first is its appearance
};

/// @brief One allocation, from its `allocate` to the free that gave it back.
struct timeline_allocation {
  std::size_t id{};       ///< its place in allocation order, from 0
  std::string name;       ///< set by `memory_pool::name_allocation`; empty otherwise
  std::uintptr_t address{};
  std::size_t bytes{};    ///< as requested
  std::size_t segment{};  ///< index into `pool_timeline::segments`
  std::size_t offset{};   ///< from the segment's base
  /// The graph (`graphs::graph::id()`) whose capture allocated it; 0 for an eager allocation.
  std::uint64_t graph{};
  std::uint64_t allocated_at{};
  /// The event that gave it back: a free, its graph's release (outputs), or its capture's
  /// failure. Empty while it is live.
  std::optional<std::uint64_t> freed_at;
  bool planned{};           ///< served at its planned offset (`memory_pool::plan_next_capture`)
  bool kept_after_graph{};  ///< an output `memory_pool::keep_after_graph` kept
  bool before_timeline{};   ///< live when recording began: allocated at or before event 0
};

/// @brief One capture into the pool.
struct timeline_capture {
  std::uint64_t graph{};
  std::string name;  ///< the capture's name (`graphs::capture_options::name`)
  std::uint64_t began_at{};
  std::optional<std::uint64_t> ended_at;
  bool committed{};  ///< ended with a graph kept (else its memory went back at once)
  /// Its graph was released (destroyed, its last replay over): its memory went back.
  std::optional<std::uint64_t> released_at;
};

/// @brief What a pool held over time, from `memory_pool::begin_timeline` on.
struct pool_timeline {
  std::uint64_t pool{};      ///< `memory_pool::id()`
  std::string backing;       ///< "virtual_memory", "device_malloc" or "pinned_host"
  std::size_t alignment{};   ///< of every block
  std::uint64_t events{};    ///< events recorded: every event number is below it
  /// Allocations not recorded since `max_allocations` was reached (their frees neither).
  std::size_t dropped_allocations{};
  std::vector<timeline_segment> segments;        ///< in order of appearance
  std::vector<timeline_capture> captures;        ///< in order of beginning
  std::vector<timeline_allocation> allocations;  ///< in allocation order

  /// @brief The timeline as one JSON object (docs/memory.md#memory-timeline): addresses as
  /// "0x..." strings, sizes and offsets as numbers, names escaped.
  [[nodiscard]] std::string to_json() const;
  /// @brief Writes `to_json()` to the file at `path`, replacing it.
  /// @throws error (the file cannot be written: the message names it and why)
  void write_json(std::string const& path) const;
};

}  // namespace graphstep::memory
