#pragma once

/// @file train/optimizer.hpp
/// @brief Multi-tensor SGD and Adam/AdamW whose step can be captured into a graph.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <memory>
#include <vector>

namespace graphstep::train {

namespace detail {
class multi_tensor_optimizer;
}

/// @brief What every multi-tensor optimizer shares: it updates every parameter in two kernel
/// launches per step (advance the device step count, then one multi-tensor update), so a
/// captured step costs two nodes however many tensors there are.
///
/// The step count and the learning-rate schedule live in device memory and the kernels read
/// them: a captured `step()` follows the schedule on every replay instead of freezing the
/// learning rate of the capture. The loss scale is read as `mixed_precision_adamw` reads it
/// (`gradient_scaling`): each step multiplies the gradients by 1 / `*loss_scale`, and is
/// skipped on the device, step count included, when `*all_finite` reads 0 (a `loss_scaler`'s
/// `scale()` and `all_finite()` after its `check`). Construct before capturing (it allocates and
/// uploads); `step()` is capturable; change the schedule between replays.
///
/// Its tables and state buffers come from the resource given to the constructor (a
/// `memory::memory_pool` counts them in its budget) and go back to it on the constructor's
/// stream: that stream and the resource must outlive the optimizer (see `cuda::device_buffer`).
class optimizer {
 public:
  virtual ~optimizer();
  optimizer(optimizer&& other) noexcept;
  optimizer& operator=(optimizer&& other) noexcept;
  optimizer(optimizer const&) = delete;
  optimizer& operator=(optimizer const&) = delete;

  /// @brief Enqueues one optimizer step on `stream`; capturable.
  void step(cuda::stream_view stream);
  /// @brief Replaces the schedule from the next step on. Not during a capture.
  /// @throws usage_error (invalid schedule, capturing stream)
  void set_schedule(lr_schedule const& schedule, cuda::stream_view stream);
  /// @brief Steps taken so far, read from the device (synchronizes `stream`).
  [[nodiscard]] std::int64_t steps_taken(cuda::stream_view stream) const;

 protected:
  /// @throws usage_error (no parameter; a parameter that is not fp32, of a group other than 0,
  /// or fails `validate(parameter)`; bad schedule; a capturing stream), out_of_memory,
  /// no_device_error, cuda_error
  optimizer(std::vector<parameter> const& parameters, int state_buffers,
            lr_schedule const& schedule, gradient_scaling const& scaling, cuda::stream_view stream,
            cuda::memory_resource& resource);
  [[nodiscard]] detail::multi_tensor_optimizer& impl() const;

 private:
  virtual void launch_update(cuda::stream_view stream) = 0;
  std::unique_ptr<detail::multi_tensor_optimizer> impl_;
};

/// @brief SGD with PyTorch's semantics: momentum (with dampening, optionally Nesterov) and L2
/// weight decay.
class sgd final : public optimizer {
 public:
  /// @throws usage_error (bad options, and as optimizer), out_of_memory, no_device_error,
  /// cuda_error
  sgd(std::vector<parameter> const& parameters, sgd_options const& options,
      lr_schedule const& schedule, gradient_scaling const& scaling, cuda::stream_view stream,
      cuda::memory_resource& resource = cuda::default_resource());

 private:
  void launch_update(cuda::stream_view stream) override;
  sgd_options options_;
};

/// @brief Adam with L2 weight decay (torch.optim.Adam); bias correction uses the device step
/// count. For AdamW (decoupled decay) use `mixed_precision_adamw`, which takes fp32 tensors too.
class adam final : public optimizer {
 public:
  /// @throws usage_error (bad options, and as optimizer), out_of_memory, no_device_error,
  /// cuda_error
  adam(std::vector<parameter> const& parameters, adam_options const& options,
       lr_schedule const& schedule, gradient_scaling const& scaling, cuda::stream_view stream,
       cuda::memory_resource& resource = cuda::default_resource());

 private:
  void launch_update(cuda::stream_view stream) override;
  adam_options options_;
};

}  // namespace graphstep::train
