// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
  std::size_t first;  // allocation time: the allocation's id (ids follow allocation order)
  std::size_t last;   // the last allocation time at which it is alive
  std::size_t size;   // aligned
};

// Two allocations are alive at once exactly when their allocation-time intervals
// [first, last] meet: intervals of event indices meet when the later allocation's event falls
// inside the earlier one's lifetime, and allocation times keep only those events.
std::vector<lifetime> lifetimes_of(allocation_trace const& trace, std::size_t alignment) {
  GRAPHSTEP_EXPECTS(
      alignment > 0 && (alignment & (alignment - 1)) == 0,
      "plan_allocations: the alignment must be a power of two, not " + std::to_string(alignment));
  auto const& events = trace.events();
  std::size_t const n = trace.allocation_count();
  std::vector<lifetime> lives(n, {0, events.size(), 0, n == 0 ? 0 : n - 1, 0});
  std::size_t total = 0;
  std::size_t allocated = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    auto const& e = events[i];
    if (e.what == trace_event::kind::allocate) {
      std::size_t const limit = std::numeric_limits<std::size_t>::max() - total;
      GRAPHSTEP_EXPECTS(e.bytes <= limit - std::min(limit, alignment - 1),
                        "plan_allocations: allocation #" + std::to_string(e.id) + " of " +
                            std::to_string(e.bytes) +
                            " bytes makes the trace larger than any address space");
      lives[e.id].begin = i;
      lives[e.id].first = allocated++;
      lives[e.id].size = (e.bytes + alignment - 1) / alignment * alignment;
      total += lives[e.id].size;
    } else {
      lives[e.id].end = i;
      lives[e.id].last = allocated - 1;
    }
  }
  return lives;
}

constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

// Work budgets, per allocation and per level of a tree over n allocation times (n log2 n in
// all): nodes visited by the searches of a skyline trial; spans and sets visited by all the
// gap trials together, with a floor that lets small traces run every gap trial.
constexpr std::size_t skyline_budget = 64;
constexpr std::size_t gap_budget = 6;
constexpr std::size_t gap_budget_floor = std::size_t{1} << 22;

// ---- Best fit in allocation order -----------------------------------------------------------

// Replays the trace as an allocator would: each allocation goes to the smallest hole between
// live blocks that holds it (the lowest of equals), else on top of the highest live block.
// O(n log n). Returns the slab size.
std::size_t best_fit_in_order(allocation_trace const& trace, std::vector<lifetime> const& lives,
                              std::vector<std::size_t>& offsets) {
  offsets.assign(lives.size(), 0);
  std::map<std::size_t, std::size_t> live;              // offset -> end, of the live blocks
  std::set<std::pair<std::size_t, std::size_t>> holes;  // size, offset: gaps under a live block
  std::size_t slab = 0;
  for (auto const& e : trace.events()) {
    std::size_t const size = lives[e.id].size;
    if (e.what == trace_event::kind::allocate) {
      std::size_t offset = live.empty() ? 0 : std::prev(live.end())->second;
      auto const hole = holes.lower_bound({size, 0});
      if (hole != holes.end()) {
        offset = hole->second;
        if (hole->first > size) holes.emplace(hole->first - size, offset + size);
        holes.erase(hole);
      }
      live.emplace(offset, offset + size);
      offsets[e.id] = offset;
      slab = std::max(slab, offset + size);
    } else {
      auto const block = live.find(offsets[e.id]);
      std::size_t const below = block == live.begin() ? 0 : std::prev(block)->second;
      auto const above = std::next(block);
      if (block->first > below) holes.erase({block->first - below, below});
      if (above != live.end()) {
        if (above->first > block->second) {
          holes.erase({above->first - block->second, block->second});
        }
        holes.emplace(above->first - below, below);
      }
      live.erase(block);
    }
  }
  return slab;
}

// ---- Skyline placement ---------------------------------------------------------------------

// The blocks not yet placed, by allocation time (a block is allocated at the time of its id):
// finds the best one, by rank, whose lifetime lies inside a range of times. A segment tree over
// ids keeping, for the unplaced blocks below each node, the least and greatest last time and the
// best rank. A search walks down only into nodes that may hold a better block that fits.
class unplaced_blocks {
 public:
  // rank[id] > 0, higher is better.
  unplaced_blocks(std::vector<lifetime> const& lives, std::vector<std::size_t> const& rank) {
    while (leaves_ < lives.size()) leaves_ *= 2;
    nodes_.assign(2 * leaves_, empty);
    for (std::size_t id = 0; id < lives.size(); ++id) {
      nodes_[leaves_ + id] = {lives[id].last, lives[id].last, rank[id]};
    }
    for (std::size_t v = leaves_; v-- > 1;) pull(v);
  }

  // Nodes visited by best_inside so far.
  [[nodiscard]] std::size_t visits() const noexcept { return visits_; }

  void erase(std::size_t id) {
    std::size_t v = leaves_ + id;
    nodes_[v] = empty;
    for (v /= 2; v > 0; v /= 2) pull(v);
  }

  // The best block allocated in [first, last] and alive no later than `last`, or none.
  std::size_t best_inside(std::size_t first, std::size_t last) {
    std::size_t best_rank = 0;
    std::size_t best_node = 0;
    stack_.clear();
    stack_.push_back({1, 0, leaves_});
    while (!stack_.empty()) {
      auto const [v, lo, hi] = stack_.back();
      stack_.pop_back();
      ++visits_;
      node const& at = nodes_[v];
      if (hi <= first || lo > last || at.min_last > last || at.max_rank <= best_rank) continue;
      if (lo >= first && at.max_last <= last) {  // every block below fits
        best_rank = at.max_rank;
        best_node = v;
        continue;
      }
      if (hi - lo == 1) continue;
      std::size_t const mid = lo + (hi - lo) / 2;
      range const left{2 * v, lo, mid};
      range const right{2 * v + 1, mid, hi};
      bool const left_first = nodes_[2 * v].max_rank >= nodes_[2 * v + 1].max_rank;
      stack_.push_back(left_first ? right : left);  // the more promising child comes off first
      stack_.push_back(left_first ? left : right);
    }
    if (best_rank == 0) return none;
    std::size_t v = best_node;
    while (v < leaves_) v = nodes_[2 * v].max_rank == nodes_[v].max_rank ? 2 * v : 2 * v + 1;
    return v - leaves_;
  }

 private:
  struct node {
    std::size_t min_last;
    std::size_t max_last;
    std::size_t max_rank;  // 0: no unplaced block below
  };
  struct range {
    std::size_t v;
    std::size_t lo;
    std::size_t hi;
  };
  static constexpr node empty{none, 0, 0};

  void pull(std::size_t v) {
    node const& l = nodes_[2 * v];
    node const& r = nodes_[2 * v + 1];
    nodes_[v] = {std::min(l.min_last, r.min_last), std::max(l.max_last, r.max_last),
                 std::max(l.max_rank, r.max_rank)};
  }

  std::size_t leaves_{1};
  std::vector<node> nodes_;
  std::vector<range> stack_;
  std::size_t visits_{};
};

// Skyline placement: the blocks placed so far pile up into a skyline, a height over allocation
// times, and no block is ever put under it. Take the lowest segment of the skyline (the leftmost
// of equals) and put on it the best unplaced block, by `rank`, whose lifetime lies inside the
// segment; when none does, raise the segment to its lower neighbour. Choosing the block for the
// place, rather than the place for the block, leaves few holes under the skyline on training
// steps. Each step places a block or removes a segment, so there are at most 3n steps, each
// O(log n) plus the search of `unplaced_blocks`. Returns the slab size, or none once the
// searches have visited `visit_limit` nodes.
std::size_t skyline_place(std::vector<lifetime> const& lives, std::vector<std::size_t> const& rank,
                          std::size_t visit_limit, std::vector<std::size_t>& offsets) {
  std::size_t const n = lives.size();
  offsets.assign(n, 0);
  unplaced_blocks blocks{lives, rank};
  // Segments [start, seg_end[start]) of height seg_height[start], keyed by their start time;
  // adjacent segments differ in height.
  std::vector<std::size_t> seg_end(n);
  std::vector<std::size_t> seg_height(n);
  std::vector<std::size_t> seg_previous(n);
  std::vector<bool> seg_alive(n, false);
  using entry = std::pair<std::size_t, std::size_t>;  // height, start
  std::priority_queue<entry, std::vector<entry>, std::greater<>> lowest;
  auto make = [&](std::size_t start, std::size_t end, std::size_t height, std::size_t previous) {
    seg_alive[start] = true;
    seg_end[start] = end;
    seg_height[start] = height;
    seg_previous[start] = previous;
    if (end < n) seg_previous[end] = start;
    lowest.emplace(height, start);
  };
  make(0, n, 0, none);
  std::size_t slab = 0;
  for (std::size_t left = n; left > 0;) {
    auto const [height, start] = lowest.top();
    lowest.pop();
    if (!seg_alive[start] || seg_height[start] != height) continue;  // an outdated entry
    std::size_t const end = seg_end[start];
    std::size_t const previous = seg_previous[start];
    std::size_t const id = blocks.best_inside(start, end - 1);
    if (blocks.visits() > visit_limit) return none;
    if (id == none) {  // raise the segment to its lower neighbour and merge
      std::size_t const left_height = previous == none ? none : seg_height[previous];
      std::size_t const right_height = end == n ? none : seg_height[end];
      std::size_t const raised = std::min(left_height, right_height);
      if (raised == none) return none;  // unreachable: every block fits inside [0, n)
      std::size_t const merged_end = right_height == raised ? seg_end[end] : end;
      if (right_height == raised) seg_alive[end] = false;
      if (left_height == raised) {
        seg_alive[start] = false;
        seg_end[previous] = merged_end;
        if (merged_end < n) seg_previous[merged_end] = previous;
      } else {
        make(start, merged_end, raised, previous);
      }
      continue;
    }
    lifetime const& me = lives[id];
    blocks.erase(id);
    --left;
    offsets[id] = height;
    std::size_t const top = height + me.size;
    slab = std::max(slab, top);
    // The segment becomes: [start, first) at `height`, [first, last] at `top`, and
    // (last, end) at `height`; the middle merges with a neighbour of its height.
    seg_alive[start] = false;
    std::size_t before = previous;
    if (me.first > start) {
      make(start, me.first, height, previous);
      before = start;
    }
    std::size_t middle_end = me.last + 1;
    if (middle_end == end && end < n && seg_height[end] == top) {
      seg_alive[end] = false;
      middle_end = seg_end[end];
    }
    std::size_t middle = me.first;
    if (before == previous && previous != none && seg_height[previous] == top) {
      middle = previous;
      seg_end[previous] = middle_end;
      if (middle_end < n) seg_previous[middle_end] = previous;
    } else {
      make(middle, middle_end, top, before);
    }
    if (me.last + 1 < end) make(me.last + 1, end, height, middle);
  }
  return slab;
}

// ---- Lowest-gap and tightest-gap placement --------------------------------------------------

// Offsets [begin, end) in a slab.
struct span {
  std::size_t begin;
  std::size_t end;
};

// The offsets some blocks occupy: their spans merged, so disjoint, not touching, and sorted.
using span_set = std::vector<span>;

// Adds `s` to `set`, merging it with the spans it overlaps or touches. Returns the number of
// spans moved in the vector.
std::size_t add_span(span_set& set, span s) {
  if (set.empty() || set.back().end < s.begin) {  // blocks mostly stack upwards
    set.push_back(s);
    return 0;
  }
  auto first =
      std::partition_point(set.begin(), set.end(), [&](span const& x) { return x.end < s.begin; });
  auto last = first;
  while (last != set.end() && last->begin <= s.end) ++last;
  auto const moved = static_cast<std::size_t>(set.end() - last);
  if (first == last) {
    set.insert(first, s);
    return moved;
  }
  first->begin = std::min(first->begin, s.begin);
  first->end = std::max(std::prev(last)->end, s.end);
  set.erase(std::next(first), last);
  return moved;
}

enum class fit : std::uint8_t { lowest, tightest };

// The blocks placed so far, indexed by lifetime, to answer: where is the lowest (or the
// tightest) gap that holds `size` bytes among the blocks alive at some time of [first, last]?
//
// A segment tree over allocation times. A block is stored at the O(log n) nodes whose ranges
// partition its lifetime (`covering_`), and every node keeps the union of the blocks stored in
// its subtree (`within_`). The blocks alive at some time of [first, last] are those of the
// `within_` sets of the nodes partitioning [first, last], and of the `covering_` sets of those
// nodes' ancestors: a block meets [first, last] exactly when one of its nodes lies under, or
// above, one of these. A query merges these O(log n) span sets in offset order up to the
// answer, so it costs O(log n) per span it passes; `work()` counts the spans and sets visited
// (and a quarter of the spans moved by insertions).
class lifetime_index {
 public:
  explicit lifetime_index(std::size_t times) {
    while (leaves_ < times) leaves_ *= 2;
    covering_.resize(2 * leaves_);
    within_.resize(2 * leaves_);
  }

  void clear() {
    for (std::size_t node : used_) {
      covering_[node].clear();
      within_[node].clear();
    }
    used_.clear();
  }

  [[nodiscard]] std::size_t work() const noexcept { return work_; }

  void add(std::size_t first, std::size_t last, span s) {
    auto add_within = [&](std::size_t node) {
      if (within_[node].empty()) used_.push_back(node);
      work_ += 1 + add_span(within_[node], s) / 4;
    };
    visit(
        first, last,
        [&](std::size_t node) {
          work_ += add_span(covering_[node], s) / 4;
          add_within(node);
        },
        add_within);
  }

  // The offset for a block of `size` bytes alive over [first, last]: the lowest gap that holds
  // it (fit::lowest) or the smallest such gap, lowest first (fit::tightest), among the blocks
  // alive at some time of [first, last]; else the top of those blocks.
  std::size_t find(std::size_t first, std::size_t last, std::size_t size, fit rule) {
    heap_.clear();
    auto take = [&](span_set const& set) {
      if (!set.empty()) heap_.push_back({set.front().begin, set.data(), set.data() + set.size()});
    };
    visit(
        first, last, [&](std::size_t node) { take(within_[node]); },
        [&](std::size_t node) { take(covering_[node]); });
    work_ += heap_.size();
    // A min-heap of the sets by the begin of their next span.
    auto later = [](cursor const& a, cursor const& b) { return a.begin > b.begin; };
    std::make_heap(heap_.begin(), heap_.end(), later);
    std::size_t best = none;
    std::size_t best_gap = none;
    std::size_t offset = 0;  // the end of the spans passed so far
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      cursor c = heap_.back();
      heap_.pop_back();
      ++work_;
      span const next = *c.at;
      if (next.begin > offset) {  // a gap: no set holds [offset, next.begin)
        std::size_t const gap = next.begin - offset;
        if (gap >= size && gap < best_gap) {
          best = offset;
          best_gap = gap;
          if (rule == fit::lowest || gap == size) return best;
        }
      }
      offset = std::max(offset, next.end);
      ++c.at;
      if (c.at != c.end && c.at->end <= offset) {
        c.at = std::partition_point(c.at, c.end, [&](span const& x) { return x.end <= offset; });
      }
      if (c.at != c.end) {
        c.begin = c.at->begin;
        heap_.push_back(c);
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
    return best == none ? offset : best;  // else the top of every block met
  }

 private:
  struct cursor {
    std::size_t begin;  // of *at
    span const* at;
    span const* end;
  };

  // Calls `partition(node)` for the nodes whose ranges partition [first, last], and
  // `ancestor(node)` for every node above them (they reach outside [first, last]).
  template <class Partition, class Ancestor>
  void visit(std::size_t first, std::size_t last, Partition&& partition,
             Ancestor&& ancestor) const {
    for (std::size_t l = first + leaves_, r = last + leaves_ + 1; l < r; l >>= 1U, r >>= 1U) {
      if ((l & 1U) != 0) partition(l++);
      if ((r & 1U) != 0) partition(--r);
    }
    // The ancestors are the nodes above leaf `first` or leaf `last` that reach outside.
    std::size_t a = first + leaves_;
    std::size_t b = last + leaves_;
    for (unsigned height = 1; a > 1; ++height) {
      a >>= 1U;
      b >>= 1U;
      bool const starts_before = (a << height) - leaves_ < first;
      bool const ends_after = ((b + 1) << height) - leaves_ - 1 > last;
      if (a == b) {
        if (starts_before || ends_after) ancestor(a);
        continue;
      }
      if (starts_before) ancestor(a);  // otherwise a lies inside [first, last]
      if (ends_after) ancestor(b);
    }
  }

  std::size_t leaves_{1};
  std::vector<span_set> covering_;
  std::vector<span_set> within_;
  std::vector<std::size_t> used_;  // nodes with a non-empty within_ set
  std::vector<cursor> heap_;       // scratch of find
  std::size_t work_{};
};

// Places allocations in `order`, each where `index.find` says. Returns the slab size; a size at
// least `give_up_at` as soon as the slab reaches it (the trial cannot beat a better one); or
// none once the index's work passes `work_limit`.
std::size_t place(std::vector<lifetime> const& lives, std::vector<std::size_t> const& order,
                  fit rule, lifetime_index& index, std::vector<std::size_t>& offsets,
                  std::size_t give_up_at, std::size_t work_limit) {
  index.clear();
  offsets.assign(lives.size(), 0);
  std::size_t slab = 0;
  for (std::size_t id : order) {
    lifetime const& me = lives[id];
    std::size_t const offset = index.find(me.first, me.last, me.size, rule);
    offsets[id] = offset;
    slab = std::max(slab, offset + me.size);
    if (slab >= give_up_at) return slab;
    if (index.work() > work_limit) return none;
    index.add(me.first, me.last, {offset, offset + me.size});
  }
  return slab;
}

}  // namespace

allocation_plan plan_allocations(allocation_trace const& trace, std::size_t alignment) {
  std::vector<lifetime> const lives = lifetimes_of(trace, alignment);
  std::size_t const n = lives.size();
  allocation_plan plan;
  plan.alignment = alignment;
  plan.sizes.resize(n);
  for (std::size_t i = 0; i < n; ++i) plan.sizes[i] = lives[i].size;
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
  plan.offsets.assign(n, 0);
  if (n == 0) return plan;

  // Trials, cheapest first; the smallest slab wins, and a slab at the lower bound ends the
  // search. Skyline and gap trials stop when they pass their budget of work (then they count
  // for nothing), so that no trace costs more than O(n log^2 n) (see the header).
  std::size_t log_n = 1;
  while ((std::size_t{1} << log_n) < n) ++log_n;
  std::vector<std::size_t> offsets;
  auto keep = [&](std::size_t slab) {
    if (slab < plan.slab_bytes) {
      plan.slab_bytes = slab;
      plan.offsets.swap(offsets);
    }
    return plan.slab_bytes == plan.peak_live_bytes;  // optimal: nothing left to gain
  };
  plan.slab_bytes = best_fit_in_order(trace, lives, plan.offsets);
  if (plan.slab_bytes == plan.peak_live_bytes) return plan;

  // Skyline trials: blocks ranked by area (size x allocation times alive), then by power-of-two
  // size class and lifetime; ties go to the earlier allocation.
  auto lifetime_of = [&](std::size_t i) { return lives[i].last - lives[i].first; };
  auto size_class = [&](std::size_t i) {
    int bits = 0;
    for (std::size_t v = lives[i].size; v > 1; v >>= 1) ++bits;
    return bits;
  };
  auto area = [&](std::size_t i) {
    return static_cast<double>(lives[i].size) * static_cast<double>(lifetime_of(i) + 1);
  };
  auto ranks = [&](auto better) {
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), better);
    std::vector<std::size_t> rank(n);
    for (std::size_t i = 0; i < n; ++i) rank[order[i]] = n - i;
    return rank;
  };
  std::size_t const visit_limit = skyline_budget * n * log_n;
  std::vector<std::size_t> const by_area =
      ranks([&](std::size_t a, std::size_t b) { return area(a) > area(b); });
  if (keep(skyline_place(lives, by_area, visit_limit, offsets))) return plan;
  std::vector<std::size_t> const by_class_and_lifetime = ranks([&](std::size_t a, std::size_t b) {
    if (size_class(a) != size_class(b)) return size_class(a) > size_class(b);
    return lifetime_of(a) > lifetime_of(b);
  });
  if (keep(skyline_place(lives, by_class_and_lifetime, visit_limit, offsets))) return plan;

  // Gap trials, in orders best first on generated training steps: by power-of-two size class
  // (big classes first) and, within a class, by allocation time or by lifetime; then plain
  // largest-first and largest-area-first. Coarse classes let blocks of similar size that live
  // at different times stack into the same column, which plain largest-first misses. The
  // lifetimes here count events.
  auto duration = [&](std::size_t i) { return lives[i].end - lives[i].begin; };
  std::vector<std::size_t> by_size(n);
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
  std::vector<std::size_t> by_class_duration = by_size;
  std::stable_sort(by_class_duration.begin(), by_class_duration.end(),
                   [&](std::size_t a, std::size_t b) {
                     if (size_class(a) != size_class(b)) return size_class(a) > size_class(b);
                     return duration(a) > duration(b);
                   });
  std::vector<std::size_t> by_event_area = by_size;
  std::stable_sort(by_event_area.begin(), by_event_area.end(), [&](std::size_t a, std::size_t b) {
    auto event_area = [&](std::size_t i) {
      return static_cast<double>(lives[i].size) * static_cast<double>(duration(i));
    };
    return event_area(a) > event_area(b);
  });
  std::vector<fit> rules{fit::lowest};
  if (n <= 4096) rules.push_back(fit::tightest);
  std::size_t const work_limit = std::max(gap_budget_floor, gap_budget * n * log_n);
  lifetime_index index{n};
  for (auto const* order : {&by_class_time, &by_class_duration, &by_size, &by_event_area}) {
    for (fit rule : rules) {
      std::size_t const slab =
          place(lives, *order, rule, index, offsets, plan.slab_bytes, work_limit);
      if (slab == none) return plan;  // out of budget
      if (keep(slab)) return plan;
    }
  }
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
