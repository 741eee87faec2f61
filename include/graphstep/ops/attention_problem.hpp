#pragma once

/// @file ops/attention_problem.hpp
/// @brief The shape of one causal attention layer and the checks of its operands, for both of
/// its launchers: the plain kernels of ops/attention.hpp (shape limits, operands, alignment,
/// overlap, the backward's workspace) and cuDNN's fused attention of ops/attention_cudnn.hpp
/// (its contract and the constraints that the arguments alone decide). Layouts as in
/// ops/attention.hpp: qkv [B·T, 3·H·D], out and dout [B·T, H·D], logsumexp [B,H,T] fp32, dqkv in
/// qkv's layout. Plain C++: tested on machines without a GPU.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <string>

namespace graphstep::ops {

/// @brief The sizes of one attention call.
struct attention_shape {
  std::int64_t batch{};
  std::int64_t sequence{};  ///< T
  std::int64_t heads{};     ///< H
  std::int64_t head_dim{};  ///< D
};

/// @brief The device buffers of one attention layer on cuDNN, as spans holding at least the
/// elements of the layouts above. `qkv`, `out`, `dout` and `dqkv` are of qkv's type, 16-byte
/// aligned (cuDNN's kernels move them in 16-byte vectors); `logsumexp` is fp32, 16-byte aligned.
/// `dout` and `dqkv` are given together, or both left empty for a layer without backward().
/// `out` and `logsumexp` share no memory with qkv or each other, nor `dqkv` with any other
/// operand.
struct cudnn_attention_operands {
  device_span qkv;        ///< [B·T, 3·H·D], read by forward and backward
  device_span out;        ///< [B·T, H·D], written by forward, read by backward
  device_span logsumexp;  ///< [B,H,T] fp32, written by forward, read by backward
  device_span dout;       ///< [B·T, H·D], read by backward
  device_span dqkv;       ///< [B·T, 3·H·D], overwritten by backward
};

/// @brief One causal attention layer.
struct attention_problem {
  attention_shape shape;

  /// The largest head dimension of the plain kernels (and of cuDNN's 16-bit fused attention).
  static constexpr std::int64_t max_head_dim = 256;
  /// The longest sequence one launch of the plain kernels holds: 65535 tiles of 8 rows.
  static constexpr std::int64_t max_sequence = std::int64_t{65535} * 8;

  /// @brief Refuses a shape the plain kernels cannot take: sizes not positive, a head dimension
  /// that is not a multiple of 8 or exceeds 256, B·H or T beyond one launch's grid.
  /// @throws usage_error, naming `call`
  void check_shape(char const* call) const;

  /// @brief Checks launch_causal_attention_forward's operands; returns qkv's type.
  /// @throws usage_error (check_shape; null spans, spans of another type or too few elements,
  /// qkv or out not 16-byte aligned, overlapping buffers)
  [[nodiscard]] dtype check_forward(device_span out, device_span logsumexp, device_span qkv) const;

  /// @brief Checks launch_causal_attention_backward's operands and workspace; returns qkv's type.
  /// @throws usage_error (as the forward; dout and dqkv 16-byte aligned too; a null, too small
  /// or misaligned workspace; dqkv or the workspace overlapping another operand)
  [[nodiscard]] dtype check_backward(device_span dqkv, device_span dout, device_span qkv,
                                     device_span out, device_span logsumexp, void const* workspace,
                                     std::size_t workspace_bytes) const;

  /// @brief Workspace bytes of the plain backward: B·H·T fp32 values.
  /// @throws usage_error (non-positive B, T or H)
  [[nodiscard]] std::size_t backward_workspace_bytes() const;

  /// @brief "cuDNN attention (bfloat16, B=2 T=64 H=4 D=64)": how cuDNN's messages name the layer.
  [[nodiscard]] std::string cudnn_description(dtype type) const;

  /// @brief What cuDNN's fused attention needs of the arguments alone, no CUDA or cuDNN call:
  /// throws on a broken contract, and says in the result when a constraint of cuDNN's kernels
  /// fails (a type other than bfloat16 and float16, a head dimension that is not a multiple of 8
  /// or exceeds 256, a pointer not 16-byte aligned), naming it and what to do.
  /// @throws usage_error (non-positive sizes, a layer too large to index, missing operands or
  /// ones of another type or too short, dout without dqkv or the reverse, an output overlapping
  /// another operand of its call)
  [[nodiscard]] support check_cudnn(cudnn_attention_operands const& operands) const;
};

}  // namespace graphstep::ops
