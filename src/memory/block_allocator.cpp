#include <graphstep/error.hpp>
#include <graphstep/memory/block_allocator.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

namespace graphstep::memory {
namespace {

std::string hex(std::uintptr_t address) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

void fail_invariant(std::string const& what) {
  throw error{"block_allocator invariant broken: " + what};
}

}  // namespace

block_allocator::block_allocator(std::size_t alignment) : alignment_{alignment} {
  GRAPHSTEP_EXPECTS(alignment > 0 && (alignment & (alignment - 1)) == 0,
                    "block_allocator: the alignment must be a power of two, not " +
                        std::to_string(alignment));
}

std::map<std::uintptr_t, std::size_t>::const_iterator block_allocator::region_at(
    std::uintptr_t address) const {
  auto it = regions_.upper_bound(address);
  if (it == regions_.begin()) return regions_.end();
  --it;
  return address - it->first < it->second ? it : regions_.end();
}

bool block_allocator::owns(std::uintptr_t address) const noexcept {
  return region_at(address) != regions_.end();
}

void block_allocator::index(std::uintptr_t address, block_info const& info) {
  free_[{info.stream, !info.touched.empty()}].insert({info.size, address});
}

void block_allocator::unindex(std::uintptr_t address, block_info const& info) {
  auto found = free_.find({info.stream, !info.touched.empty()});
  if (found == free_.end()) return;
  found->second.erase({info.size, address});
  if (found->second.empty()) free_.erase(found);
}

bool block_allocator::mergeable(block_info const& a, block_info const& b) const {
  // A released block may join one still tied to a stream: the result stays tied to it, which
  // is safe (only stricter) and keeps the single-stream case free of fragmentation.
  bool const streams_agree =
      a.stream == b.stream || a.stream == any_stream || b.stream == any_stream;
  return a.free && b.free && a.region == b.region && streams_agree && a.touched == b.touched;
}

void block_allocator::merge_right(std::map<std::uintptr_t, block_info>::iterator left) {
  auto right = std::next(left);
  unindex(left->first, left->second);
  unindex(right->first, right->second);
  left->second.size += right->second.size;
  if (left->second.stream == any_stream) left->second.stream = right->second.stream;
  blocks_.erase(right);
  index(left->first, left->second);
}

void block_allocator::add_region(std::uintptr_t base, std::size_t bytes) {
  GRAPHSTEP_EXPECTS(base % alignment_ == 0, "block_allocator::add_region: base " + hex(base) +
                                                " is not aligned to " +
                                                std::to_string(alignment_) + " bytes");
  std::size_t const usable = bytes / alignment_ * alignment_;
  GRAPHSTEP_EXPECTS(usable > 0, "block_allocator::add_region: a region of " +
                                    std::to_string(bytes) + " bytes holds no aligned block");
  GRAPHSTEP_EXPECTS(base <= std::numeric_limits<std::uintptr_t>::max() - usable,
                    "block_allocator::add_region: the region wraps around the address space");
  auto next = regions_.lower_bound(base);
  bool const overlaps_next = next != regions_.end() && next->first < base + usable;
  bool overlaps_previous = false;
  if (next != regions_.begin()) {
    auto previous = std::prev(next);
    overlaps_previous = previous->first + previous->second > base;
  }
  GRAPHSTEP_EXPECTS(!overlaps_next && !overlaps_previous,
                    "block_allocator::add_region: [" + hex(base) + ", " + hex(base + usable) +
                        ") overlaps a region already added");
  regions_.emplace(base, usable);
  block_info info;
  info.size = usable;
  info.region = base;
  blocks_.emplace(base, info);
  index(base, info);
  region_bytes_ += usable;
}

void block_allocator::extend_region(std::uintptr_t base, std::size_t extra_bytes) {
  auto region = regions_.find(base);
  GRAPHSTEP_EXPECTS(region != regions_.end(), "block_allocator::extend_region: no region starts "
                                              "at " + hex(base));
  GRAPHSTEP_EXPECTS(extra_bytes > 0 && extra_bytes % alignment_ == 0,
                    "block_allocator::extend_region: growth must be a positive multiple of " +
                        std::to_string(alignment_) + " bytes, not " +
                        std::to_string(extra_bytes));
  std::uintptr_t const end = base + region->second;
  auto next = std::next(region);
  GRAPHSTEP_EXPECTS(next == regions_.end() || next->first >= end + extra_bytes,
                    "block_allocator::extend_region: growing the region at " + hex(base) +
                        " would overlap the region at " + hex(next->first));
  region->second += extra_bytes;
  region_bytes_ += extra_bytes;
  block_info info;
  info.size = extra_bytes;
  info.region = base;
  auto const grown = blocks_.emplace(end, info).first;
  index(end, info);
  // Fresh memory joins only a released, untouched tail: absorbed into a block tied to one
  // stream it would be unusable by the others until that stream is released.
  auto const left = std::prev(grown);
  if (left->second.free && left->second.stream == any_stream && left->second.touched.empty() &&
      left->second.region == base && left->first + left->second.size == end) {
    merge_right(left);
  }
}

std::optional<block> block_allocator::allocate(std::size_t bytes, stream_id stream,
                                               graph_id owner) {
  GRAPHSTEP_EXPECTS(bytes > 0, "block_allocator::allocate: a request of 0 bytes");
  GRAPHSTEP_EXPECTS(bytes <= std::numeric_limits<std::size_t>::max() - alignment_,
                    "block_allocator::allocate: a request of " + std::to_string(bytes) +
                        " bytes is larger than any address space");
  std::size_t const size = (bytes + alignment_ - 1) / alignment_ * alignment_;
  // Eligible free lists: this stream's and the released ones; blocks touched by a live graph
  // only for a graph.
  std::optional<std::pair<std::size_t, std::uintptr_t>> best;
  for (stream_id tag : {stream, any_stream}) {
    for (bool touched : {false, true}) {
      if (touched && owner == no_graph) continue;
      auto list = free_.find({tag, touched});
      if (list == free_.end()) continue;
      auto candidate = list->second.lower_bound({size, 0});
      if (candidate != list->second.end() && (!best || *candidate < *best)) best = *candidate;
    }
    if (stream == any_stream) break;
  }
  if (!best) return std::nullopt;
  std::uintptr_t const address = best->second;
  block_info& info = blocks_.at(address);
  unindex(address, info);
  if (info.size - size >= alignment_) {
    block_info rest = info;
    rest.size = info.size - size;
    info.size = size;
    blocks_.emplace(address + size, rest);
    index(address + size, rest);
  }
  info.free = false;
  info.owner = owner;
  if (owner != no_graph) {
    auto at = std::lower_bound(info.touched.begin(), info.touched.end(), owner);
    if (at == info.touched.end() || *at != owner) info.touched.insert(at, owner);
  }
  in_use_ += info.size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return block{address, info.size};
}

void block_allocator::deallocate(std::uintptr_t address, stream_id stream) {
  auto found = blocks_.find(address);
  if (found == blocks_.end()) {
    GRAPHSTEP_EXPECTS(!owns(address), "deallocate: " + hex(address) +
                                          " lies inside a block but is not its start; free the "
                                          "pointer that allocate returned");
    GRAPHSTEP_EXPECTS(false, "deallocate: " + hex(address) +
                                 " was not allocated by this pool (a foreign pointer)");
  }
  block_info& info = found->second;
  GRAPHSTEP_EXPECTS(!info.free, "deallocate: " + hex(address) +
                                    " is already free (a double free)");
  info.free = true;
  info.stream = stream;
  info.owner = no_graph;
  in_use_ -= info.size;
  index(address, info);
  coalesce_at(address);
}

void block_allocator::coalesce_at(std::uintptr_t address) {
  auto it = blocks_.find(address);
  if (it == blocks_.end() || !it->second.free) return;
  if (it != blocks_.begin()) {
    auto left = std::prev(it);
    if (left->first + left->second.size == it->first && mergeable(left->second, it->second)) {
      merge_right(left);
      it = left;
    }
  }
  auto right = std::next(it);
  if (right != blocks_.end() && it->first + it->second.size == right->first &&
      mergeable(it->second, right->second)) {
    merge_right(it);
  }
}

void block_allocator::coalesce_all() {
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    auto right = std::next(it);
    if (right != blocks_.end() && it->first + it->second.size == right->first &&
        mergeable(it->second, right->second)) {
      merge_right(it);
    } else {
      it = right;
    }
  }
}

void block_allocator::retag(std::uintptr_t address, block_info& info, stream_id stream,
                            std::vector<graph_id> touched) {
  if (info.free) unindex(address, info);
  info.stream = stream;
  info.touched = std::move(touched);
  if (info.free) index(address, info);
}

void block_allocator::release_stream(stream_id stream) {
  if (stream == any_stream) return;
  for (auto& [address, info] : blocks_) {
    if (info.free && info.stream == stream) retag(address, info, any_stream, info.touched);
  }
  coalesce_all();
}

void block_allocator::release_graph(graph_id graph) {
  if (graph == no_graph) return;
  for (auto& [address, info] : blocks_) {
    auto const mark = std::find(info.touched.begin(), info.touched.end(), graph);
    bool const held = !info.free && info.owner == graph;
    if (mark == info.touched.end() && !held) continue;
    std::vector<graph_id> touched = info.touched;
    touched.erase(std::remove(touched.begin(), touched.end(), graph), touched.end());
    if (held) {
      // The graph's outputs: freed with it. Its replays are over, so any stream may reuse them.
      info.free = true;
      info.owner = no_graph;
      info.stream = any_stream;
      in_use_ -= info.size;
      info.touched = std::move(touched);
      index(address, info);
    } else {
      retag(address, info, info.stream, std::move(touched));
    }
  }
  coalesce_all();
}

std::size_t block_allocator::bytes_in_use_by(graph_id graph) const {
  std::size_t bytes = 0;
  for (auto const& [address, info] : blocks_) {
    if (!info.free && info.owner == graph && graph != no_graph) bytes += info.size;
  }
  return bytes;
}

block_allocator::statistics block_allocator::stats() const {
  statistics s;
  s.region_bytes = region_bytes_;
  s.bytes_in_use = in_use_;
  s.peak_bytes_in_use = peak_in_use_;
  s.free_bytes = region_bytes_ - in_use_;
  for (auto const& [key, list] : free_) {
    s.free_blocks += list.size();
    if (!list.empty()) s.largest_free_block = std::max(s.largest_free_block, list.rbegin()->first);
  }
  s.used_blocks = blocks_.size() - s.free_blocks;
  s.fragmentation = s.free_bytes == 0 ? 0.0
                                      : 1.0 - static_cast<double>(s.largest_free_block) /
                                                  static_cast<double>(s.free_bytes);
  return s;
}

void block_allocator::check_invariants() const {
  std::size_t used = 0;
  std::size_t indexed = 0;
  auto block = blocks_.begin();
  for (auto const& [base, bytes] : regions_) {
    std::uintptr_t at = base;
    block_info const* previous = nullptr;
    while (at < base + bytes) {
      if (block == blocks_.end() || block->first != at) {
        fail_invariant("no block starts at " + hex(at) + " inside the region at " + hex(base));
      }
      block_info const& info = block->second;
      if (info.size == 0 || info.size % alignment_ != 0 || at % alignment_ != 0) {
        fail_invariant("the block at " + hex(at) + " is empty or misaligned");
      }
      if (info.region != base) fail_invariant("the block at " + hex(at) + " names another region");
      if (!std::is_sorted(info.touched.begin(), info.touched.end()) ||
          std::adjacent_find(info.touched.begin(), info.touched.end()) != info.touched.end()) {
        fail_invariant("the graph set of the block at " + hex(at) + " is not sorted and unique");
      }
      if (info.free) {
        auto list = free_.find({info.stream, !info.touched.empty()});
        if (list == free_.end() || list->second.count({info.size, at}) == 0) {
          fail_invariant("the free block at " + hex(at) + " is missing from the free index");
        }
        ++indexed;
        // Blocks with equal tags must have merged; a released block may stay beside a block
        // tied to a stream (fresh growth is kept apart on purpose).
        if (previous != nullptr && previous->free && previous->stream == info.stream &&
            previous->touched == info.touched) {
          fail_invariant("the free block at " + hex(at) + " was not merged with its left neighbour");
        }
      } else {
        used += info.size;
        if (info.owner != no_graph &&
            !std::binary_search(info.touched.begin(), info.touched.end(), info.owner)) {
          fail_invariant("the block at " + hex(at) + " is not marked by the graph that owns it");
        }
      }
      previous = &info;
      at += info.size;
      ++block;
    }
    if (at != base + bytes) fail_invariant("blocks overrun the region at " + hex(base));
  }
  if (block != blocks_.end()) fail_invariant("a block lies outside every region");
  std::size_t index_entries = 0;
  for (auto const& [key, list] : free_) {
    if (list.empty()) fail_invariant("an empty free list was kept");
    index_entries += list.size();
  }
  if (index_entries != indexed) fail_invariant("the free index holds blocks that are not free");
  if (used != in_use_) fail_invariant("the in-use counter disagrees with the blocks");
}

}  // namespace graphstep::memory
