// Randomized properties of the allocator core and the planner, with fixed seeds: invariants
// after every operation, live blocks never overlap, eager blocks never land on memory a live
// graph touched, and no plan ever overlaps two live allocations.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "memory/detail/block_allocator.hpp"

namespace gm = graphstep::memory;

namespace {

struct live_block {  // what the test expects of a block it holds
  std::size_t size;
  gm::detail::graph_id owner;
  gm::detail::stream_id stream;
};

// Address ranges touched by each live graph, to check eager allocations against.
using touched_ranges =
    std::map<gm::detail::graph_id, std::vector<std::pair<std::uintptr_t, std::size_t>>>;

void run_random_operations(std::uint32_t seed, bool segments) {
  std::mt19937 rng{seed};
  gm::detail::block_allocator alloc{256};
  std::uintptr_t const base = 0x40000000;
  std::size_t grown = 0;
  auto grow = [&](std::size_t bytes) {
    if (segments) {
      alloc.add_region(base + grown * 16, bytes);  // far apart, never adjacent
    } else if (grown == 0) {
      alloc.add_region(base, bytes);
    } else if (rng() % 2 == 0) {
      // Virtual-memory growth in two uneven steps: the first may end mid-block.
      std::size_t const first = bytes / 3 + 100;
      alloc.extend_region(base, first);
      alloc.extend_region(base, bytes - first);
    } else {
      alloc.extend_region(base, bytes);
    }
    grown += bytes;
  };
  grow(std::size_t{1} << 20);
  std::map<std::uintptr_t, live_block> live;
  touched_ranges touched;
  std::set<gm::detail::graph_id> graphs{1, 2, 3};
  gm::detail::graph_id next_graph = 4;
  std::uniform_int_distribution<int> op{0, 99};
  std::uniform_int_distribution<std::size_t> small{1, 4096};
  std::uniform_int_distribution<std::size_t> large{4096, 256 * 1024};

  for (int step = 0; step < 3000; ++step) {
    int const what = op(rng);
    gm::detail::stream_id const stream = 1 + rng() % 3;
    if (what < 50) {
      std::size_t const bytes = (rng() % 4 == 0) ? large(rng) : small(rng);
      gm::detail::graph_id owner = gm::detail::no_graph;
      if (rng() % 2 == 0) {
        auto it = graphs.begin();
        std::advance(it, rng() % graphs.size());
        owner = *it;
      }
      auto got = alloc.allocate(bytes, stream, owner);
      if (!got) {
        grow(std::max<std::size_t>(bytes + 256, std::size_t{1} << 20) / 256 * 256 + 256);
        got = alloc.allocate(bytes, stream, owner);
        ASSERT_TRUE(got) << "no block after growing, step " << step;
      }
      ASSERT_GE(got->size, bytes);
      ASSERT_EQ(got->address % 256, 0U);
      // No overlap with any live block.
      auto next = live.lower_bound(got->address);
      if (next != live.end()) {
        ASSERT_GE(next->first, got->address + got->size);
      }
      if (next != live.begin()) {
        auto previous = std::prev(next);
        ASSERT_LE(previous->first + previous->second.size, got->address);
      }
      if (owner == gm::detail::no_graph) {
        for (auto const& [g, ranges] : touched) {
          for (auto const& [at, size] : ranges) {
            ASSERT_FALSE(got->address < at + size && at < got->address + got->size)
                << "eager block on memory of live graph " << g << ", step " << step;
          }
        }
      } else {
        touched[owner].emplace_back(got->address, got->size);
      }
      live.emplace(got->address, live_block{got->size, owner, stream});
    } else if (what < 85 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      // Usually freed on the stream that allocated it, sometimes on another.
      alloc.deallocate(it->first, rng() % 5 == 0 ? stream : it->second.stream);
      live.erase(it);
    } else if (what < 93) {
      alloc.release_stream(stream);
    } else if (what < 97 && graphs.size() > 1) {
      auto it = graphs.begin();
      std::advance(it, rng() % graphs.size());
      gm::detail::graph_id const gone = *it;
      alloc.release_graph(gone);
      graphs.erase(it);
      touched.erase(gone);
      for (auto l = live.begin(); l != live.end();) {
        l = l->second.owner == gone ? live.erase(l) : std::next(l);
      }
      graphs.insert(next_graph++);
    }
    alloc.check_invariants();
    std::size_t in_use = 0;
    std::map<gm::detail::graph_id, std::size_t> by_graph;
    for (auto const& [at, b] : live) {
      in_use += b.size;
      if (b.owner != gm::detail::no_graph) by_graph[b.owner] += b.size;
    }
    ASSERT_EQ(alloc.stats().bytes_in_use, in_use) << "step " << step;
    ASSERT_EQ(alloc.stats().region_bytes, grown) << "step " << step;
    for (gm::detail::graph_id g : graphs) {
      ASSERT_EQ(alloc.bytes_in_use_by(g), by_graph[g]) << "graph " << g << ", step " << step;
    }
  }
}

}  // namespace

TEST(block_allocator_property, random_operations_keep_every_invariant_growing_region) {
  for (std::uint32_t seed : {1U, 2U, 3U, 4U}) run_random_operations(seed, false);
}

TEST(block_allocator_property, random_operations_keep_every_invariant_segments) {
  for (std::uint32_t seed : {5U, 6U, 7U, 8U}) run_random_operations(seed, true);
}

TEST(allocation_plan_property, random_traces_never_overlap) {
  std::mt19937 rng{42};
  for (int trial = 0; trial < 300; ++trial) {
    gm::allocation_trace trace;
    std::vector<std::size_t> open;
    int const events = 1 + static_cast<int>(rng() % 200);
    for (int e = 0; e < events; ++e) {
      if (open.empty() || rng() % 3 != 0) {
        std::size_t const bytes = 1 + rng() % (rng() % 2 ? 1000 : 200000);
        open.push_back(trace.record_allocate(bytes));
      } else {
        std::size_t const pick = rng() % open.size();
        trace.record_deallocate(open[pick]);
        open.erase(open.begin() + static_cast<long>(pick));
      }
    }
    std::size_t const alignment = std::size_t{1} << (rng() % 13);  // 1 B .. 4 KiB
    auto const plan = gm::plan_allocations(trace, alignment);
    ASSERT_NO_THROW(gm::verify_plan(trace, plan)) << "trial " << trial;
    ASSERT_GE(plan.slab_bytes, plan.peak_live_bytes);
    // Replaying the trace through a planned sequence hands out exactly the plan's offsets.
    gm::planned_sequence sequence{trace, plan};
    for (auto const& e : trace.events()) {
      if (e.what == gm::trace_event::kind::allocate) {
        ASSERT_EQ(sequence.next_allocate(e.bytes), plan.offsets[e.id]) << "trial " << trial;
      } else {
        sequence.deallocate(plan.offsets[e.id]);
      }
    }
    ASSERT_TRUE(sequence.complete());
  }
}
