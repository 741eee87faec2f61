#pragma once

/// @file train/multi_tensor_optimizer.hpp
/// @brief `multi_tensor_optimizer`, the base `sgd` and `adam` share: one device state, one chunk
/// table, one multi-tensor kernel per step.

#include <cstdint>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/optimizer.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <memory>
#include <string>
#include <vector>

namespace graphstep::train {

class loss_scaler;

/// @brief What `sgd` and `adam` share, and all they share: fp32 tensors of parameter group 0,
/// one device state (step count, schedule, where the learning rate comes from), one table of
/// chunks and up to two fp32 state buffers per element. Each step is two launches however many
/// tensors: one decides the step (skip, or advance the device step count and take the loss
/// scale's inverse), one multi-tensor kernel, the optimizer's own, updates every tensor.
///
/// Its tables and state buffers come from the constructor's `resource` (a `memory::memory_pool`
/// counts them) and go back to it on the constructor's stream: that stream and the resource
/// must outlive it.
class multi_tensor_optimizer : public optimizer {
 public:
  ~multi_tensor_optimizer() override;
  multi_tensor_optimizer(multi_tensor_optimizer const&) = delete;
  multi_tensor_optimizer& operator=(multi_tensor_optimizer const&) = delete;

 protected:
  /// The device memory and tables, defined where the kernels are launched.
  class tables;

  /// `buffers`: the names of the fp32 state buffers each element has, as `save_to` names them.
  multi_tensor_optimizer(char const* name, std::vector<parameter> const& parameters,
                         std::vector<std::string> buffers, lr_schedule const& schedule,
                         loss_scaler const* scaler, cuda::stream_view stream,
                         cuda::memory_resource& resource);
  multi_tensor_optimizer(multi_tensor_optimizer&& other) noexcept;
  multi_tensor_optimizer& operator=(multi_tensor_optimizer&& other) noexcept;

 private:
  // The optimizer's own update of every tensor, enqueued after the step was decided.
  virtual void launch_update(tables const& on, cuda::stream_view stream) const = 0;

  void do_step(cuda::stream_view stream) final;
  void do_set_schedule(lr_schedule const& schedule, cuda::stream_view stream) final;
  void do_read_learning_rate_from(float const* learning_rate, cuda::stream_view stream) final;
  [[nodiscard]] std::int64_t do_steps_taken(cuda::stream_view stream) const final;
  void do_save_to(checkpoint& into, std::string const& prefix,
                  cuda::stream_view stream) const final;
  void do_restore_from(checkpoint const& from, std::string const& prefix,
                       cuda::stream_view stream) final;
  [[nodiscard]] bool moved_from() const noexcept final { return tables_ == nullptr; }

  std::unique_ptr<tables> tables_;
};

}  // namespace graphstep::train
