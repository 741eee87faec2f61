#include <graphstep/error.hpp>
#include <graphstep/memory/allocation_plan.hpp>

#include <algorithm>
#include <limits>
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
  GRAPHSTEP_EXPECTS(id < bytes_.size(), "allocation_trace: allocation #" + std::to_string(id) +
                                            " was never recorded");
  GRAPHSTEP_EXPECTS(!freed_[id], "allocation_trace: allocation #" + std::to_string(id) +
                                     " was freed twice");
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
  GRAPHSTEP_EXPECTS(alignment > 0 && (alignment & (alignment - 1)) == 0,
                    "plan_allocations: the alignment must be a power of two");
  auto const& events = trace.events();
  std::vector<lifetime> lives(trace.allocation_count(), {0, events.size(), 0});
  for (std::size_t i = 0; i < events.size(); ++i) {
    auto const& e = events[i];
    if (e.what == trace_event::kind::allocate) {
      GRAPHSTEP_EXPECTS(e.bytes <= std::numeric_limits<std::size_t>::max() - alignment,
                        "plan_allocations: allocation #" + std::to_string(e.id) +
                            " is larger than any address space");
      lives[e.id].begin = i;
      lives[e.id].size = (e.bytes + alignment - 1) / alignment * alignment;
    } else {
      lives[e.id].end = i;
    }
  }
  return lives;
}

bool overlap_in_time(lifetime const& a, lifetime const& b) {
  return a.begin < b.end && b.begin < a.end;
}

// Places allocations in `order`; each goes to the lowest fitting gap (first_fit) or the
// smallest fitting gap (best fit) among blocks already placed whose lifetimes meet its own.
std::size_t place(std::vector<lifetime> const& lives, std::vector<std::size_t> const& order,
                  bool first_fit, std::vector<std::size_t>& offsets) {
  offsets.assign(lives.size(), 0);
  std::vector<std::size_t> placed;
  placed.reserve(lives.size());
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // (offset, end) of conflicting blocks
  std::size_t slab = 0;
  for (std::size_t id : order) {
    lifetime const& me = lives[id];
    busy.clear();
    for (std::size_t other : placed) {
      if (overlap_in_time(me, lives[other])) {
        busy.emplace_back(offsets[other], offsets[other] + lives[other].size);
      }
    }
    std::sort(busy.begin(), busy.end());
    std::size_t best_offset = std::numeric_limits<std::size_t>::max();
    std::size_t best_gap = std::numeric_limits<std::size_t>::max();
    std::size_t cursor = 0;
    for (auto const& [begin, end] : busy) {
      if (begin > cursor) {
        std::size_t const gap = begin - cursor;
        if (gap >= me.size && (first_fit ? best_offset == std::numeric_limits<std::size_t>::max()
                                         : gap < best_gap)) {
          best_offset = cursor;
          best_gap = gap;
        }
      }
      cursor = std::max(cursor, end);
    }
    if (best_offset == std::numeric_limits<std::size_t>::max()) best_offset = cursor;
    offsets[id] = best_offset;
    slab = std::max(slab, best_offset + me.size);
    placed.push_back(id);
  }
  return slab;
}

}  // namespace

allocation_plan plan_allocations(allocation_trace const& trace, std::size_t alignment) {
  std::vector<lifetime> const lives = lifetimes_of(trace, alignment);
  allocation_plan plan;
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
  if (lives.empty()) return plan;

  std::vector<std::size_t> by_size(lives.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) {
    if (lives[a].size != lives[b].size) return lives[a].size > lives[b].size;
    return lives[a].end - lives[a].begin > lives[b].end - lives[b].begin;
  });
  std::vector<std::size_t> by_area = by_size;
  std::stable_sort(by_area.begin(), by_area.end(), [&](std::size_t a, std::size_t b) {
    auto area = [&](std::size_t i) {
      return static_cast<double>(lives[i].size) * static_cast<double>(lives[i].end - lives[i].begin);
    };
    return area(a) > area(b);
  });
  std::size_t best = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> offsets;
  // Each trial costs O(n^2) in the worst case; large traces try the size order only.
  std::vector<std::vector<std::size_t> const*> orders{&by_size};
  if (lives.size() <= 2048) orders.push_back(&by_area);
  for (auto const* order : orders) {
    for (bool first_fit : {true, false}) {
      std::size_t const slab = place(lives, *order, first_fit, offsets);
      if (slab < best) {
        best = slab;
        plan.offsets = offsets;
      }
      if (best == plan.peak_live_bytes) break;  // optimal: nothing left to gain
    }
    if (best == plan.peak_live_bytes) break;
  }
  plan.slab_bytes = best;
  return plan;
}

void verify_plan(allocation_trace const& trace, allocation_plan const& plan,
                 std::size_t alignment) {
  std::size_t const n = trace.allocation_count();
  if (plan.offsets.size() != n || plan.sizes.size() != n) {
    throw error{"verify_plan: the plan covers " + std::to_string(plan.offsets.size()) +
                " allocations, the trace " + std::to_string(n)};
  }
  std::map<std::size_t, std::size_t> live;  // offset -> id
  for (auto const& e : trace.events()) {
    std::size_t const offset = plan.offsets[e.id];
    if (e.what == trace_event::kind::deallocate) {
      live.erase(offset);
      continue;
    }
    std::size_t const size = plan.sizes[e.id];
    if (offset % alignment != 0) {
      throw error{"verify_plan: allocation #" + std::to_string(e.id) + " is misaligned"};
    }
    if (size < e.bytes || offset + size > plan.slab_bytes) {
      throw error{"verify_plan: allocation #" + std::to_string(e.id) + " does not fit the slab"};
    }
    auto next = live.lower_bound(offset);
    if (next != live.end() && next->first < offset + size) {
      throw error{"verify_plan: allocations #" + std::to_string(e.id) + " and #" +
                  std::to_string(next->second) + " are alive at once and overlap"};
    }
    if (next != live.begin()) {
      auto previous = std::prev(next);
      if (previous->first + plan.sizes[previous->second] > offset) {
        throw error{"verify_plan: allocations #" + std::to_string(e.id) + " and #" +
                    std::to_string(previous->second) + " are alive at once and overlap"};
      }
    }
    live.emplace(offset, e.id);
  }
}

planned_sequence::planned_sequence(allocation_trace trace, allocation_plan plan)
    : trace_{std::move(trace)}, plan_{std::move(plan)} {
  GRAPHSTEP_EXPECTS(plan_.offsets.size() == trace_.allocation_count() &&
                        plan_.sizes.size() == trace_.allocation_count(),
                    "planned_sequence: the plan was not made from this trace");
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
                        std::to_string(bytes) + " bytes, but allocation #" +
                        std::to_string(id) + " of the warm-up step asked for " +
                        std::to_string(trace_.bytes_of(id)) +
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
