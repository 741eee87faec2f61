#pragma once

/// @file nccl/bucket_plan.hpp
/// @brief Groups gradients into buckets of a flat buffer, so each bucket is all-reduced as soon
/// as the backward pass has produced it. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <graphstep/dtype.hpp>
#include <graphstep/parameter_layout.hpp>
#include <vector>

namespace graphstep::nccl {

/// @brief PyTorch DDP's defaults: 25 MiB buckets, the first one 1 MiB so communication starts
/// early.
inline constexpr std::size_t default_bucket_bytes = std::size_t{25} << 20;
inline constexpr std::size_t default_first_bucket_bytes = std::size_t{1} << 20;

/// @brief Gradients [first, last) of the input order, at elements [offset, offset + count) of
/// the buffer.
struct bucket {
  std::size_t first;
  std::size_t last;
  std::size_t offset;
  std::size_t count;
};

/// @brief Where each gradient lives in the flat buffer, and the buckets over it: every size in
/// elements of `type`, the dtype of every gradient and of the buffer.
struct bucket_plan {
  dtype type{dtype::float32};
  std::vector<std::size_t> offsets;  ///< by gradient, aligned
  std::vector<bucket> buckets;
  std::size_t buffer_count{};  ///< elements of the whole buffer, gaps included

  /// @brief `buffer_count × size_in_bytes(type)`: what to allocate.
  [[nodiscard]] std::size_t buffer_bytes() const noexcept {
    return buffer_count * size_in_bytes(type);
  }
};

/// @brief Packs gradients of `type`, given by their element counts in the order backward
/// produces them (last layer first), into buckets of at most `bucket_bytes` (the first of at
/// most `first_bucket_bytes`); a gradient larger than a bucket gets a bucket of its own. Each
/// gradient starts on an `alignment`-byte boundary. The bucket sizes and the alignment are
/// bytes: they are budgets of the network and the allocator, the same for every dtype.
/// @throws usage_error (no gradient, an empty gradient, an unknown dtype, zero bucket size, an
/// alignment that is not a power of two of at least one element, a buffer past `SIZE_MAX`)
[[nodiscard]] bucket_plan plan_buckets(dtype type, std::vector<std::size_t> const& gradient_counts,
                                       std::size_t bucket_bytes = default_bucket_bytes,
                                       std::size_t first_bucket_bytes = default_first_bucket_bytes,
                                       std::size_t alignment = 256);

/// @brief The buckets over the gradient buffer of `layout`, whose order is the order the
/// backward finishes the gradients: each gradient at its layout offset (`offsets[i]` is
/// `layout.at(i).offset`), and `buffer_bytes()` the layout's.
/// @throws usage_error (an empty layout, an adopted layout (`parameter_layout::adopting`),
/// tensors of more than one dtype, zero bucket size)
[[nodiscard]] bucket_plan plan_buckets(parameter_layout const& layout,
                                       std::size_t bucket_bytes = default_bucket_bytes,
                                       std::size_t first_bucket_bytes = default_first_bucket_bytes);

}  // namespace graphstep::nccl
