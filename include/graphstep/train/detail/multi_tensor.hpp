#pragma once

/// @file train/detail/multi_tensor.hpp
/// @brief Splits many tensors into equal chunks so one kernel launch updates them all.
///
/// The chunk table is computed once, before capture, and uploaded to device memory: each block
/// of the multi-tensor kernel reads its chunk from the table. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace graphstep::train::detail {

/// @brief `count` elements of tensor `tensor` starting at element `begin`.
struct tensor_chunk {
  std::uint32_t tensor;
  std::uint32_t count;
  std::uint64_t begin;
};

/// @brief Default chunk: 64 Ki elements, a block's worth of work that amortizes its launch.
inline constexpr std::size_t default_chunk_elements = std::size_t{1} << 16;

/// @brief The chunks that cover every element of every tensor exactly once, in tensor order.
/// @param element_counts number of elements of each tensor
/// @throws usage_error (no tensor, an empty tensor, a chunk size of 0 or above 2^31, more than
/// 2^32 - 1 tensors)
[[nodiscard]] std::vector<tensor_chunk> plan_chunks(
    std::vector<std::size_t> const& element_counts,
    std::size_t chunk_elements = default_chunk_elements);

}  // namespace graphstep::train::detail
