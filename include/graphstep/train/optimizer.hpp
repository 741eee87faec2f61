#pragma once

/// @file train/optimizer.hpp
/// @brief `optimizer`, the one interface of every optimizer whose step can be captured into a
/// graph: `sgd` (`sgd.hpp`), `adam` (`adam.hpp`) and `mixed_precision_adamw`
/// (`mixed_precision_adamw.hpp`) implement it.

#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <string>

namespace graphstep::train {

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

}  // namespace graphstep::train
