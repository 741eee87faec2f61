#pragma once

/// @file ops/layer_norm_problem.hpp
/// @brief The shape of a layer norm over the rows of [M,N] and of the residual add, the checks
/// of their operands, and the backward's workspace and row slicing, for ops/layer_norm.hpp's
/// launchers. Plain C++: tested on machines without a GPU.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>

namespace graphstep::ops {

/// @brief How the backward splits the M rows into slices, one block each.
struct layer_norm_slicing {
  std::int64_t slices{1};
  std::int64_t rows_per_slice{};
};

/// @brief One layer norm over the rows of a row-major [M,N] matrix.
struct layer_norm_problem {
  std::int64_t m{};  ///< rows
  std::int64_t n{};  ///< columns, the normalized width

  /// Rows of one forward block (one warp each): the grid holds ⌈M / 8⌉ blocks.
  static constexpr std::int64_t rows_per_block = 8;
  /// Backward slices per SM: the backward's register budget keeps three blocks resident.
  static constexpr std::int64_t blocks_per_sm = 3;
  /// Rows whose statistics one backward block keeps in shared memory.
  static constexpr std::int64_t max_rows_per_slice = 1024;

  /// @brief M·N, after refusing sizes that are not positive, overflow or exceed one launch.
  /// @throws usage_error, naming `call`
  [[nodiscard]] std::size_t check_shape(char const* call) const;

  /// @brief Checks the forward's operands (see launch_layer_norm_forward) and returns x's type.
  /// @throws usage_error (null or misaligned spans, spans of another type or too few elements,
  /// y equal to x, non-positive sizes, epsilon ≤ 0 or NaN)
  [[nodiscard]] dtype check_forward(device_span y, device_span mean, device_span rstd,
                                    device_span x, device_span gamma, device_span beta,
                                    float epsilon) const;

  /// @brief Checks the backward's operands and its workspace's address (see
  /// launch_layer_norm_backward), everything that needs no device, and returns x's type.
  /// @throws usage_error (as the forward; dx equal to dy or x; a null or misaligned workspace)
  [[nodiscard]] dtype check_backward(device_span dx, device_span dgamma, device_span dbeta,
                                     device_span dy, device_span x, device_span gamma,
                                     device_span mean, device_span rstd,
                                     void const* workspace) const;

  /// @brief Checks that `workspace_bytes` hold the backward's workspace on a device of
  /// `multiprocessors` SMs (backward_workspace_bytes).
  /// @throws usage_error (sizes as check_shape; too small a workspace, naming what it needs)
  void check_backward_workspace(std::size_t workspace_bytes, int multiprocessors) const;

  /// @brief The backward's slices on `multiprocessors` SMs: about three per SM, each warp of a
  /// block at least one row, none longer than max_rows_per_slice, the rows spread evenly.
  /// The slice count depends on M and the SM count only, so results are the same bits on one
  /// device whatever workspace beyond the minimum is given.
  [[nodiscard]] layer_norm_slicing backward_slicing(int multiprocessors) const;

  /// @brief Workspace bytes of the backward on `multiprocessors` SMs: slices × 2N fp32 sums.
  /// @throws usage_error (sizes as check_shape), naming layer_norm_backward_workspace_size
  [[nodiscard]] std::size_t backward_workspace_bytes(int multiprocessors) const;
};

/// @brief Checks launch_add's operands: out, a and b of one floating dtype and one count, out
/// not empty; returns that dtype.
/// @throws usage_error (null or misaligned spans, spans without elements, of different dtypes
/// or counts, an integer type)
[[nodiscard]] dtype check_add(device_span out, device_span a, device_span b);

}  // namespace graphstep::ops
