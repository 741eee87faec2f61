#pragma once

/// @file train/adam.hpp
/// @brief `adam`: Adam with L2 weight decay, an `optimizer`.

#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/multi_tensor_optimizer.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <vector>

namespace graphstep::train {

class loss_scaler;

/// @brief Adam with L2 weight decay (torch.optim.Adam) over fp32 tensors of parameter group 0;
/// bias correction uses the device step count. Launches, resources and lifetimes as
/// `multi_tensor_optimizer`'s. For AdamW (decoupled decay) use `mixed_precision_adamw`, which
/// takes fp32 tensors too.
class adam final : public multi_tensor_optimizer {
 public:
  /// @throws as `sgd`'s
  adam(std::vector<parameter> const& parameters, adam_options const& options,
       lr_schedule const& schedule, loss_scaler const* scaler, cuda::stream_view stream,
       cuda::memory_resource& resource = cuda::default_resource());
  /// @brief Over every tensor of the weights' layout, in its order: the weights in `weights`
  /// and the gradients in `gradients`, a buffer of the same layout. Tensor t of `save_to` is
  /// the layout's tensor t. Both buffers must outlive the optimizer.
  /// @throws as the constructor above, and usage_error (an empty layout, a moved-from buffer,
  /// gradients of another layout)
  adam(memory::parameter_buffer& weights, memory::parameter_buffer const& gradients,
       adam_options const& options, lr_schedule const& schedule, loss_scaler const* scaler,
       cuda::stream_view stream, cuda::memory_resource& resource = cuda::default_resource());

 private:
  void launch_update(tables const& on, cuda::stream_view stream) const override;

  adam_options options_;
};

}  // namespace graphstep::train
