#pragma once

/// @file train/mixed_precision.hpp
/// @brief The element rules of mixed-precision training that kernels and host references share:
/// the random bits of stochastic rounding (which `bfloat16_stochastic`, dtype_conversion.hpp,
/// takes) and the global-norm clip factor.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstdint>
#include <graphstep/detail/host_device.hpp>
#include <graphstep/dtype_conversion.hpp>
#include <graphstep/train/loss_scaler_options.hpp>
#include <graphstep/train/philox.hpp>

namespace graphstep::train {

/// @brief The random word that stochastically rounds element `element` at step `step`.
///
/// Convention: `element` numbers the elements of all the optimizer's tensors in the order they
/// were given (tensor 0's first, then tensor 1's, ...); `step` is the optimizer's device step
/// count (1 for the first step). Philox-4x32-10 runs on the counter {element / 4 (low, high
/// word), step (low, high word)} with the 64-bit seed as key, and element % 4 picks the word.
/// So every step rounds with fresh bits, and one seed gives the same rounding on every run,
/// eager or replayed.
GRAPHSTEP_HOST_DEVICE inline std::uint32_t stochastic_rounding_bits(std::uint64_t seed,
                                                                    std::uint64_t step,
                                                                    std::uint64_t element) {
  std::uint64_t const quad = element / 4;
  philox_block const counter{
      {static_cast<std::uint32_t>(quad), static_cast<std::uint32_t>(quad >> 32),
       static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32)}};
  philox_block const block = philox4x32_10(counter, static_cast<std::uint32_t>(seed),
                                           static_cast<std::uint32_t>(seed >> 32));
  return block.word[element % 4];
}

/// @brief What torch.nn.utils.clip_grad_norm_ multiplies the gradients by: min(1, max_norm /
/// (norm + epsilon)), and 1 when max_norm is 0 (no clipping). A non-finite norm gives NaN or
/// 0; the optimizer skips such a step instead of applying it.
GRAPHSTEP_HOST_DEVICE inline float gradient_clip_factor(float norm, float max_norm, float epsilon) {
  if (max_norm == 0.0F) return 1.0F;
  float const factor = max_norm / (norm + epsilon);
  return factor < 1.0F ? factor : (factor >= 1.0F ? 1.0F : factor);  // NaN passes through
}

/// @brief Whether an optimizer step is skipped: its gradients were not all finite (the loss
/// scaler's finding), or a skip threshold is set (`skip_norm` finite) and the global norm is
/// above it or not finite, or clipping is on (`max_grad_norm` > 0) and the norm is not finite.
/// As GradScaler skips `optimizer.step()`; the skipped step advances nothing.
GRAPHSTEP_HOST_DEVICE inline bool skips_step(bool gradients_finite, float norm, float max_grad_norm,
                                             float skip_norm) {
  if (!gradients_finite) return true;
  if (detail::is_finite(skip_norm)) return !(norm <= skip_norm);  // NaN fails the comparison
  return max_grad_norm > 0.0F && !detail::is_finite(norm);
}

}  // namespace graphstep::train
