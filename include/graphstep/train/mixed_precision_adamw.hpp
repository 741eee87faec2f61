#pragma once

/// @file train/mixed_precision_adamw.hpp
/// @brief `mixed_precision_adamw`: AdamW over bf16, fp16 or fp32 model weights with fp32 master
/// weights, parameter groups, global-norm clipping and loss-scale handling decided on the
/// device, and optional stochastic rounding; its step can be captured into a graph.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/optimizer.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <string>
#include <vector>

namespace graphstep::train {

class loss_scaler;

namespace detail {
struct mixed_adamw_plan;  // what the constructor checks and plans before it allocates
}

/// @brief AdamW with fp32 master weights (torch.optim.AdamW's formula, decoupled decay).
///
/// Each step, all capturable, on one stream: (with clipping or a skip threshold) one
/// multi-tensor launch computes per-chunk sums of squares of the unscaled gradients; one
/// single-block launch sums them in a fixed order into the global norm, decides whether the step
/// is skipped (`skips_step`: the loss scaler found an inf or NaN, the norm is above
/// `skip_norm`, or the norm is needed and not finite; a skip is counted), and if not advances
/// the device step count and writes the step's learning rate, bias corrections, inverse loss
/// scale and clip factor to device memory; one multi-tensor launch updates the fp32 master
/// weights and the fp32 moments and writes the rounded model weights. Nothing of a step is frozen
/// at capture: every replay reads its own step's values. Captured where a step can be skipped
/// (with a loss scaler, clipping or `skip_norm`), the update is the body of a conditional node
/// (`graphs::capture_if`) on the device's decision, so a skipped step launches no update; eagerly,
/// or with a driver older than 12.4, the update kernel returns at once instead.
///
/// The master weights start as the model weights converted to fp32 at construction. Its
/// buffers come from `resource` and go back to it on the constructor's stream: that stream and
/// the resource must outlive the optimizer (see `cuda::device_buffer`). Move-only. The
/// interface (`step`, `set_schedule`, `read_learning_rate_from`, `steps_taken`, `save_to`,
/// `restore_from`) is `optimizer`'s; `save_to` adds `<prefix>/step` (the int64 step count,
/// then the fp64 products beta1^step and beta2^step), `<prefix>/skipped_steps` (a uint32; a
/// checkpoint without it restores 0) and, for each tensor t, `<prefix>/<t>/` `master`,
/// `exp_avg` and `exp_avg_sq`.
class mixed_precision_adamw final : public optimizer {
 public:
  /// @param scaler the loss scaler whose scale the gradients carry, or null; it must outlive
  /// the optimizer's steps. With one, the step unscales in fp32 as it reads, and is skipped
  /// when the scaler's `check` found an inf or NaN.
  /// @throws usage_error (no tensor, a tensor that fails `validate(parameter)`, bad options,
  /// groups or schedule, stochastic rounding with an fp16 tensor, a capturing stream),
  /// out_of_memory, no_device_error, cuda_error
  mixed_precision_adamw(std::vector<parameter> const& parameters,
                        std::vector<parameter_group> const& groups,
                        mixed_adamw_options const& options, lr_schedule const& schedule,
                        loss_scaler const* scaler, cuda::stream_view stream,
                        cuda::memory_resource& resource = cuda::default_resource());

  /// @brief Over every tensor of the weights' layout, in its order and its parameter group: the
  /// weights in `weights` and the gradients in `gradients`, a buffer of the same layout. Tensor
  /// t of `save_to`, `master_weights` and the messages is the layout's tensor t. Both buffers
  /// must outlive the optimizer.
  /// @throws as the constructor above, and usage_error (an empty layout, a moved-from buffer,
  /// gradients of another layout)
  mixed_precision_adamw(memory::parameter_buffer& weights,
                        memory::parameter_buffer const& gradients,
                        std::vector<parameter_group> const& groups,
                        mixed_adamw_options const& options, lr_schedule const& schedule,
                        loss_scaler const* scaler, cuda::stream_view stream,
                        cuda::memory_resource& resource = cuda::default_resource());

  /// @brief The global norm of the last step's unscaled gradients, before clipping (0 when
  /// neither clipping nor `skip_norm` is on; synchronizes `stream`).
  [[nodiscard]] float last_gradient_norm(cuda::stream_view stream) const;
  /// @brief The global norm of the last step's unscaled gradients, before clipping, in device
  /// memory: read it after a replay with `memory::host_readback<float>`, without a
  /// synchronization. 0 when neither clipping nor `skip_norm` is on.
  [[nodiscard]] float const* gradient_norm() const noexcept;
  /// @brief The number of steps skipped so far (gradients not finite, or the norm above
  /// `skip_norm` or not finite), in device memory, for `memory::host_readback<std::uint32_t>`.
  /// Counted from construction, saved by `save_to` and restored by `restore_from`.
  [[nodiscard]] std::uint32_t const* skipped_steps() const noexcept;
  /// @brief The fp32 master weights of tensor `tensor`, in device memory.
  /// @throws usage_error (no such tensor)
  [[nodiscard]] float const* master_weights(std::size_t tensor) const;

 private:
  mixed_precision_adamw(detail::mixed_adamw_plan const& plan,
                        std::vector<parameter> const& parameters,
                        mixed_adamw_options const& options, lr_schedule const& schedule,
                        loss_scaler const* scaler, cuda::stream_view stream,
                        cuda::memory_resource& resource);
  void do_step(cuda::stream_view stream) override;
  void do_set_schedule(lr_schedule const& schedule, cuda::stream_view stream) override;
  void do_read_learning_rate_from(float const* learning_rate, cuda::stream_view stream) override;
  [[nodiscard]] std::int64_t do_steps_taken(cuda::stream_view stream) const override;
  void do_save_to(checkpoint& into, std::string const& prefix,
                  cuda::stream_view stream) const override;
  void do_restore_from(checkpoint const& from, std::string const& prefix,
                       cuda::stream_view stream) override;
  [[nodiscard]] bool moved_from() const noexcept override { return state_.empty(); }
  template <typename T>
  T read(std::size_t offset, cuda::stream_view stream) const;

  mixed_adamw_options options_;
  float const* loss_scale_{nullptr};         // the scaler's, or null
  unsigned int const* all_finite_{nullptr};  // the scaler's, or null
  std::size_t chunk_count_{};
  std::vector<std::size_t> first_element_;  // of each tensor among all elements
  cuda::device_buffer state_;               // detail::mixed_adamw_device_state
  cuda::device_buffer slots_;               // detail::mixed_tensor_slot, one per tensor
  cuda::device_buffer chunks_;              // tensor_chunk
  cuda::device_buffer partials_;            // float, one per chunk: sums of squares
  cuda::device_buffer buffers_;             // float: master, exp_avg, exp_avg_sq of all elements
  bool conditional_update_{false};          // captured, the update is a conditional node
};

}  // namespace graphstep::train
