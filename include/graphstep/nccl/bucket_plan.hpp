#pragma once

/// @file nccl/bucket_plan.hpp
/// @brief Groups gradients into buckets of a flat buffer, so each bucket is all-reduced as soon
/// as the backward pass has produced it. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <graphstep/parameter_layout.hpp>
#include <type_traits>
#include <vector>

namespace graphstep::nccl {

/// @brief PyTorch DDP's defaults: 25 MiB buckets, the first one 1 MiB so communication starts
/// early.
inline constexpr std::size_t default_bucket_bytes = std::size_t{25} << 20;
inline constexpr std::size_t default_first_bucket_bytes = std::size_t{1} << 20;

/// @brief Gradients [first, last) of the input order, at [offset, offset + bytes) of the buffer.
struct bucket {
  std::size_t first;
  std::size_t last;
  std::size_t offset;
  std::size_t bytes;
};

/// @brief Where each gradient lives in the flat buffer, and the buckets over it.
struct bucket_plan {
  std::vector<std::size_t> offsets;  ///< by gradient, aligned
  std::vector<bucket> buckets;
  std::size_t buffer_bytes{};
};

/// @brief Packs gradients, given in the order backward produces them (last layer first), into
/// buckets of at most `bucket_bytes` (the first of at most `first_bucket_bytes`); a gradient
/// larger than a bucket gets a bucket of its own. Offsets are aligned to `alignment` bytes.
/// @throws usage_error (no gradient, an empty gradient, zero bucket size, bad alignment)
[[nodiscard]] bucket_plan plan_buckets(std::vector<std::size_t> const& gradient_bytes,
                                       std::size_t bucket_bytes = default_bucket_bytes,
                                       std::size_t first_bucket_bytes = default_first_bucket_bytes,
                                       std::size_t alignment = 256);

namespace detail {
[[nodiscard]] bucket_plan plan_layout_buckets(parameter_layout const& layout,
                                              std::size_t bucket_bytes,
                                              std::size_t first_bucket_bytes);
}  // namespace detail

/// @brief The buckets over the gradient buffer of `layout`, whose order is the order the
/// backward finishes the gradients: each gradient at its layout offset (`offsets[i]` is
/// `layout.at(i).offset`), and `buffer_bytes` the layout's. (A template only so that a braced
/// list of sizes, `plan_buckets({a, b})`, still means the overload above.)
/// @throws usage_error (an empty layout, zero bucket size)
template <typename Layout,
          std::enable_if_t<std::is_same_v<Layout, parameter_layout>, int> = 0>
[[nodiscard]] bucket_plan plan_buckets(
    Layout const& layout, std::size_t bucket_bytes = default_bucket_bytes,
    std::size_t first_bucket_bytes = default_first_bucket_bytes) {
  return detail::plan_layout_buckets(layout, bucket_bytes, first_bucket_bytes);
}

}  // namespace graphstep::nccl
