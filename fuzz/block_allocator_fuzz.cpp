// libFuzzer target: the fuzzer's bytes drive the allocator core (regions, growth, allocations,
// frees, stream and graph releases), the planner and the bucket policy with its LRU budget; every invariant is checked after every
// operation, and an eager block must never land on memory a live graph touched.
// Build and run with scripts/fuzz.sh.

#include <graphstep/error.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <graphstep/memory/block_allocator.hpp>
#include <graphstep/schedule/bucket_policy.hpp>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <vector>

namespace gm = graphstep::memory;

namespace {

class reader {
 public:
  reader(std::uint8_t const* data, std::size_t size) : data_{data}, size_{size} {}
  [[nodiscard]] bool done() const { return at_ >= size_; }
  std::uint32_t next(std::uint32_t bound) {
    std::uint32_t value = 0;
    for (int i = 0; i < 3 && at_ < size_; ++i) value = value << 8 | data_[at_++];
    return bound == 0 ? 0 : value % bound;
  }

 private:
  std::uint8_t const* data_;
  std::size_t size_;
  std::size_t at_{};
};

[[noreturn]] void fail() { std::abort(); }

void fuzz_allocator(reader& in) {
  gm::block_allocator alloc{std::size_t{1} << (4 + in.next(6))};  // 16 B .. 512 B
  std::uintptr_t const base = std::uintptr_t{1} << 32;
  std::size_t mapped = 0;
  std::map<std::uintptr_t, std::pair<std::size_t, gm::graph_id>> live;
  std::map<gm::graph_id, std::vector<std::pair<std::uintptr_t, std::size_t>>> touched;
  alloc.add_region(base, 1 << 16);
  mapped = 1 << 16;
  while (!in.done()) {
    gm::stream_id const stream = 1 + in.next(3);
    switch (in.next(6)) {
      case 0:
      case 1: {
        std::size_t const bytes = 1 + in.next(1 << 15);
        gm::graph_id const owner = in.next(3);  // 0 = eager
        auto const got = alloc.allocate(bytes, stream, owner);
        if (!got) break;
        auto next = live.lower_bound(got->address);
        if (next != live.end() && next->first < got->address + got->size) fail();
        if (next != live.begin()) {
          auto previous = std::prev(next);
          if (previous->first + previous->second.first > got->address) fail();
        }
        if (owner == gm::no_graph) {
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
        gm::graph_id const gone = 1 + in.next(2);
        alloc.release_graph(gone);
        touched.erase(gone);
        for (auto it = live.begin(); it != live.end();) {
          it = it->second.second == gone ? live.erase(it) : std::next(it);
        }
        break;
      }
      case 5: {
        std::size_t const extra = (1 + in.next(64)) * 1024;
        alloc.extend_region(base, extra);
        mapped += extra;
        break;
      }
    }
    alloc.check_invariants();
    std::size_t in_use = 0;
    for (auto const& [at, b] : live) in_use += b.first;
    if (alloc.stats().bytes_in_use != in_use || alloc.stats().region_bytes != mapped) fail();
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
  auto const plan = gm::plan_allocations(trace);
  gm::verify_plan(trace, plan);  // throws graphstep::error on an overlap: a crash to libFuzzer
  if (plan.slab_bytes < plan.peak_live_bytes) fail();
}

void fuzz_bucket_policy(reader& in) {
  std::vector<std::int64_t> buckets;
  std::size_t const count = 1 + in.next(40);
  for (std::size_t i = 0; i < count; ++i) buckets.push_back(1 + in.next(100000));
  bool const exact = in.next(2) == 1;
  graphstep::schedule::bucket_policy const policy{
      buckets, exact ? graphstep::schedule::bucket_match::exact
                     : graphstep::schedule::bucket_match::pad_up};
  graphstep::schedule::lru_budget lru{in.next(2) == 0 ? 0 : 1 + in.next(1 << 20)};
  while (!in.done()) {
    std::int64_t const size = static_cast<std::int64_t>(in.next(120000)) - 10;
    graphstep::schedule::bucket_choice choice{};
    try {
      choice = policy.choose(size);
    } catch (graphstep::usage_error const&) {
      // Out-of-range sizes (and, exact, missing buckets) are reported, never mis-served.
      if (size > 0 && size <= policy.buckets().back() && !exact) fail();
      continue;
    }
    // The bucket holds the size, and is the smallest bucket that does.
    if (choice.bucket < size || choice.padding != choice.bucket - size) fail();
    if (exact && choice.padding != 0) fail();
    for (std::int64_t b : policy.buckets()) {
      if (b >= size && b < choice.bucket) fail();
    }
    if (!lru.contains(choice.bucket)) {
      std::size_t const bytes = 1 + in.next(1 << 16);
      if (lru.budget() != 0 && bytes > lru.budget()) {
        bool refused = false;
        try {
          static_cast<void>(lru.insert(choice.bucket, bytes));
        } catch (graphstep::usage_error const&) {
          refused = true;
        }
        if (!refused) fail();  // a graph larger than the whole budget is refused
        continue;
      }
      for (std::int64_t gone : lru.insert(choice.bucket, bytes)) {
        if (lru.contains(gone) || gone == choice.bucket) fail();
      }
    }
    lru.touch(choice.bucket);
    if (lru.budget() != 0 && lru.total_bytes() > lru.budget()) fail();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  if (size == 0) return 0;
  reader in{data + 1, size - 1};
  switch (data[0] % 3) {
    case 0: fuzz_allocator(in); break;
    case 1: fuzz_planner(in); break;
    default: fuzz_bucket_policy(in); break;
  }
  return 0;
}
