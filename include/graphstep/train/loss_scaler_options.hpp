#pragma once

/// @file train/loss_scaler_options.hpp
/// @brief The core of `loss_scaler` (train/loss_scaler.hpp): its options, its state and the
/// update rule that the device kernel and the CPU tests share.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstdint>
#include <graphstep/detail/host_device.hpp>

namespace graphstep::train {

/// @brief The options of PyTorch's `torch.amp.GradScaler`, with its defaults.
struct loss_scaler_options {
  float init_scale{65536.0F};          ///< the scale of the first step (2^16)
  float growth_factor{2.0F};           ///< applied after `growth_interval` finite steps in a row
  float backoff_factor{0.5F};          ///< applied after a step with an inf or NaN gradient
  std::int32_t growth_interval{2000};  ///< finite steps in a row before the scale grows
};

/// @brief Throws usage_error naming the bad option: an initial scale that is not positive and
/// finite, a growth factor not above 1, a backoff factor outside (0, 1), an interval below 1.
void validate(loss_scaler_options const& options);

/// @brief The scale's state, in device memory while training (`loss_scaler`).
struct loss_scaler_state {
  float scale;                  ///< what the loss (and so every gradient) is multiplied by
  float inv_scale;              ///< 1 / scale: what the gradients are unscaled by
  std::int32_t growth_tracker;  ///< finite steps in a row since the scale last changed
  std::uint32_t all_finite;     ///< 1 when the last gradients checked were all finite, else 0
};

/// @brief The state a scaler starts in.
[[nodiscard]] inline loss_scaler_state initial_loss_scaler_state(
    loss_scaler_options const& options) {
  return {options.init_scale, 1.0F / options.init_scale, 0, 1U};
}

namespace detail {
/// False for inf and NaN, without <cmath>, which device code cannot include here: x - x is NaN
/// for both and 0 for every finite x.
GRAPHSTEP_HOST_DEVICE inline bool is_finite(float x) {
  return x - x == 0.0F;
}
/// False for an fp16 bit pattern that is inf or NaN: its five exponent bits are all set.
GRAPHSTEP_HOST_DEVICE inline bool float16_is_finite(std::uint16_t bits) {
  return (bits & 0x7C00U) != 0x7C00U;
}
/// False for a bf16 bit pattern that is inf or NaN: its eight exponent bits are all set.
GRAPHSTEP_HOST_DEVICE inline bool bfloat16_is_finite(std::uint16_t bits) {
  return (bits & 0x7F80U) != 0x7F80U;
}
}  // namespace detail

/// @brief The update after a step, as PyTorch's `_amp_update_scale_` (aten/src/ATen/native/
/// cuda/AmpKernels.cu): after a step with an inf or NaN gradient the scale is multiplied by the
/// backoff factor and the tracker restarts; after a finite step the tracker counts it, and on
/// reaching `growth_interval` the scale is multiplied by the growth factor (unless that
/// overflows) and the tracker restarts.
GRAPHSTEP_HOST_DEVICE inline void update_loss_scaler(loss_scaler_state& state,
                                                     loss_scaler_options const& options) {
  if (state.all_finite == 0U) {
    state.scale *= options.backoff_factor;
    state.growth_tracker = 0;
  } else if (state.growth_tracker + 1 == options.growth_interval) {
    float const grown = state.scale * options.growth_factor;
    if (detail::is_finite(grown)) state.scale = grown;
    state.growth_tracker = 0;
  } else {
    state.growth_tracker += 1;
  }
  state.inv_scale = 1.0F / state.scale;
}

}  // namespace graphstep::train
