#pragma once

/// @file train/micro_batch_loop.hpp
/// @brief `micro_batch_loop`: gradient accumulation inside one captured step. K micro-batches
/// run in a device loop whose index lives on the device, so the graph's node count does not
/// grow with K and one launch runs the whole optimizer step.

#include <cstddef>
#include <functional>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/train/micro_batch_plan.hpp>

namespace graphstep::train {

/// @brief K micro-batches whose gradients add up in one gradient buffer, before one all-reduce
/// and one optimizer step.
///
/// `run(stream, loss, body)` enqueues, on `stream`: the gradients zeroed; the loop's state reset
/// (index 0, loss sum 0); then K times the user's `body` (forward and backward of micro-batch
/// `*index()`, adding its gradients into the buffer) followed by one advance kernel (adds
/// `*loss` to the sum, increments the index; after the last, `*loss()` = sum / K). Inside a
/// capture the K passes are one `graphs::capture_while` node whose body is captured once; outside
/// one the same kernels run in a host loop, so an eager step and a replay compute bit for bit
/// the same values. What comes after the loop (the all-reduce, once per optimizer step; the
/// optimizer) the caller issues after `run`.
///
/// The body gets the stream to issue to: inside a capture, the conditional node's own stream,
/// not `stream`. It must issue everything there, and, captured, may hold kernels, memsets,
/// copies and nested conditionals only (CUDA's rule for conditional bodies): no allocation from
/// a pool, no other stream. Its micro-batch's data it reads at `*index()`, for example through
/// `select`, which copies slice `*index()` of a `step_input` holding all K micro-batches. Each
/// micro-batch's loss gradient should carry `loss_weight()` (1/K), so the buffer ends with the
/// mean gradient of the K micro-batches, as a batch K times larger would give.
///
/// Its state comes from `resource` and goes back to it on the constructor's stream (see
/// `cuda::device_buffer`). Move-only.
class micro_batch_loop {
 public:
  /// @brief K = `micro_batches` micro-batches accumulating into `gradients` (device memory, of
  /// any dtype, zeroed at the start of each `run`).
  /// @throws usage_error (K below 1, empty or null gradients, a capturing stream),
  /// out_of_memory, cuda_error
  micro_batch_loop(int micro_batches, device_span gradients, cuda::stream_view stream,
                   cuda::memory_resource& resource = cuda::default_resource());
  /// @brief Accumulating into a layout's gradient buffer: all of it is zeroed each step.
  /// @throws as above, and usage_error (a moved-from buffer)
  micro_batch_loop(int micro_batches, memory::parameter_buffer const& gradients,
                   cuda::stream_view stream,
                   cuda::memory_resource& resource = cuda::default_resource());

  [[nodiscard]] int micro_batches() const noexcept { return micro_batches_; }
  /// @brief 1/K: what each micro-batch's loss gradient is multiplied by.
  [[nodiscard]] float loss_weight() const noexcept {
    return 1.0F / static_cast<float>(micro_batches_);
  }
  /// @brief The micro-batch being run, 0 to K - 1, in device memory (an `unsigned int`).
  [[nodiscard]] unsigned int const* index() const noexcept;
  /// @brief The mean of the K micro-batch losses of the last `run`, in device memory (0 when
  /// `run` was given no loss); read it after a replay with `memory::host_readback<float>`.
  [[nodiscard]] float const* loss() const noexcept;

  /// @brief Enqueues the K micro-batches of one optimizer step (see the class).
  /// @param micro_batch_loss the device float where `body` leaves its micro-batch's loss, or
  /// null
  /// @throws usage_error (no body; a body that failed while captured, as one allocating from a
  /// pool, with what it was refused for), cuda_error
  void run(cuda::stream_view stream, float const* micro_batch_loss,
           std::function<void(cuda::stream_view)> const& body) const;

  /// @brief As `run` above, with the last micro-batch after the device loop: `body` runs the
  /// first K - 1 (the loop is left out at K = 1), then `last` runs micro-batch K - 1 on `stream`
  /// itself, captured straight into the step. `last` may therefore do what a conditional node's
  /// body cannot: hand each gradient bucket its backward has finished to an all-reduce on
  /// another stream (`nccl::bucketed_all_reduce::ready_through`), so that the all-reduce
  /// overlaps the last micro-batch's backward, as DDP's does. `last` does what `body` does
  /// (reads slice `*index()`, adds its gradients into the buffer, leaves its loss in
  /// `*micro_batch_loss`); the values are bit for bit those of `run` without it, and the node
  /// count still does not grow with K.
  /// @throws as `run`, and usage_error (no `last`)
  void run(cuda::stream_view stream, float const* micro_batch_loss,
           std::function<void(cuda::stream_view)> const& body,
           std::function<void(cuda::stream_view)> const& last) const;

  /// @brief What `run` issues first, on `stream`: the gradients zeroed and the loop's state
  /// reset (index 0, loss sum 0).
  /// @throws usage_error (a moved-from loop), cuda_error
  void begin(cuda::stream_view stream) const;
  /// @brief One micro-batch: `body(stream)`, then the advance (its loss added to the sum, the
  /// index moved on; after the K-th, `loss()` holds the mean). `begin` and then K passes
  /// compute what `run` computes, bit for bit, as K launches: the way trainers replay a
  /// captured micro-batch graph K times, against which the device loop is measured.
  /// @throws usage_error (no body, a moved-from loop), cuda_error
  void pass(cuda::stream_view stream, float const* micro_batch_loss,
            std::function<void(cuda::stream_view)> const& body) const;

  /// @brief Copies micro-batch `*index()`'s `count` elements of `all` (which holds the K
  /// micro-batches' elements one after another) to `into`, on `stream`; for a body.
  /// @throws usage_error (`all` is not K micro-batches of `count` elements, a null `into`),
  /// cuda_error
  template <typename T>
  void select(memory::step_input<T> const& all, T* into, std::size_t count,
              cuda::stream_view stream) const {
    copy_slice(all.data(), into,
               micro_batch_slice_bytes(all.size(), count, sizeof(T), micro_batches_), stream);
  }

 private:
  void start(cuda::stream_view stream, int in_loop) const;
  void issue(cuda::stream_view stream, float const* micro_batch_loss,
             std::function<void(cuda::stream_view)> const& body,
             std::function<void(cuda::stream_view)> const* last) const;
  void copy_slice(void const* all, void* into, std::size_t bytes, cuda::stream_view stream) const;

  int micro_batches_;
  device_span gradients_;
  cuda::device_buffer state_;  // detail::micro_batch_state
};

}  // namespace graphstep::train
