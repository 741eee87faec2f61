#pragma once

/// @file train/sgd.hpp
/// @brief `sgd`: SGD with momentum and L2 weight decay, an `optimizer`.

#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/multi_tensor_optimizer.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <vector>

namespace graphstep::train {

class loss_scaler;

/// @brief SGD with PyTorch's semantics: momentum (with dampening, optionally Nesterov) and L2
/// weight decay, over fp32 tensors of parameter group 0. Launches, resources and lifetimes as
/// `multi_tensor_optimizer`'s.
class sgd final : public multi_tensor_optimizer {
 public:
  /// @param scaler the loss scaler whose scale the gradients carry, or null; it must outlive
  /// the optimizer's steps
  /// @throws usage_error (no parameter; a parameter that is not fp32, of a group other than 0,
  /// or fails `validate(parameter)`; bad options or schedule; a capturing stream),
  /// out_of_memory, no_device_error, cuda_error
  sgd(std::vector<parameter> const& parameters, sgd_options const& options,
      lr_schedule const& schedule, loss_scaler const* scaler, cuda::stream_view stream,
      cuda::memory_resource& resource = cuda::default_resource());
  /// @brief Over every tensor of the weights' layout, in its order: the weights in `weights`
  /// and the gradients in `gradients`, a buffer of the same layout. Tensor t of `save_to` is
  /// the layout's tensor t. Both buffers must outlive the optimizer.
  /// @throws as the constructor above, and usage_error (an empty layout, a moved-from buffer,
  /// gradients of another layout)
  sgd(memory::parameter_buffer& weights, memory::parameter_buffer const& gradients,
      sgd_options const& options, lr_schedule const& schedule, loss_scaler const* scaler,
      cuda::stream_view stream, cuda::memory_resource& resource = cuda::default_resource());

 private:
  void launch_update(tables const& on, cuda::stream_view stream) const override;

  sgd_options options_;
};

}  // namespace graphstep::train
