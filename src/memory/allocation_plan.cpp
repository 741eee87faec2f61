#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <limits>
#include <map>
#include <numeric>
#include <string>

namespace graphstep::memory {

std::size_t allocation_trace::record_allocate(std::size_t bytes) {
  GRAPHSTEP_EXPECTS(bytes > 0, "allocation_trace: a request of 0 bytes");
  std::size_t const id = bytes_.size();
  events_.push_back({trace_event::kind::allocate, id, bytes});
  bytes_.push_back(bytes);
  freed_.push_back(false);
  return id;
}

void allocation_trace::record_deallocate(std::size_t id) {
  GRAPHSTEP_EXPECTS(id < bytes_.size(),
                    "allocation_trace: allocation #" + std::to_string(id) + " was never recorded");
  GRAPHSTEP_EXPECTS(!freed_[id],
                    "allocation_trace: allocation #" + std::to_string(id) + " was freed twice");
  freed_[id] = true;
  events_.push_back({trace_event::kind::deallocate, id, bytes_[id]});
}

double allocation_plan::footprint_ratio() const noexcept {
  if (peak_live_bytes == 0) return 1.0;
  return static_cast<double>(slab_bytes) / static_cast<double>(peak_live_bytes);
}

namespace {

struct lifetime {
  std::size_t begin;  // event index of the allocation
  std::size_t end;    // event index of the free, or the number of events
  std::size_t size;   // aligned
};

std::vector<lifetime> lifetimes_of(allocation_trace const& trace, std::size_t alignment) {
  GRAPHSTEP_EXPECTS(
      alignment > 0 && (alignment & (alignment - 1)) == 0,
      "plan_allocations: the alignment must be a power of two, not " + std::to_string(alignment));
  auto const& events = trace.events();
  std::vector<lifetime> lives(trace.allocation_count(), {0, events.size(), 0});
  std::size_t total = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    auto const& e = events[i];
    if (e.what == trace_event::kind::allocate) {
      std::size_t const limit = std::numeric_limits<std::size_t>::max() - total;
      GRAPHSTEP_EXPECTS(e.bytes <= limit - std::min(limit, alignment - 1),
                        "plan_allocations: allocation #" + std::to_string(e.id) + " of " +
                            std::to_string(e.bytes) +
                            " bytes makes the trace larger than any address space");
      lives[e.id].begin = i;
      lives[e.id].size = (e.bytes + alignment - 1) / alignment * alignment;
      total += lives[e.id].size;
    } else {
      lives[e.id].end = i;
    }
  }
  return lives;
}

// A block already placed, kept in a vector sorted by offset: a linear scan in offset order
// finds the gaps between the blocks whose lifetimes meet a new one without sorting anything.
struct placed_block {
  std::size_t offset;
  std::size_t offset_end;
  std::size_t begin;
  std::size_t end;
};

enum class fit : std::uint8_t { lowest, tightest };

// Places allocations in `order`: each goes to the lowest gap that holds it (fit::lowest) or
// the smallest such gap (fit::tightest) among the blocks already placed whose lifetimes meet
// its own, else on top of them. Returns the slab size.
std::size_t place(std::vector<lifetime> const& lives, std::vector<std::size_t> const& order,
                  fit rule, std::vector<std::size_t>& offsets) {
  offsets.assign(lives.size(), 0);
  std::vector<placed_block> placed;
  placed.reserve(lives.size());
  std::size_t slab = 0;
  for (std::size_t id : order) {
    lifetime const& me = lives[id];
    std::size_t best_offset = std::numeric_limits<std::size_t>::max();
    std::size_t best_gap = std::numeric_limits<std::size_t>::max();
    std::size_t cursor = 0;  // end of the conflicting blocks seen so far
    for (placed_block const& other : placed) {
      if (other.begin >= me.end || me.begin >= other.end) continue;  // never alive together
      if (other.offset > cursor) {
        std::size_t const gap = other.offset - cursor;
        if (gap >= me.size && gap < best_gap) {
          best_offset = cursor;
          best_gap = gap;
          if (rule == fit::lowest || gap == me.size) break;
        }
      }
      cursor = std::max(cursor, other.offset_end);
    }
    if (best_offset == std::numeric_limits<std::size_t>::max()) best_offset = cursor;
    offsets[id] = best_offset;
    slab = std::max(slab, best_offset + me.size);
    placed_block const block{best_offset, best_offset + me.size, me.begin, me.end};
    auto const at = std::upper_bound(
        placed.begin(), placed.end(), block,
        [](placed_block const& a, placed_block const& b) { return a.offset < b.offset; });
    placed.insert(at, block);
  }
  return slab;
}

}  // namespace

allocation_plan plan_allocations(allocation_trace const& trace, std::size_t alignment) {
  std::vector<lifetime> const lives = lifetimes_of(trace, alignment);
  allocation_plan plan;
  plan.alignment = alignment;
  plan.sizes.resize(lives.size());
  for (std::size_t i = 0; i < lives.size(); ++i) plan.sizes[i] = lives[i].size;
  // The lower bound: the most aligned bytes alive at once.
  std::size_t live = 0;
  for (auto const& e : trace.events()) {
    if (e.what == trace_event::kind::allocate) {
      live += lives[e.id].size;
      plan.peak_live_bytes = std::max(plan.peak_live_bytes, live);
    } else {
      live -= lives[e.id].size;
    }
  }
  plan.offsets.assign(lives.size(), 0);
  if (lives.empty()) return plan;

  // Orders to try, best first on generated training steps: by power-of-two size class (big
  // classes first) and, within a class, by allocation time or by lifetime; then plain
  // largest-first and largest-area-first. Coarse classes let blocks of similar size that live
  // at different times stack into the same column, which plain largest-first misses.
  auto duration = [&](std::size_t i) { return lives[i].end - lives[i].begin; };
  auto size_class = [&](std::size_t i) {
    int bits = 0;
    for (std::size_t v = lives[i].size; v > 1; v >>= 1) ++bits;
    return bits;
  };
  std::vector<std::size_t> by_size(lives.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) {
    if (lives[a].size != lives[b].size) return lives[a].size > lives[b].size;
    return duration(a) > duration(b);
  });
  std::vector<std::size_t> by_class_time = by_size;
  std::stable_sort(by_class_time.begin(), by_class_time.end(), [&](std::size_t a, std::size_t b) {
    if (size_class(a) != size_class(b)) return size_class(a) > size_class(b);
    return lives[a].begin < lives[b].begin;
  });
  std::vector<std::size_t> by_class_lifetime = by_size;
  std::stable_sort(by_class_lifetime.begin(), by_class_lifetime.end(),
                   [&](std::size_t a, std::size_t b) {
                     if (size_class(a) != size_class(b)) return size_class(a) > size_class(b);
                     return duration(a) > duration(b);
                   });
  std::vector<std::size_t> by_area = by_size;
  std::stable_sort(by_area.begin(), by_area.end(), [&](std::size_t a, std::size_t b) {
    auto area = [&](std::size_t i) {
      return static_cast<double>(lives[i].size) * static_cast<double>(duration(i));
    };
    return area(a) > area(b);
  });
  // Tightest-gap trials scan every placed block; on large traces only the lowest-gap trials
  // run, which keeps 10^4 allocations to a few hundred milliseconds.
  std::vector<fit> rules{fit::lowest};
  if (lives.size() <= 4096) rules.push_back(fit::tightest);
  std::size_t best = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> offsets;
  for (auto const* order : {&by_class_time, &by_class_lifetime, &by_size, &by_area}) {
    for (fit rule : rules) {
      std::size_t const slab = place(lives, *order, rule, offsets);
      if (slab < best) {
        best = slab;
        plan.offsets.swap(offsets);
      }
      if (best == plan.peak_live_bytes) break;  // optimal: nothing left to gain
    }
    if (best == plan.peak_live_bytes) break;
  }
  plan.slab_bytes = best;
  return plan;
}

void verify_plan(allocation_trace const& trace, allocation_plan const& plan) {
  std::size_t const n = trace.allocation_count();
  if (plan.offsets.size() != n || plan.sizes.size() != n) {
    throw error{"verify_plan: the plan covers " + std::to_string(plan.offsets.size()) +
                " allocations, the trace " + std::to_string(n) +
                ": it was not made from this trace"};
  }
  if (plan.alignment == 0 || (plan.alignment & (plan.alignment - 1)) != 0) {
    throw error{"verify_plan: the plan's alignment " + std::to_string(plan.alignment) +
                " is not a power of two"};
  }
  auto name = [](std::size_t id) { return "allocation #" + std::to_string(id); };
  std::map<std::size_t, std::size_t> live;  // offset -> id
  for (auto const& e : trace.events()) {
    std::size_t const offset = plan.offsets[e.id];
    if (e.what == trace_event::kind::deallocate) {
      live.erase(offset);
      continue;
    }
    std::size_t const size = plan.sizes[e.id];
    if (offset % plan.alignment != 0) {
      throw error{"verify_plan: " + name(e.id) + " at offset " + std::to_string(offset) +
                  " is misaligned (alignment " + std::to_string(plan.alignment) + ")"};
    }
    if (size < e.bytes) {
      throw error{"verify_plan: " + name(e.id) + " gets " + std::to_string(size) +
                  " bytes but asked for " + std::to_string(e.bytes)};
    }
    if (offset > plan.slab_bytes || size > plan.slab_bytes - offset) {
      throw error{"verify_plan: " + name(e.id) + " at offset " + std::to_string(offset) + " (" +
                  std::to_string(size) + " bytes) ends past the slab of " +
                  std::to_string(plan.slab_bytes) + " bytes"};
    }
    auto overlap = [&](std::size_t other) {
      throw error{"verify_plan: " + name(e.id) + " and " + name(other) +
                  " are alive at once and overlap (offsets " + std::to_string(offset) + " and " +
                  std::to_string(plan.offsets[other]) + ")"};
    };
    auto next = live.lower_bound(offset);
    if (next != live.end() && next->first < offset + size) overlap(next->second);
    if (next != live.begin()) {
      auto previous = std::prev(next);
      if (previous->first + plan.sizes[previous->second] > offset) overlap(previous->second);
    }
    live.emplace(offset, e.id);
  }
}

planned_sequence::planned_sequence(allocation_trace trace, allocation_plan plan)
    : trace_{std::move(trace)}, plan_{std::move(plan)} {
  GRAPHSTEP_EXPECTS(plan_.offsets.size() == trace_.allocation_count() &&
                        plan_.sizes.size() == trace_.allocation_count(),
                    "planned_sequence: the plan covers " + std::to_string(plan_.offsets.size()) +
                        " allocations, the trace " + std::to_string(trace_.allocation_count()) +
                        ": make the plan with plan_allocations from this trace");
  // A plan edited by hand or made from another trace would hand out overlapping blocks.
  try {
    verify_plan(trace_, plan_);
  } catch (usage_error const&) {
    throw;
  } catch (error const& e) {
    GRAPHSTEP_EXPECTS(false, std::string{"planned_sequence: the plan does not fit the trace ("} +
                                 e.what() + "); make it with plan_allocations from this trace");
  }
}

std::size_t planned_sequence::next_allocate(std::size_t bytes) {
  std::size_t const id = next_;
  GRAPHSTEP_EXPECTS(id < trace_.allocation_count(),
                    "planned allocation #" + std::to_string(id) + " (" + std::to_string(bytes) +
                        " bytes) is one more than the " +
                        std::to_string(trace_.allocation_count()) +
                        " the warm-up step made: the captured step allocates differently");
  GRAPHSTEP_EXPECTS(bytes == trace_.bytes_of(id),
                    "planned allocation #" + std::to_string(id) + " asks for " +
                        std::to_string(bytes) + " bytes, but allocation #" + std::to_string(id) +
                        " of the warm-up step asked for " + std::to_string(trace_.bytes_of(id)) +
                        ": the captured step allocates differently");
  std::size_t const offset = plan_.offsets[id];
  std::size_t const size = plan_.sizes[id];
  auto next = live_.lower_bound(offset);
  std::size_t conflict = trace_.allocation_count();
  if (next != live_.end() && next->first < offset + size) conflict = next->second;
  if (next != live_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + plan_.sizes[previous->second] > offset) conflict = previous->second;
  }
  GRAPHSTEP_EXPECTS(conflict == trace_.allocation_count(),
                    "planned allocation #" + std::to_string(id) + " would overlap allocation #" +
                        std::to_string(conflict) +
                        ", which the warm-up step had freed by then but the captured step still "
                        "holds: free blocks in the same order as the warm-up");
  live_.emplace(offset, id);
  ++next_;
  return offset;
}

void planned_sequence::deallocate(std::size_t offset) {
  auto found = live_.find(offset);
  GRAPHSTEP_EXPECTS(found != live_.end(), "planned sequence: offset " + std::to_string(offset) +
                                              " is not a live planned block (double free, or a "
                                              "pointer from elsewhere)");
  live_.erase(found);
}

}  // namespace graphstep::memory
