// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/schedule/capture_shapes.hpp>

namespace graphstep::schedule {
namespace {

// The capture size of one dimension, with the dimension named in the error.
size_choice choose_in(capture_sizes const& policy, std::int64_t value, char const* dimension) {
  try {
    return policy.choose(value);
  } catch (usage_error const& e) {
    throw usage_error{std::string{"capture shape, dimension '"} + dimension + "': " + e.what()};
  }
}

}  // namespace

std::string describe(shape_key const& key) {
  return "batch " + std::to_string(key.batch) + " x length " + std::to_string(key.sequence_length) +
         " x " + std::to_string(key.packed_sequences) + " packed";
}

capture_shapes::capture_shapes(capture_sizes batch, capture_sizes sequence_length,
                               capture_sizes packed_sequences)
    : batch_{std::move(batch)},
      sequence_{std::move(sequence_length)},
      packed_{std::move(packed_sequences)} {}

shape_choice capture_shapes::choose(shape_key const& shape) const {
  size_choice const b = choose_in(batch_, shape.batch, "batch");
  size_choice const s = choose_in(sequence_, shape.sequence_length, "sequence_length");
  size_choice const p = choose_in(packed_, shape.packed_sequences, "packed_sequences");
  std::size_t const slot =
      (b.slot * sequence_.sizes().size() + s.slot) * packed_.sizes().size() + p.slot;
  return {{b.captured, s.captured, p.captured}, {b.padding, s.padding, p.padding}, slot};
}

std::vector<shape_key> capture_shapes::sizes() const {
  std::vector<shape_key> all;
  all.reserve(batch_.sizes().size() * sequence_.sizes().size() * packed_.sizes().size());
  for (std::int64_t b : batch_.sizes()) {
    for (std::int64_t s : sequence_.sizes()) {
      for (std::int64_t p : packed_.sizes()) all.push_back({b, s, p});
    }
  }
  return all;
}

std::vector<shape_key> capture_shapes::capture_order() const {
  std::vector<shape_key> order = sizes();
  std::sort(order.begin(), order.end(), [](shape_key const& x, shape_key const& y) {
    std::int64_t const ex = elements_of(x);
    std::int64_t const ey = elements_of(y);
    if (ex != ey) return ex > ey;
    return y < x;
  });
  return order;
}

}  // namespace graphstep::schedule
