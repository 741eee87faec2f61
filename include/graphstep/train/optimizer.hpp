#pragma once

/// @file train/optimizer.hpp
/// @brief `optimizer`, the one interface of every optimizer whose step can be captured into a
/// graph, and the multi-tensor SGD and Adam that implement it through one base
/// (`mixed_precision_adamw.hpp` is the third).

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <memory>
#include <string>
#include <vector>

namespace graphstep::train {

class loss_scaler;

/// @brief What a training loop does with any optimizer, whichever it is: step, change the
/// schedule, read the learning rate from the device, count the steps, save and restore.
///
/// Every optimizer keeps its step count and learning-rate schedule in device memory and its
/// kernels read them, so a captured `step()` follows the schedule on every replay instead of
/// freezing the learning rate of the capture. Every one is built the same way, before the
/// capture: from a `parameter_layout` and the weight and gradient buffers it lays out
/// (or a list of `parameter`s), its options, a schedule, and the `loss_scaler` whose scale
/// the gradients carry, or none. With a scaler, each step multiplies the gradients by
/// 1 / `*scaler.scale()` as it reads them and is skipped on the device, step count included,
/// when the scaler's `check` found an inf or NaN.
///
/// Calls that change or read the state from the host (`set_schedule`,
/// `read_learning_rate_from`, `steps_taken`, `save_to`, `restore_from`) are refused inside a
/// capture and synchronize their stream; they act on graphs captured before them. `step()` is
/// the only capturable call. Move-only; a moved-from optimizer refuses every call.
class optimizer {
 public:
  virtual ~optimizer();
  optimizer(optimizer const&) = delete;
  optimizer& operator=(optimizer const&) = delete;

  /// @brief Enqueues one optimizer step on `stream`; capturable.
  /// @throws usage_error (a moved-from optimizer), cuda_error
  void step(cuda::stream_view stream);
  /// @brief Replaces the schedule from the next step on. Synchronizes `stream`, so not once a
  /// step: a learning rate the host computes each step goes through `read_learning_rate_from`.
  /// @throws usage_error (invalid schedule, capturing stream), cuda_error
  void set_schedule(lr_schedule const& schedule, cuda::stream_view stream);
  /// @brief From the next step on, each step reads its learning rate (before a group's
  /// multiplier) from `learning_rate` in device memory when it runs, instead of evaluating the
  /// schedule; null goes back to the schedule. For a learning rate the host computes each step:
  /// keep it in a `memory::step_input<float>`, pass its `data()` here once, and `set` the
  /// step's value before each step or replay, on the step's stream; no per-step call
  /// synchronizes, and a captured step reads each replay's value. The memory must stay valid
  /// while steps run; the device does not check the value (a negative or non-finite learning
  /// rate is applied as it is).
  /// @throws usage_error (a capturing stream), cuda_error
  void read_learning_rate_from(float const* learning_rate, cuda::stream_view stream);
  /// @brief Steps taken, skipped ones not counted (synchronizes `stream`).
  /// @throws usage_error (a capturing stream), cuda_error
  [[nodiscard]] std::int64_t steps_taken(cuda::stream_view stream) const;
  /// @brief Adds the optimizer's state to `into` under `prefix`: the value `<prefix>/step`
  /// (its int64 step count first) and, for each tensor t in the constructor's order, each of
  /// its fp32 state buffers as `<prefix>/<t>/<buffer>` of shape [count] (the buffers are the
  /// optimizer's: `momentum_buffer` for SGD with momentum, `exp_avg` and `exp_avg_sq` for
  /// Adam, `master`, `exp_avg` and `exp_avg_sq` for AdamW). The model weights are the
  /// model's to save; with them, this is everything a step carries to the next. The schedule,
  /// options and groups are the constructor's, not state. Between steps.
  /// @throws usage_error (a capturing stream, names already in `into`), cuda_error
  void save_to(checkpoint& into, std::string const& prefix, cuda::stream_view stream) const;
  /// @brief Loads what `save_to` added under `prefix`: with the model weights loaded too, the
  /// next step is the one the saved optimizer would have taken next, bit for bit; graphs
  /// captured before it replay from the loaded state. Every entry is checked before any is
  /// copied: a checkpoint of another optimizer or layout (a missing entry, fewer or more
  /// tensors, another size or dtype) is refused naming the entry, and changes nothing.
  /// @throws usage_error (a capturing stream, a missing or mismatched entry), cuda_error
  void restore_from(checkpoint const& from, std::string const& prefix, cuda::stream_view stream);

  /// @brief The optimizer's name as its messages give it ("sgd").
  [[nodiscard]] char const* name() const noexcept { return name_; }

 protected:
  explicit optimizer(char const* name) noexcept : name_{name} {}
  optimizer(optimizer&& other) noexcept = default;
  optimizer& operator=(optimizer&& other) noexcept = default;

 private:
  // Each is called after the checks above (not capturing, a valid schedule).
  virtual void do_step(cuda::stream_view stream) = 0;
  virtual void do_set_schedule(lr_schedule const& schedule, cuda::stream_view stream) = 0;
  virtual void do_read_learning_rate_from(float const* learning_rate, cuda::stream_view stream) = 0;
  [[nodiscard]] virtual std::int64_t do_steps_taken(cuda::stream_view stream) const = 0;
  virtual void do_save_to(checkpoint& into, std::string const& prefix,
                          cuda::stream_view stream) const = 0;
  virtual void do_restore_from(checkpoint const& from, std::string const& prefix,
                               cuda::stream_view stream) = 0;
  [[nodiscard]] virtual bool moved_from() const noexcept = 0;
  void expect_usable(char const* call, cuda::stream_view stream, bool capturable) const;

  char const* name_;
};

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
