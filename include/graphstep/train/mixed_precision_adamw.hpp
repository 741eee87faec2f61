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
#include <graphstep/memory/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <string>
#include <vector>

namespace graphstep::train {

namespace detail {
struct mixed_adamw_plan;  // what the constructor checks and plans before it allocates
}

/// @brief AdamW with fp32 master weights (torch.optim.AdamW's formula, decoupled decay).
///
/// Each step, all capturable, on one stream: (with clipping) one multi-tensor launch computes
/// per-chunk sums of squares of the unscaled gradients; one single-block launch sums them in a
/// fixed order into the global norm, decides whether the step is skipped (the `all_finite` flag
/// is 0, or clipping is on and the norm is not finite), and if not advances the device step
/// count and writes the step's learning rate, bias corrections, inverse loss scale and clip
/// factor to device memory; one multi-tensor launch updates the fp32 master weights and the
/// fp32 moments and writes the rounded model weights. Nothing of a step is frozen at capture:
/// every replay reads its own step's values.
///
/// The master weights start as the model weights converted to fp32 at construction. Its
/// buffers come from `resource` and go back to it on the constructor's stream: that stream and
/// the resource must outlive the optimizer (see `cuda::device_buffer`). Move-only.
class mixed_precision_adamw {
 public:
  /// @throws usage_error (no tensor, a tensor that fails `validate(parameter)`, bad options,
  /// groups or schedule, stochastic rounding with an fp16 tensor, a capturing stream),
  /// out_of_memory, no_device_error, cuda_error
  mixed_precision_adamw(std::vector<parameter> const& parameters,
                        std::vector<parameter_group> const& groups,
                        mixed_adamw_options const& options, lr_schedule const& schedule,
                        gradient_scaling const& scaling, cuda::stream_view stream,
                        cuda::memory_resource& resource = cuda::default_resource());

  /// @brief Over every tensor of `layout`, in its order and its parameter group: the weights in
  /// the buffer at `values` and the gradients at `gradients`, both laid out by `layout`. Tensor
  /// t of `save_to`, `master_weights` and the messages is the layout's tensor t.
  /// @throws as the constructor above, and usage_error (an empty layout, a null buffer)
  mixed_precision_adamw(memory::parameter_layout const& layout, void* values, void const* gradients,
                        std::vector<parameter_group> const& groups,
                        mixed_adamw_options const& options, lr_schedule const& schedule,
                        gradient_scaling const& scaling, cuda::stream_view stream,
                        cuda::memory_resource& resource = cuda::default_resource());

  /// @brief Enqueues one step on `stream`; capturable.
  /// @throws cuda_error
  void step(cuda::stream_view stream) const;
  /// @brief Replaces the schedule from the next step on. Not during a capture; synchronizes
  /// `stream`, so not once a step: a learning rate the host computes each step goes through
  /// `read_learning_rate_from`.
  /// @throws usage_error (invalid schedule, capturing stream), cuda_error
  void set_schedule(lr_schedule const& schedule, cuda::stream_view stream);
  /// @brief From the next step on, each step reads its learning rate (before its group's
  /// multiplier) from `learning_rate` in device memory when it runs, instead of evaluating the
  /// schedule; null goes back to the schedule. For a learning rate the host computes each step:
  /// keep it in a `memory::step_input<float>`, pass its `data()` here once, and `set` the
  /// step's value before each step or replay, on the step's stream; no per-step call
  /// synchronizes, and a captured step reads each replay's value. The memory must stay valid
  /// while steps run; the device does not check the value (a negative or non-finite learning
  /// rate is applied as it is). Not during a capture (it writes the optimizer's device state
  /// and synchronizes `stream`); works on graphs captured before it.
  /// @throws usage_error (a capturing stream), cuda_error
  void read_learning_rate_from(float const* learning_rate, cuda::stream_view stream);

  /// @brief Steps taken, skipped ones not counted (synchronizes `stream`).
  [[nodiscard]] std::int64_t steps_taken(cuda::stream_view stream) const;
  /// @brief The global norm of the last step's unscaled gradients, before clipping (0 when
  /// clipping is off; synchronizes `stream`).
  [[nodiscard]] float last_gradient_norm(cuda::stream_view stream) const;
  /// @brief Adds the optimizer's state to `into`, under `prefix`: the step count and the fp64
  /// products beta^step (value `<prefix>/step`), and for each tensor t, in the order given to
  /// the constructor, its fp32 master weights and both fp32 moments (`<prefix>/<t>/master`,
  /// `…/exp_avg`, `…/exp_avg_sq`), each of shape [count]. The model weights are the model's to
  /// save (`add_device_tensor`, under the model's names): with them, this is everything a step
  /// carries to the next. The schedule, options, groups and seed are the constructor's, not
  /// state. Between steps, not in a capture; synchronizes `stream`.
  /// @throws usage_error (a capturing stream, names already in `into`), cuda_error
  void save_to(checkpoint& into, std::string const& prefix, cuda::stream_view stream) const;
  /// @brief Loads what `save_to` added under `prefix`: with the model weights loaded too, the
  /// next step is the one the saved optimizer would have taken next, bit for bit; graphs
  /// captured before it replay from the loaded state. Every entry is checked before any is copied: a checkpoint of another
  /// layout (fewer tensors, another size or dtype) is refused naming the entry and both
  /// layouts, and changes nothing. Between steps, not in a capture; synchronizes `stream`.
  /// @throws usage_error (a capturing stream, a missing or mismatched entry), cuda_error
  void restore_from(checkpoint const& from, std::string const& prefix, cuda::stream_view stream);

  /// @brief The fp32 master weights of tensor `tensor`, in device memory.
  /// @throws usage_error (no such tensor)
  [[nodiscard]] float const* master_weights(std::size_t tensor) const;

 private:
  mixed_precision_adamw(detail::mixed_adamw_plan const& plan,
                        std::vector<parameter> const& parameters,
                        mixed_adamw_options const& options, lr_schedule const& schedule,
                        gradient_scaling const& scaling, cuda::stream_view stream,
                        cuda::memory_resource& resource);
  template <typename T>
  T read(std::size_t offset, cuda::stream_view stream) const;

  mixed_adamw_options options_;
  gradient_scaling scaling_;
  std::size_t chunk_count_{};
  std::vector<std::size_t> first_element_;  // of each tensor among all elements
  cuda::device_buffer state_;               // detail::mixed_adamw_device_state
  cuda::device_buffer slots_;               // detail::mixed_tensor_slot, one per tensor
  cuda::device_buffer chunks_;              // tensor_chunk
  cuda::device_buffer partials_;            // float, one per chunk: sums of squares
  cuda::device_buffer buffers_;             // float: master, exp_avg, exp_avg_sq of all elements
};

}  // namespace graphstep::train
