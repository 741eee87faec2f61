#pragma once

/// @file schedule/shape_bucket_policy.hpp
/// @brief Buckets of a shape with several varying dimensions — batch size, sequence length and
/// number of packed sequences — each dimension padded up (or matched exactly) on its own
/// bucket list. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/schedule/bucket_policy.hpp>
#include <string>
#include <tuple>
#include <vector>

namespace graphstep::schedule {

/// @brief The shape of a request, or of a bucket.
struct shape_key {
  std::int64_t batch{1};
  std::int64_t sequence_length{1};
  /// Sequences packed into the batch (varlen attention); a count, not a size: it changes the
  /// shape of the offset arrays, not the number of tokens.
  std::int64_t packed_sequences{1};

  friend bool operator<(shape_key const& a, shape_key const& b) noexcept {
    return std::tie(a.batch, a.sequence_length, a.packed_sequences) <
           std::tie(b.batch, b.sequence_length, b.packed_sequences);
  }
  friend bool operator==(shape_key const& a, shape_key const& b) noexcept {
    return a.batch == b.batch && a.sequence_length == b.sequence_length &&
           a.packed_sequences == b.packed_sequences;
  }
  friend bool operator!=(shape_key const& a, shape_key const& b) noexcept { return !(a == b); }
};

/// @brief "batch 8 x length 128 x 3 packed", for messages.
[[nodiscard]] std::string describe(shape_key const& key);

/// @brief Tokens a shape processes: batch x sequence length (the packed count adds none).
[[nodiscard]] constexpr std::int64_t bucket_elements(shape_key const& key) noexcept {
  return key.batch * key.sequence_length;
}

/// @brief The bucket chosen for a shape, and the padding of each dimension.
struct shape_choice {
  shape_key bucket;
  shape_key padding;  ///< bucket - shape, per dimension
  /// The bucket's position in `buckets()`: a graph cache keeps its graphs by it.
  std::size_t slot{};
};

/// @brief One bucket list per dimension; a shape's bucket is the bucket of each dimension.
/// A dimension that does not vary keeps the single bucket {1}.
class shape_bucket_policy {
 public:
  using key_type = shape_key;
  using choice_type = shape_choice;

  /// @throws usage_error (as bucket_policy, for each dimension)
  explicit shape_bucket_policy(bucket_policy batch,
                               bucket_policy sequence_length = bucket_policy{{1}},
                               bucket_policy packed_sequences = bucket_policy{{1}});

  /// @throws usage_error naming the dimension: a value ≤ 0, larger than that dimension's
  /// largest bucket (naming it and what to do), or without an exact bucket in exact mode
  [[nodiscard]] shape_choice choose(shape_key const& shape) const;

  /// @brief Every combination of the dimensions' buckets, most tokens first (ties: larger
  /// dimensions first), so that each capture reuses memory the larger ones freed.
  [[nodiscard]] std::vector<shape_key> capture_order() const;
  /// @brief Every combination of the dimensions' buckets, ascending (batch, then length, then
  /// packed count); a choice's `slot` is its position here.
  [[nodiscard]] std::vector<shape_key> buckets() const;

  [[nodiscard]] bucket_policy const& batch() const noexcept { return batch_; }
  [[nodiscard]] bucket_policy const& sequence_length() const noexcept { return sequence_; }
  [[nodiscard]] bucket_policy const& packed_sequences() const noexcept { return packed_; }

 private:
  bucket_policy batch_;
  bucket_policy sequence_;
  bucket_policy packed_;
};

}  // namespace graphstep::schedule
