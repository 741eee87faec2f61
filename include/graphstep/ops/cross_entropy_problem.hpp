#pragma once

/// @file ops/cross_entropy_problem.hpp
/// @brief The shape of one softmax cross-entropy over rows of logits, the checks of its operands
/// and its workspace, for ops/cross_entropy.hpp's launcher. Plain C++: tested on machines
/// without a GPU.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>

namespace graphstep::ops {

/// @brief The sizes of one cross-entropy call.
struct cross_entropy_shape {
  std::int64_t rows{};  ///< M: the positions scored, B·T
  std::int64_t vocab{};
  std::int64_t padded_vocab{};  ///< the logits' row length, ≥ vocab
};

/// @brief One cross-entropy call.
struct cross_entropy_problem {
  cross_entropy_shape shape;

  /// Rows one launch holds (one block each on grid x).
  static constexpr std::int64_t max_rows = 0x7fffffff;

  /// @brief Refuses sizes that are not positive, padded_vocab < vocab, more than max_rows rows.
  /// @throws usage_error, naming `call`
  void check_shape(char const* call) const;

  /// @brief Checks launch_cross_entropy_forward_backward's operands and workspace; returns the
  /// logits' type.
  /// @throws usage_error (check_shape; null or misaligned spans, spans of another type or too
  /// few elements, dlogits overlapping logits without being it, a null, misaligned or too small
  /// workspace)
  [[nodiscard]] dtype check(device_span loss, device_span dlogits, device_span logits,
                            device_span targets, void const* workspace,
                            std::size_t workspace_bytes) const;

  /// @brief Workspace bytes: M fp32 values (the per-row losses).
  /// @throws usage_error (as check_shape), naming cross_entropy_workspace_size
  [[nodiscard]] std::size_t workspace_bytes() const;
};

}  // namespace graphstep::ops
