// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/schedule/shape_bucket_policy.hpp>

namespace graphstep::schedule {
namespace {

// The bucket of one dimension, with the dimension named in the error.
bucket_choice choose_in(bucket_policy const& policy, std::int64_t value, char const* dimension) {
  try {
    return policy.choose(value);
  } catch (usage_error const& e) {
    throw usage_error{std::string{"shape bucket, dimension '"} + dimension + "': " + e.what()};
  }
}

}  // namespace

std::string describe(shape_key const& key) {
  return "batch " + std::to_string(key.batch) + " x length " + std::to_string(key.sequence_length) +
         " x " + std::to_string(key.packed_sequences) + " packed";
}

shape_bucket_policy::shape_bucket_policy(bucket_policy batch, bucket_policy sequence_length,
                                         bucket_policy packed_sequences)
    : batch_{std::move(batch)},
      sequence_{std::move(sequence_length)},
      packed_{std::move(packed_sequences)} {}

shape_choice shape_bucket_policy::choose(shape_key const& shape) const {
  bucket_choice const b = choose_in(batch_, shape.batch, "batch");
  bucket_choice const s = choose_in(sequence_, shape.sequence_length, "sequence_length");
  bucket_choice const p = choose_in(packed_, shape.packed_sequences, "packed_sequences");
  std::size_t const slot =
      (b.slot * sequence_.buckets().size() + s.slot) * packed_.buckets().size() + p.slot;
  return {{b.bucket, s.bucket, p.bucket}, {b.padding, s.padding, p.padding}, slot};
}

std::vector<shape_key> shape_bucket_policy::buckets() const {
  std::vector<shape_key> all;
  all.reserve(batch_.buckets().size() * sequence_.buckets().size() * packed_.buckets().size());
  for (std::int64_t b : batch_.buckets()) {
    for (std::int64_t s : sequence_.buckets()) {
      for (std::int64_t p : packed_.buckets()) all.push_back({b, s, p});
    }
  }
  return all;
}

std::vector<shape_key> shape_bucket_policy::capture_order() const {
  std::vector<shape_key> order = buckets();
  std::sort(order.begin(), order.end(), [](shape_key const& x, shape_key const& y) {
    std::int64_t const ex = bucket_elements(x);
    std::int64_t const ey = bucket_elements(y);
    if (ex != ey) return ex > ey;
    return y < x;
  });
  return order;
}

}  // namespace graphstep::schedule
