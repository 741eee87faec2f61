// libFuzzer target: the fuzzer's bytes pick lists of capture sizes (one number, or the three
// dimensions of a shape), sizes to place in them and graph sizes for the LRU budget of a graph
// cache. A size is either served by the smallest capture size that holds it or refused with
// usage_error, never mis-served; the budget is never exceeded and never evicts the capture size
// just added. Build and run with scripts/fuzz.sh.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/schedule/capture_shapes.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <graphstep/schedule/detail/lru_budget.hpp>
#include <optional>
#include <set>
#include <vector>

#include "fuzz_input.hpp"

namespace gsch = graphstep::schedule;

namespace {

using graphstep::fuzz::fail;
using graphstep::fuzz::reader;

std::optional<gsch::capture_sizes> make_policy(reader& in) {
  std::vector<std::int64_t> sizes;
  std::size_t const count = in.next(12);  // 0 capture sizes: refused
  for (std::size_t i = 0; i < count; ++i) {
    sizes.push_back(static_cast<std::int64_t>(in.next(100000)) - 2);  // some ≤ 0: refused
  }
  auto const match = in.next(2) == 1 ? gsch::size_match::exact : gsch::size_match::pad_up;
  try {
    return gsch::capture_sizes{sizes, match};
  } catch (graphstep::usage_error const&) {
    bool any_invalid = sizes.empty();
    for (std::int64_t b : sizes) any_invalid = any_invalid || b <= 0;
    if (!any_invalid) fail();  // a valid list must be accepted
    return std::nullopt;
  }
}

// The smallest capture size that holds `size` under `policy`'s match, or nullopt when none does.
std::optional<std::int64_t> expected_capture(gsch::capture_sizes const& policy, std::int64_t size) {
  if (size <= 0) return std::nullopt;
  for (std::int64_t b : policy.sizes()) {
    if (b == size || (b > size && policy.match() == gsch::size_match::pad_up)) return b;
    if (b > size) return std::nullopt;
  }
  return std::nullopt;
}

void check_choice(gsch::capture_sizes const& policy, std::int64_t size) {
  std::optional<std::int64_t> const expected = expected_capture(policy, size);
  try {
    gsch::size_choice const choice = policy.choose(size);
    if (!expected || choice.captured != *expected || choice.padding != choice.captured - size)
      fail();
    if (choice.slot >= policy.sizes().size() || policy.sizes()[choice.slot] != choice.captured) {
      fail();  // a graph cache keeps the capture size's graph at this slot
    }
  } catch (graphstep::usage_error const&) {
    if (expected) fail();  // refused a size it could serve
  }
}

void fuzz_one_dimension(reader& in) {
  std::optional<gsch::capture_sizes> const policy = make_policy(in);
  if (!policy) return;
  std::vector<std::int64_t> const order = policy->capture_order();
  if (std::set<std::int64_t>(order.begin(), order.end()).size() != policy->sizes().size()) {
    fail();
  }
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (order[i - 1] <= order[i]) fail();  // largest first
  }
  gsch::detail::lru_budget lru{policy->sizes(), in.next(2) == 0 ? 0 : 1 + in.next(1 << 20)};
  while (!in.done()) {
    std::int64_t const size = static_cast<std::int64_t>(in.next(120000)) - 10;
    check_choice(*policy, size);
    std::optional<std::int64_t> const captured = expected_capture(*policy, size);
    if (!captured) continue;
    std::size_t const slot = policy->choose(size).slot;
    if (lru.contains(slot)) {
      lru.touch(slot);
      continue;
    }
    std::size_t const bytes = 1 + in.next(1 << 16);
    try {
      for (std::size_t gone : lru.insert(slot, bytes)) {
        if (lru.contains(gone) || gone == slot) fail();
      }
    } catch (graphstep::usage_error const&) {
      if (lru.budget() == 0 || bytes <= lru.budget()) fail();  // only a graph above the budget
      continue;
    }
    if (!lru.contains(slot)) fail();
    if (lru.budget() != 0 && lru.total_bytes() > lru.budget()) fail();
  }
}

void fuzz_shape(reader& in) {
  std::optional<gsch::capture_sizes> batch = make_policy(in);
  std::optional<gsch::capture_sizes> length = make_policy(in);
  std::optional<gsch::capture_sizes> packed = make_policy(in);
  if (!batch || !length || !packed) return;
  gsch::capture_shapes const policy{*batch, *length, *packed};
  std::vector<gsch::shape_key> const order = policy.capture_order();
  std::vector<gsch::shape_key> const sizes = policy.sizes();
  if (!std::is_sorted(sizes.begin(), sizes.end()) || sizes.size() != order.size()) fail();
  if (order.size() != batch->sizes().size() * length->sizes().size() * packed->sizes().size()) {
    fail();
  }
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (gsch::elements_of(order[i - 1]) < gsch::elements_of(order[i])) fail();
  }
  while (!in.done()) {
    gsch::shape_key const shape{static_cast<std::int64_t>(in.next(3000)) - 2,
                                static_cast<std::int64_t>(in.next(3000)) - 2,
                                static_cast<std::int64_t>(in.next(50)) - 2};
    auto const b = expected_capture(*batch, shape.batch);
    auto const l = expected_capture(*length, shape.sequence_length);
    auto const p = expected_capture(*packed, shape.packed_sequences);
    try {
      gsch::shape_choice const choice = policy.choose(shape);
      // Each dimension is served by its own list, exactly as a one-dimension policy would.
      if (!b || !l || !p) fail();
      if (choice.captured != gsch::shape_key{*b, *l, *p}) fail();
      if (choice.slot >= sizes.size() || sizes[choice.slot] != choice.captured) fail();
      if (choice.padding != gsch::shape_key{*b - shape.batch, *l - shape.sequence_length,
                                            *p - shape.packed_sequences}) {
        fail();
      }
    } catch (graphstep::usage_error const&) {
      if (b && l && p) fail();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  if (size == 0) return 0;
  reader in{data + 1, size - 1};
  if (data[0] % 2 == 0) {
    fuzz_one_dimension(in);
  } else {
    fuzz_shape(in);
  }
  return 0;
}
