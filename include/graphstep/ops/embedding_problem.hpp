#pragma once

/// @file ops/embedding_problem.hpp
/// @brief The shape of one token + position embedding and the checks of its operands, for
/// ops/embedding.hpp's launchers. Plain C++: tested on machines without a GPU.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>

namespace graphstep::ops {

/// @brief The sizes of one embedding call.
struct embedding_shape {
  std::int64_t batch{};
  std::int64_t sequence{};  ///< T: rows of the position table used
  std::int64_t vocab{};     ///< rows of the token table that ids may name
  std::int64_t channels{};  ///< C
};

/// @brief One embedding call.
struct embedding_problem {
  embedding_shape shape;

  /// Positions (B·T) one launch holds: they index a grid dimension and 32-bit lists, 2^30
  /// leaving room for a scan's step past the end.
  static constexpr std::int64_t max_positions = std::int64_t{1} << 30;
  /// Threads of a token-gradient block at most: one pack of channels each.
  static constexpr std::int64_t max_gather_threads = 256;
  /// Channels one launch holds: 65535 tiles (grid y) of max_gather_threads packs.
  static constexpr std::int64_t max_channels = std::int64_t{65535} * max_gather_threads;

  /// @brief Refuses sizes that are not positive, more than 2^30 positions or 65535·256 channels.
  /// @throws usage_error, naming `call`
  void check_shape(char const* call) const;

  /// @brief Checks launch_embedding_forward's operands; returns the tables' type.
  /// @throws usage_error (check_shape; null or misaligned spans, spans of another type or too
  /// few elements)
  [[nodiscard]] dtype check_forward(device_span out, device_span tokens, device_span token_table,
                                    device_span position_table) const;

  /// @brief Checks launch_embedding_backward's operands; returns dout's type.
  /// @throws usage_error (as check_forward)
  [[nodiscard]] dtype check_backward(device_span token_gradient, device_span position_gradient,
                                     device_span dout, device_span tokens) const;
};

}  // namespace graphstep::ops
