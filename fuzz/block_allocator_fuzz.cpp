// libFuzzer target: the fuzzer's bytes drive the allocator core (regions, growth, allocations,
// frees, stream and graph releases) and the planner (plans verified, then served through a
// planned sequence). Every invariant is checked after every operation, and an eager block must
// never land on memory a live graph touched. Build and run with scripts/fuzz.sh.

#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <iterator>
#include <map>
#include <vector>

#include "fuzz_input.hpp"
#include "memory/detail/block_allocator.hpp"

namespace gm = graphstep::memory;

namespace {

using graphstep::fuzz::fail;
using graphstep::fuzz::reader;

void fuzz_allocator(reader& in) {
  gm::detail::block_allocator alloc{std::size_t{1} << (4 + in.next(6))};  // 16 B .. 512 B
  std::uintptr_t const base = std::uintptr_t{1} << 32;
  std::size_t mapped = 0;
  std::map<std::uintptr_t, std::pair<std::size_t, gm::detail::graph_id>> live;
  std::map<gm::detail::graph_id, std::vector<std::pair<std::uintptr_t, std::size_t>>> touched;
  alloc.add_region(base, 1 << 16);
  mapped = 1 << 16;
  while (!in.done()) {
    gm::detail::stream_id const stream = 1 + in.next(3);
    switch (in.next(6)) {
      case 0:
      case 1: {
        std::size_t const bytes = 1 + in.next(1 << 15);
        gm::detail::graph_id const owner = in.next(3);  // 0 = eager
        auto const got = alloc.allocate(bytes, stream, owner);
        if (!got) break;
        auto next = live.lower_bound(got->address);
        if (next != live.end() && next->first < got->address + got->size) fail();
        if (next != live.begin()) {
          auto previous = std::prev(next);
          if (previous->first + previous->second.first > got->address) fail();
        }
        if (owner == gm::detail::no_graph) {
          for (auto const& [g, ranges] : touched) {
            for (auto const& [at, size] : ranges) {
              if (got->address < at + size && at < got->address + got->size) fail();
            }
          }
        } else {
          touched[owner].emplace_back(got->address, got->size);
        }
        live[got->address] = {got->size, owner};
        break;
      }
      case 2:
        if (!live.empty()) {
          auto it = live.begin();
          std::advance(it, in.next(static_cast<std::uint32_t>(live.size())));
          alloc.deallocate(it->first, stream);
          live.erase(it);
        }
        break;
      case 3: alloc.release_stream(stream); break;
      case 4: {
        gm::detail::graph_id const gone = 1 + in.next(2);
        alloc.release_graph(gone);
        touched.erase(gone);
        for (auto it = live.begin(); it != live.end();) {
          it = it->second.second == gone ? live.erase(it) : std::next(it);
        }
        break;
      }
      case 5: {
        std::size_t const extra = 1 + in.next(1 << 16);  // any size: blocks may end mid-region
        alloc.extend_region(base, extra);
        mapped += extra;
        break;
      }
    }
    alloc.check_invariants();
    std::size_t in_use = 0;
    for (auto const& [at, b] : live) in_use += b.first;
    auto const stats = alloc.stats();
    if (stats.bytes_in_use != in_use ||
        stats.region_bytes != mapped / alloc.alignment() * alloc.alignment()) {
      fail();
    }
  }
}

void fuzz_planner(reader& in) {
  gm::allocation_trace trace;
  std::vector<std::size_t> open;
  while (!in.done()) {
    if (open.empty() || in.next(3) != 0) {
      open.push_back(trace.record_allocate(1 + in.next(1 << 20)));
    } else {
      std::size_t const pick = in.next(static_cast<std::uint32_t>(open.size()));
      trace.record_deallocate(open[pick]);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(pick));
    }
    if (trace.allocation_count() > 300) break;
  }
  std::size_t const alignment = std::size_t{1} << in.next(13);
  auto const plan = gm::plan_allocations(trace, alignment);
  gm::verify_plan(trace, plan);  // throws graphstep::error on an overlap: a crash to libFuzzer
  if (plan.slab_bytes < plan.peak_live_bytes) fail();
  gm::planned_sequence sequence{trace, plan};
  for (auto const& e : trace.events()) {
    if (e.what == gm::trace_event::kind::allocate) {
      if (sequence.next_allocate(e.bytes) != plan.offsets[e.id]) fail();
    } else {
      sequence.deallocate(plan.offsets[e.id]);
    }
  }
  if (!sequence.complete()) fail();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  if (size == 0) return 0;
  reader in{data + 1, size - 1};
  if (data[0] % 2 == 0) {
    fuzz_allocator(in);
  } else {
    fuzz_planner(in);
  }
  return 0;
}
