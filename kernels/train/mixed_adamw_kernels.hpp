#pragma once

// Launch wrappers of the mixed-precision AdamW (kernels/train/mixed_adamw.cu) and the layouts
// they share with the host. Plain C++: host code includes it without nvcc.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/train/detail/multi_tensor.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/optimizer_options.hpp>

namespace graphstep::train::detail {

/// What a step reads and writes in device memory. The host writes it at construction and the
/// schedule between replays; the finalize kernel writes the per-step values.
struct mixed_adamw_device_state {
  std::int64_t step{0};               // steps taken, skipped ones not counted
  std::uint64_t seed{0};              // Philox key of stochastic rounding
  double beta1_power{1.0};            // beta1^step, one fp64 factor per step taken
  double beta2_power{1.0};            // beta2^step
  float lr{0.0F};                     // schedule.at(step) of this step
  float bias_correction1{1.0F};       // 1 − beta1^step
  float sqrt_bias_correction2{1.0F};  // sqrt(1 − beta2^step)
  float inv_loss_scale{1.0F};         // this step's gradients are multiplied by it
  float clip_factor{1.0F};            // and then by it
  float gradient_norm{0.0F};          // global norm of the unscaled gradients (0 without
                                      // clipping or a skip threshold)
  unsigned int apply{0};              // 1: this step is applied (0: skipped); the flag of
                                      // the update's conditional node in a captured step
  std::uint32_t skipped_steps{0};     // steps skipped so far (wraps after 2^32)
  train::lr_schedule schedule;
  float const* learning_rate{nullptr};  // when set, read by each step instead of the schedule
};

/// One tensor of the update. `type` is a graphstep::dtype.
struct mixed_tensor_slot {
  void* value;
  void const* gradient;
  float* master;
  float* exp_avg;
  float* exp_avg_sq;
  std::uint64_t first_element;  // its first element's number among all tensors' elements
  float weight_decay;
  float lr_multiplier;
  std::int32_t type;
  std::int32_t reserved;
};

/// master = the model weights in fp32, every tensor in one launch.
void launch_mixed_master_init(mixed_tensor_slot const* slots, tensor_chunk const* chunks,
                              std::size_t chunk_count, cuda::stream_view stream);
/// partials[c] = Σ (gradient · inv loss scale)² over chunk c, in a fixed order.
void launch_mixed_norm_partials(mixed_tensor_slot const* slots, tensor_chunk const* chunks,
                                std::size_t chunk_count, float const* loss_scale, float* partials,
                                cuda::stream_view stream);
/// One block: the norm from `partial_count` partials (none: no clipping), the skip decision,
/// and the step's values in the state.
void launch_mixed_finalize(mixed_adamw_device_state* state, float const* partials,
                           std::size_t partial_count, float const* loss_scale,
                           unsigned int const* all_finite,
                           train::mixed_adamw_options const& options, cuda::stream_view stream);
/// The update of every tensor, unless the state says the step is skipped.
void launch_mixed_adamw(mixed_tensor_slot const* slots, tensor_chunk const* chunks,
                        std::size_t chunk_count, mixed_adamw_device_state const* state,
                        train::mixed_adamw_options const& options, cuda::stream_view stream);

}  // namespace graphstep::train::detail
