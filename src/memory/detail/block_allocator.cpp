// graphstep_core: plain C++, includes no CUDA header.
#include "memory/detail/block_allocator.hpp"

#include <algorithm>
#include <graphstep/error.hpp>
#include <iterator>
#include <limits>
#include <string>

#include "detail/address_text.hpp"

namespace graphstep::memory::detail {
namespace {

[[noreturn]] void fail_invariant(std::string const& what) {
  throw error{"block_allocator invariant broken: " + what};
}

// Sorted union of two sorted graph sets.
std::vector<graph_id> merged_marks(std::vector<graph_id> const& a, std::vector<graph_id> const& b) {
  std::vector<graph_id> out;
  out.reserve(a.size() + b.size());
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

block_allocator::block_allocator(std::size_t alignment, bool graphs_share_memory)
    : alignment_{alignment}, graphs_share_memory_{graphs_share_memory} {
  GRAPHSTEP_EXPECTS(alignment > 0 && (alignment & (alignment - 1)) == 0,
                    "block_allocator: the alignment must be a power of two, not " +
                        std::to_string(alignment) + "; use 256 (what CUDA guarantees)");
}

std::size_t block_allocator::usable(std::size_t bytes) const noexcept {
  return bytes / alignment_ * alignment_;
}

bool block_allocator::owns(std::uintptr_t address) const noexcept {
  auto it = regions_.upper_bound(address);
  if (it == regions_.begin()) return false;
  --it;
  return address - it->first < it->second;
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

bool block_allocator::mergeable(block_info const& a, block_info const& b) noexcept {
  // Only identical tags and marks: merging a released block into one still tied to a stream
  // would hide it from every other stream, and merging marks would taint untouched memory.
  return a.free && b.free && a.region == b.region && a.stream == b.stream && a.touched == b.touched;
}

bool block_allocator::eligible(block_info const& info, stream_id stream,
                               graph_id owner) const noexcept {
  return info.free && (info.stream == stream || info.stream == any_stream) &&
         ((owner != no_graph && graphs_share_memory_) || info.touched.empty());
}

void block_allocator::merge_right(block_map::iterator left) {
  auto right = std::next(left);
  unindex(left->first, left->second);
  unindex(right->first, right->second);
  left->second.size += right->second.size;
  blocks_.erase(right);
  index(left->first, left->second);
}

void block_allocator::coalesce_at(block_map::iterator it) {
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

void block_allocator::add_region(std::uintptr_t base, std::size_t bytes) {
  GRAPHSTEP_EXPECTS(base % alignment_ == 0,
                    "block_allocator::add_region: base " + graphstep::detail::hex_text(base) +
                        " is not aligned to " + std::to_string(alignment_) + " bytes");
  GRAPHSTEP_EXPECTS(bytes > 0, "block_allocator::add_region: a region of 0 bytes at " +
                                   graphstep::detail::hex_text(base) + "; add at least " +
                                   std::to_string(alignment_));
  GRAPHSTEP_EXPECTS(base <= std::numeric_limits<std::uintptr_t>::max() - bytes,
                    "block_allocator::add_region: a region of " + std::to_string(bytes) +
                        " bytes at " + graphstep::detail::hex_text(base) +
                        " runs past the end of the address space");
  auto next = regions_.lower_bound(base);
  if (next != regions_.end()) {
    GRAPHSTEP_EXPECTS(next->first >= base + bytes,
                      "block_allocator::add_region: [" + graphstep::detail::hex_text(base) + ", " +
                          graphstep::detail::hex_text(base + bytes) + ") overlaps the region at " +
                          graphstep::detail::hex_text(next->first) + "; regions must be disjoint");
  }
  if (next != regions_.begin()) {
    auto previous = std::prev(next);
    GRAPHSTEP_EXPECTS(previous->first + previous->second <= base,
                      "block_allocator::add_region: [" + graphstep::detail::hex_text(base) + ", " +
                          graphstep::detail::hex_text(base + bytes) + ") overlaps the region at " +
                          graphstep::detail::hex_text(previous->first) +
                          "; regions must be disjoint");
  }
  regions_.emplace(base, bytes);
  std::size_t const aligned = usable(bytes);
  if (aligned == 0) return;  // too small for a block until it grows
  block_info info;
  info.size = aligned;
  info.region = base;
  index(base, info);
  blocks_.emplace(base, std::move(info));
  region_bytes_ += aligned;
}

void block_allocator::extend_region(std::uintptr_t base, std::size_t extra_bytes) {
  auto region = regions_.find(base);
  GRAPHSTEP_EXPECTS(region != regions_.end(),
                    "block_allocator::extend_region: no region starts "
                    "at " +
                        graphstep::detail::hex_text(base) + "; add it with add_region");
  GRAPHSTEP_EXPECTS(extra_bytes > 0,
                    "block_allocator::extend_region: growth of 0 bytes for "
                    "the region at " +
                        graphstep::detail::hex_text(base));
  std::uintptr_t const end = base + region->second;
  GRAPHSTEP_EXPECTS(end <= std::numeric_limits<std::uintptr_t>::max() - extra_bytes,
                    "block_allocator::extend_region: growing the region at " +
                        graphstep::detail::hex_text(base) + " by " + std::to_string(extra_bytes) +
                        " bytes runs past the end of the address space");
  auto next = std::next(region);
  GRAPHSTEP_EXPECTS(next == regions_.end() || next->first >= end + extra_bytes,
                    "block_allocator::extend_region: growing the region at " +
                        graphstep::detail::hex_text(base) + " by " + std::to_string(extra_bytes) +
                        " bytes would overlap the region at " +
                        graphstep::detail::hex_text(next == regions_.end() ? 0 : next->first));
  std::size_t const old_aligned = usable(region->second);
  region->second += extra_bytes;
  std::size_t const new_aligned = usable(region->second);
  if (new_aligned == old_aligned) return;
  block_info info;
  info.size = new_aligned - old_aligned;
  info.region = base;
  index(base + old_aligned, info);
  auto const grown = blocks_.emplace(base + old_aligned, std::move(info)).first;
  region_bytes_ += new_aligned - old_aligned;
  coalesce_at(grown);  // joins a free tail usable from every stream and touched by no graph
}

void block_allocator::mark_used(std::uintptr_t address, block_info& info, graph_id owner) {
  unindex(address, info);
  info.free = false;
  info.owner = owner;
  if (owner != no_graph) {
    auto at = std::lower_bound(info.touched.begin(), info.touched.end(), owner);
    if (at == info.touched.end() || *at != owner) info.touched.insert(at, owner);
    graph_in_use_[owner] += info.size;
  }
  in_use_ += info.size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
}

std::optional<block> block_allocator::allocate(std::size_t bytes, stream_id stream,
                                               graph_id owner) {
  GRAPHSTEP_EXPECTS(bytes > 0,
                    "block_allocator::allocate: a request of 0 bytes; ask for at "
                    "least 1");
  GRAPHSTEP_EXPECTS(bytes <= std::numeric_limits<std::size_t>::max() - (alignment_ - 1),
                    "block_allocator::allocate: a request of " + std::to_string(bytes) +
                        " bytes is larger than any address space (it overflows when rounded up "
                        "to " +
                        std::to_string(alignment_) + ")");
  std::size_t const size = (bytes + alignment_ - 1) / alignment_ * alignment_;
  // Eligible free lists: this stream's and the released ones; blocks touched by a live graph
  // only for a graph, and for a graph first: memory other graphs already pin is shared before
  // memory that eager work could use. The smallest fit, ties to the lowest address.
  std::optional<std::pair<std::size_t, std::uintptr_t>> best;
  for (bool touched : {true, false}) {
    if (touched && (owner == no_graph || !graphs_share_memory_)) continue;
    for (stream_id tag : {stream, any_stream}) {
      auto list = free_.find({tag, touched});
      if (list == free_.end()) continue;
      auto candidate = list->second.lower_bound({size, 0});
      if (candidate != list->second.end() && (!best || *candidate < *best)) best = *candidate;
      if (stream == any_stream) break;
    }
    if (best) break;
  }
  std::uintptr_t address = 0;
  if (best) {
    address = best->second;
    block_info& info = blocks_.at(address);
    if (info.size > size) {
      // The remainder keeps the tag and the marks; its right neighbour differs from the
      // block (else they would have merged), so it stays apart.
      unindex(address, info);
      block_info rest = info;
      rest.size = info.size - size;
      info.size = size;
      index(address, info);
      index(address + size, rest);
      blocks_.emplace(address + size, std::move(rest));
    }
  } else {
    auto const run = find_run(size, stream, owner);
    if (!run) return std::nullopt;
    address = *run;
    take_run(address, size);
  }
  block_info& info = blocks_.at(address);
  mark_used(address, info, owner);
  return block{address, info.size};
}

std::optional<std::uintptr_t> block_allocator::find_run(std::size_t size, stream_id stream,
                                                        graph_id owner) const {
  // Adjacent eligible blocks that stayed apart because their tags or marks differ; the
  // smallest run that holds `size`, ties to the lowest address.
  std::optional<std::uintptr_t> best;
  std::size_t best_total = std::numeric_limits<std::size_t>::max();
  std::uintptr_t start = 0;
  std::size_t total = 0;
  std::uintptr_t expected = 0;
  std::uintptr_t region = 0;
  for (auto const& [address, info] : blocks_) {
    bool const continues = total > 0 && address == expected && info.region == region;
    if (!eligible(info, stream, owner)) {
      total = 0;
      continue;
    }
    if (!continues) {
      if (total >= size && total < best_total) {
        best = start;
        best_total = total;
      }
      start = address;
      total = 0;
      region = info.region;
    }
    total += info.size;
    expected = address + info.size;
    if (total >= size && total < best_total) {
      best = start;
      best_total = total;
    }
  }
  return best;
}

void block_allocator::take_run(std::uintptr_t start, std::size_t size) {
  auto first = blocks_.find(start);
  unindex(first->first, first->second);
  std::size_t total = first->second.size;
  while (total < size) {
    auto next = std::next(first);
    block_info& right = next->second;
    unindex(next->first, right);
    first->second.touched = merged_marks(first->second.touched, right.touched);
    if (total + right.size > size) {
      // Split the last block: its remainder keeps its own tag and marks.
      block_info rest = right;
      rest.size = total + right.size - size;
      std::uintptr_t const rest_at = start + size;
      blocks_.erase(next);
      index(rest_at, rest);
      blocks_.emplace(rest_at, std::move(rest));
      total = size;
    } else {
      total += right.size;
      blocks_.erase(next);
    }
  }
  first->second.size = total;
  // mark_used unindexes the block; keep the index consistent until then.
  index(first->first, first->second);
}

void block_allocator::deallocate(std::uintptr_t address, stream_id stream, graph_id freed_by) {
  auto found = blocks_.find(address);
  if (found == blocks_.end()) {
    auto containing = blocks_.upper_bound(address);
    if (containing != blocks_.begin()) {
      --containing;
      GRAPHSTEP_EXPECTS(address - containing->first >= containing->second.size,
                        "block_allocator::deallocate: " + graphstep::detail::hex_text(address) +
                            " lies inside the block at " +
                            graphstep::detail::hex_text(containing->first) +
                            " but is not its start; free the address that allocate returned");
    }
    GRAPHSTEP_EXPECTS(false,
                      "block_allocator::deallocate: " + graphstep::detail::hex_text(address) +
                          " was never returned by this allocator (a foreign pointer); "
                          "free it where it was allocated");
  }
  block_info& info = found->second;
  GRAPHSTEP_EXPECTS(!info.free, "block_allocator::deallocate: the block at " +
                                    graphstep::detail::hex_text(address) +
                                    " is already free (a double free); free each block once");
  if (info.owner != no_graph) {
    auto held = graph_in_use_.find(info.owner);
    held->second -= info.size;
    if (held->second == 0) graph_in_use_.erase(held);
  }
  info.free = true;
  info.stream = stream;
  info.owner = no_graph;
  info.kept_after_graph = false;
  if (freed_by != no_graph) {
    auto at = std::lower_bound(info.touched.begin(), info.touched.end(), freed_by);
    if (at == info.touched.end() || *at != freed_by) info.touched.insert(at, freed_by);
  }
  in_use_ -= info.size;
  index(address, info);
  coalesce_at(found);
}

void block_allocator::retag_stream(stream_id from, stream_id to) {
  if (from == to || from == any_stream) return;
  bool changed = false;
  for (auto& [address, info] : blocks_) {
    if (!info.free || info.stream != from) continue;
    unindex(address, info);
    info.stream = to;
    index(address, info);
    changed = true;
  }
  if (changed) coalesce_all();
}

bool block_allocator::holds_free_blocks_of(stream_id stream) const {
  return free_.count({stream, false}) > 0 || free_.count({stream, true}) > 0;
}

void block_allocator::release_stream(stream_id stream) {
  retag_stream(stream, any_stream);
}

void block_allocator::release_graph(graph_id graph) {
  if (graph == no_graph) return;
  bool changed = false;
  for (auto& [address, info] : blocks_) {
    auto const mark = std::lower_bound(info.touched.begin(), info.touched.end(), graph);
    if (mark == info.touched.end() || *mark != graph) continue;  // an owner is always marked
    if (info.free) unindex(address, info);
    info.touched.erase(mark);
    if (!info.free && info.owner == graph && info.kept_after_graph) {
      info.owner = no_graph;  // an eager allocation from now on: its user frees it
      info.kept_after_graph = false;
    } else if (!info.free && info.owner == graph) {
      // The graph's outputs: freed with it. Its replays are over, so any stream may reuse them.
      info.free = true;
      info.owner = no_graph;
      info.stream = any_stream;
      in_use_ -= info.size;
    }
    if (info.free) index(address, info);
    changed = true;
  }
  graph_in_use_.erase(graph);
  if (changed) coalesce_all();
}

void block_allocator::transfer(std::uintptr_t address, graph_id from, graph_id to) {
  GRAPHSTEP_EXPECTS(to != no_graph, "block_allocator::transfer: the new owner is no_graph");
  auto found = blocks_.find(address);
  GRAPHSTEP_EXPECTS(found != blocks_.end() && !found->second.free && found->second.owner == from &&
                        from != no_graph,
                    "block_allocator::transfer: no live block of graph " + std::to_string(from) +
                        " starts at " + graphstep::detail::hex_text(address));
  block_info& info = found->second;
  info.touched.erase(std::lower_bound(info.touched.begin(), info.touched.end(), from));
  auto const at = std::lower_bound(info.touched.begin(), info.touched.end(), to);
  if (at == info.touched.end() || *at != to) info.touched.insert(at, to);
  info.owner = to;
  auto held = graph_in_use_.find(from);
  if ((held->second -= info.size) == 0) graph_in_use_.erase(held);
  graph_in_use_[to] += info.size;
}

void block_allocator::keep_after_graph(std::uintptr_t address) {
  auto found = blocks_.find(address);
  GRAPHSTEP_EXPECTS(found != blocks_.end() && !found->second.free,
                    "block_allocator::keep_after_graph: no live block starts at " +
                        graphstep::detail::hex_text(address) +
                        "; pass an address that allocate returned and that is not freed");
  GRAPHSTEP_EXPECTS(found->second.owner != no_graph,
                    "block_allocator::keep_after_graph: the block at " +
                        graphstep::detail::hex_text(address) +
                        " is an eager allocation, which no graph's release frees; only a "
                        "graph's output needs keeping");
  found->second.kept_after_graph = true;
}

std::size_t block_allocator::free_tail(std::uintptr_t base, std::size_t bytes) const {
  auto const end = blocks_.lower_bound(base + usable(bytes));
  if (end == blocks_.begin()) return 0;
  block_info const& last = std::prev(end)->second;
  bool const may_leave =
      last.region == base && last.free && last.stream == any_stream && last.touched.empty();
  return may_leave ? last.size : 0;
}

std::vector<block_allocator::region_tail> block_allocator::free_tails() const {
  std::vector<region_tail> out;
  for (auto const& [base, bytes] : regions_) {
    out.push_back(region_tail{base, bytes, free_tail(base, bytes)});
  }
  return out;
}

void block_allocator::shrink_region(std::uintptr_t base, std::size_t bytes) {
  auto region = regions_.find(base);
  GRAPHSTEP_EXPECTS(region != regions_.end(),
                    "block_allocator::shrink_region: no region starts "
                    "at " +
                        graphstep::detail::hex_text(base));
  GRAPHSTEP_EXPECTS(bytes > 0 && bytes <= region->second,
                    "block_allocator::shrink_region: cannot take " + std::to_string(bytes) +
                        " bytes off the region at " + graphstep::detail::hex_text(base) + " of " +
                        std::to_string(region->second));
  std::size_t const aligned = usable(region->second);
  std::size_t const removed = aligned - usable(region->second - bytes);
  GRAPHSTEP_EXPECTS(removed <= free_tail(base, region->second),
                    "block_allocator::shrink_region: the last " + std::to_string(bytes) +
                        " bytes of the region at " + graphstep::detail::hex_text(base) +
                        " are not all free and unmarked");
  if (removed > 0) {
    auto last = std::prev(blocks_.lower_bound(base + aligned));
    unindex(last->first, last->second);
    last->second.size -= removed;
    if (last->second.size == 0) {
      blocks_.erase(last);
    } else {
      index(last->first, last->second);
    }
    region_bytes_ -= removed;
  }
  if (bytes == region->second) {
    regions_.erase(region);
  } else {
    region->second -= bytes;
  }
}

std::size_t block_allocator::bytes_in_use_by(graph_id graph) const {
  auto found = graph_in_use_.find(graph);
  return found == graph_in_use_.end() ? 0 : found->second;
}

std::size_t block_allocator::bytes_marked_by(graph_id graph) const {
  if (graph == no_graph) return 0;
  std::size_t bytes = 0;
  for (auto const& [address, info] : blocks_) {
    if (std::binary_search(info.touched.begin(), info.touched.end(), graph)) bytes += info.size;
  }
  return bytes;
}

std::vector<graph_id> block_allocator::graphs_sharing_memory_with(graph_id graph) const {
  std::vector<graph_id> sharing;
  if (graph == no_graph) return sharing;
  for (auto const& [address, info] : blocks_) {
    if (!std::binary_search(info.touched.begin(), info.touched.end(), graph)) continue;
    sharing.insert(sharing.end(), info.touched.begin(), info.touched.end());
  }
  std::sort(sharing.begin(), sharing.end());
  sharing.erase(std::unique(sharing.begin(), sharing.end()), sharing.end());
  return sharing;
}

block_allocator::statistics block_allocator::stats() const {
  statistics s;
  s.region_bytes = region_bytes_;
  s.bytes_in_use = in_use_;
  s.peak_bytes_in_use = peak_in_use_;
  s.free_bytes = region_bytes_ - in_use_;
  for (auto const& [key, list] : free_) {
    s.free_blocks += list.size();
    s.largest_free_block = std::max(s.largest_free_block, list.rbegin()->first);
  }
  s.used_blocks = blocks_.size() - s.free_blocks;
  s.fragmentation = s.free_bytes == 0 ? 0.0
                                      : 1.0 - static_cast<double>(s.largest_free_block) /
                                                  static_cast<double>(s.free_bytes);
  return s;
}

std::optional<block_allocator::block_record> block_allocator::block_at(
    std::uintptr_t address) const {
  auto found = blocks_.find(address);
  if (found == blocks_.end()) return std::nullopt;
  block_info const& info = found->second;
  return block_record{address,
                      info.size,
                      info.free,
                      info.free ? no_graph : info.owner,
                      info.free && info.stream == any_stream,
                      info.touched,
                      info.kept_after_graph};
}

std::vector<block_allocator::region_record> block_allocator::snapshot() const {
  std::vector<region_record> out;
  for (auto const& [base, bytes] : regions_) {
    region_record region;
    region.base = base;
    for (auto it = blocks_.lower_bound(base); it != blocks_.end() && it->second.region == base;
         ++it) {
      block_info const& info = it->second;
      region.blocks.push_back(block_record{
          it->first, info.size, info.free, info.free ? no_graph : info.owner,
          info.free && info.stream == any_stream, info.touched, info.kept_after_graph});
      region.bytes += info.size;
    }
    out.push_back(std::move(region));
  }
  return out;
}

void block_allocator::check_invariants() const {
  std::size_t used = 0;
  std::size_t indexed = 0;
  std::size_t aligned_total = 0;
  std::map<graph_id, std::size_t> by_graph;
  auto block = blocks_.begin();
  std::uintptr_t previous_end = 0;
  bool first_region = true;
  for (auto const& [base, bytes] : regions_) {
    if (!first_region && base < previous_end) {
      fail_invariant("the region at " + graphstep::detail::hex_text(base) +
                     " overlaps the one before it");
    }
    first_region = false;
    previous_end = base + bytes;
    std::uintptr_t const end = base + usable(bytes);
    aligned_total += usable(bytes);
    std::uintptr_t at = base;
    block_info const* previous = nullptr;
    while (at < end) {
      if (block == blocks_.end() || block->first != at) {
        fail_invariant("no block starts at " + graphstep::detail::hex_text(at) +
                       " inside the region at " + graphstep::detail::hex_text(base));
      }
      block_info const& info = block->second;
      if (info.size == 0 || info.size % alignment_ != 0 || at % alignment_ != 0) {
        fail_invariant("the block at " + graphstep::detail::hex_text(at) +
                       " is empty or misaligned");
      }
      if (info.size > end - at)
        fail_invariant("the block at " + graphstep::detail::hex_text(at) + " overruns its region");
      if (info.region != base)
        fail_invariant("the block at " + graphstep::detail::hex_text(at) + " names another region");
      if (!std::is_sorted(info.touched.begin(), info.touched.end()) ||
          std::adjacent_find(info.touched.begin(), info.touched.end()) != info.touched.end() ||
          std::binary_search(info.touched.begin(), info.touched.end(), no_graph)) {
        fail_invariant("the graph set of the block at " + graphstep::detail::hex_text(at) +
                       " is not sorted, unique and free of no_graph");
      }
      if (info.free) {
        auto list = free_.find({info.stream, !info.touched.empty()});
        if (list == free_.end() || list->second.count({info.size, at}) == 0) {
          fail_invariant("the free block at " + graphstep::detail::hex_text(at) +
                         " is missing from the free index");
        }
        if (info.owner != no_graph || info.kept_after_graph)
          fail_invariant("the free block at " + graphstep::detail::hex_text(at) +
                         " has an owner or is kept after one");
        ++indexed;
        if (previous != nullptr && mergeable(*previous, info)) {
          fail_invariant("the free block at " + graphstep::detail::hex_text(at) +
                         " was not merged with its compatible left neighbour");
        }
      } else {
        used += info.size;
        if (info.kept_after_graph && info.owner == no_graph) {
          fail_invariant("the eager block at " + graphstep::detail::hex_text(at) +
                         " is kept after a graph");
        }
        if (info.owner != no_graph) {
          by_graph[info.owner] += info.size;
          if (!std::binary_search(info.touched.begin(), info.touched.end(), info.owner)) {
            fail_invariant("the block at " + graphstep::detail::hex_text(at) +
                           " is not marked by the graph that owns it");
          }
        }
      }
      previous = &info;
      at += info.size;
      ++block;
    }
  }
  if (block != blocks_.end()) fail_invariant("a block lies outside every region");
  std::size_t index_entries = 0;
  for (auto const& [key, list] : free_) {
    if (list.empty()) fail_invariant("an empty free list was kept");
    index_entries += list.size();
  }
  if (index_entries != indexed) fail_invariant("the free index holds blocks that are not free");
  if (used != in_use_) fail_invariant("the in-use counter disagrees with the blocks");
  if (aligned_total != region_bytes_)
    fail_invariant("the region counter disagrees with the regions");
  if (peak_in_use_ < in_use_) fail_invariant("the peak is below the bytes in use");
  if (by_graph != graph_in_use_) fail_invariant("the per-graph counters disagree with the blocks");
}

}  // namespace graphstep::memory::detail
