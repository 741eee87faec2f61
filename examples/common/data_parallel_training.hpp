#pragma once

// What a data-parallel example trains with, on top of its model: the communicator from the
// launcher's variables, graphstep's step guard over every step (a rank that dies, stops or
// issues other collectives ends the others with an error, not a hang), and
// the model's gradients averaged across the ranks inside its step, in buckets, each reduced as
// soon as the backward has finished it. A model gives `gradients()`, and takes hooks through
// `set_gradients_finished` and `set_after_backward`.

#include <chrono>
#include <cstddef>
#include <graphstep/nccl.hpp>
#include <optional>
#include <utility>

namespace examples {

class data_parallel_training {
 public:
  /// The communicator comes first: it makes the rank's device current, and the stream, the
  /// pool and the model belong to the device current when they are made.
  /// `fixed_step_timeout`: every step's limit, and the capture check's; zero: the step guard's
  /// adaptive deadline, never below `min_step_timeout` once steps were measured.
  data_parallel_training(std::chrono::seconds fixed_step_timeout,
                         std::chrono::seconds min_step_timeout)
      : comm_{graphstep::nccl::communicator_from_environment()},
        guard_{comm_.view(), guard_options(fixed_step_timeout, min_step_timeout)} {}
  data_parallel_training(data_parallel_training const&) = delete;
  data_parallel_training& operator=(data_parallel_training const&) = delete;
  data_parallel_training(data_parallel_training&&) = delete;
  data_parallel_training& operator=(data_parallel_training&&) = delete;
  ~data_parallel_training() = default;

  /// Averages `model`'s gradients (`gradients`, laid out in the order its backward finishes
  /// them) in the buckets of `plan`. The model must not outlive this object: its hooks call
  /// into it.
  template <typename Model>
  void average_gradients(Model& model, graphstep::device_span gradients,
                         graphstep::nccl::bucket_plan plan) {
    reducer_.emplace(comm_.view(), gradients, std::move(plan));
    model.set_gradients_finished([this](std::size_t finished, graphstep::cuda::stream_view s) {
      reducer_->ready_through(finished, s);
    });
    model.set_after_backward([this](graphstep::cuda::stream_view s) {
      if (!during_backward_) during_backward_ = reducer_->buckets_ready();
      reducer_->all(s);  // the rest, then the optimizer's stream waits for every bucket
    });
  }

  /// One step (eager work or a replay) under the guard, waited for before its results are read.
  template <typename Issue>
  void step(graphstep::cuda::stream_view stream, Issue&& issue) {
    guard_.step(stream, std::forward<Issue>(issue));
    guard_.wait();
  }
  /// After the capture: every rank captured the same collectives.
  void captured(graphstep::cuda::stream_view stream) { guard_.captured(stream); }

  [[nodiscard]] graphstep::nccl::nccl_comm_view comm() const { return comm_.view(); }
  [[nodiscard]] std::size_t buckets() const {
    return reducer_ ? reducer_->plan().buckets.size() : 0;
  }
  /// Buckets reduced while the first step's backward still ran.
  [[nodiscard]] std::size_t buckets_during_backward() const { return during_backward_.value_or(0); }

 private:
  static graphstep::nccl::step_guard_options guard_options(std::chrono::seconds fixed,
                                                           std::chrono::seconds at_least) {
    graphstep::nccl::step_guard_options options;
    if (fixed.count() > 0) {
      options.step_timeout = fixed;
      options.sequence_timeout = fixed;
    } else {
      options.step_timeout.at_least = at_least;
    }
    return options;
  }

  graphstep::nccl::nccl_comm comm_;
  graphstep::nccl::step_guard guard_;
  std::optional<graphstep::nccl::bucketed_all_reduce> reducer_;
  std::optional<std::size_t> during_backward_;
};

}  // namespace examples
