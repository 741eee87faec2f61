#pragma once

/// @file ops/gelu_problem.hpp
/// @brief The shapes of the layer's hand-written element-wise and reduction ops (ops/gelu.hpp):
/// the unfused bias + GELU and its backward over [M,N], and the bias gradient, with the checks
/// of their operands and the bias gradient's workspace. Plain C++: tested on machines without
/// a GPU.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>

namespace graphstep::ops {

/// @brief The bias + GELU forward or the GELU backward over a row-major [M,N] matrix.
struct gelu_problem {
  std::int64_t m{};
  std::int64_t n{};

  /// @brief Checks launch_bias_gelu's operands (pre_activation and bias may be empty); returns
  /// y's type.
  /// @throws usage_error (an empty y, spans null, misaligned, of another type or too short,
  /// non-positive sizes)
  [[nodiscard]] dtype check_forward(device_span y, device_span pre_activation,
                                    device_span bias) const;

  /// @brief Checks launch_gelu_backward's operands; returns dy's type.
  /// @throws usage_error (spans empty, null, misaligned, of another type or too short,
  /// non-positive sizes)
  [[nodiscard]] dtype check_backward(device_span dz, device_span dy,
                                     device_span pre_activation) const;
};

/// @brief The bias gradient db[N] = Σ over the M rows of dz[M,N].
struct bias_gradient_problem {
  std::int64_t m{};
  std::int64_t n{};

  /// Row-slice blocks per SM that the sliced pass aims for.
  static constexpr std::int64_t blocks_per_sm = 2;
  /// Columns of the narrowest column tile (fp32, one lane per column).
  static constexpr std::int64_t min_tile_columns = 32;
  /// Columns of the widest column tile (fp16 and bf16: 8 lanes of 8 elements).
  static constexpr std::int64_t max_tile_columns = 64;

  /// @brief Checks launch_bias_gradient's operands and workspace (none: null with 0 bytes);
  /// returns dz's type.
  /// @throws usage_error (spans null, misaligned, of another type or too short, non-positive
  /// sizes, N too wide for one launch, a size without a workspace, a misaligned workspace)
  [[nodiscard]] dtype check(device_span db, device_span dz, void const* workspace,
                            std::size_t workspace_bytes) const;

  /// @brief Workspace bytes with which the sliced pass uses all the slices it wants for any M
  /// on `multiprocessors` SMs: (2 × SMs × 64 + N) fp32 values. M is not read.
  /// @throws usage_error (non-positive N)
  [[nodiscard]] std::size_t workspace_bytes(int multiprocessors) const;
};

}  // namespace graphstep::ops
