#pragma once

/// @file schedule/capture_shapes.hpp
/// @brief The shapes a graph cache captures when several dimensions vary — batch size, sequence
/// length and number of packed sequences — each dimension padded up (or matched exactly) to its
/// own capture sizes. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/schedule/capture_sizes.hpp>
#include <string>
#include <tuple>
#include <vector>

namespace graphstep::schedule {

/// @brief The shape of a request, or a captured shape.
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
[[nodiscard]] constexpr std::int64_t elements_of(shape_key const& key) noexcept {
  return key.batch * key.sequence_length;
}

/// @brief The captured shape chosen for a request's shape, and the padding of each dimension.
struct shape_choice {
  shape_key captured;
  shape_key padding;  ///< captured - requested, per dimension
  /// The captured shape's position in `sizes()`: a graph cache keeps its graphs by it.
  std::size_t slot{};
};

/// @brief Capture sizes per dimension; a request's captured shape takes the capture size of each
/// dimension. A dimension that does not vary keeps the single capture size {1}.
class capture_shapes {
 public:
  using key_type = shape_key;
  using choice_type = shape_choice;

  /// @throws usage_error (as capture_sizes, for each dimension)
  explicit capture_shapes(capture_sizes batch, capture_sizes sequence_length = capture_sizes{{1}},
                          capture_sizes packed_sequences = capture_sizes{{1}});

  /// @throws usage_error naming the dimension: a value ≤ 0, larger than that dimension's
  /// largest capture size (naming it and what to do), or without an exact capture size in exact
  /// mode
  [[nodiscard]] shape_choice choose(shape_key const& shape) const;

  /// @brief Every combination of the dimensions' capture sizes, most tokens first (ties: larger
  /// dimensions first), so that each capture reuses memory the larger ones freed.
  [[nodiscard]] std::vector<shape_key> capture_order() const;
  /// @brief The captured shapes: every combination of the dimensions' capture sizes, ascending
  /// (batch, then length, then packed count); a choice's `slot` is its position here.
  [[nodiscard]] std::vector<shape_key> sizes() const;

  [[nodiscard]] capture_sizes const& batch() const noexcept { return batch_; }
  [[nodiscard]] capture_sizes const& sequence_length() const noexcept { return sequence_; }
  [[nodiscard]] capture_sizes const& packed_sequences() const noexcept { return packed_; }

 private:
  capture_sizes batch_;
  capture_sizes sequence_;
  capture_sizes packed_;
};

}  // namespace graphstep::schedule
