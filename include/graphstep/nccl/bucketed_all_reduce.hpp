#pragma once

/// @file nccl/bucketed_all_reduce.hpp
/// @brief Averages gradients across ranks bucket by bucket on a communication stream, so the
/// all-reduce of a bucket overlaps the backward pass of the layers before it.

#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <vector>

namespace graphstep::nccl {

/// @brief Gradients live in one flat static buffer laid out by a `bucket_plan`. When the
/// backward pass has written bucket i, `bucket_ready(i, compute)` forks the communication
/// stream from the compute stream with an event and averages the bucket there (`ncclAvg`);
/// `join(compute)` makes the compute stream wait for every launched bucket. Forks and joins are
/// events, so all of it can be captured into the step's graph.
class bucketed_all_reduce {
 public:
  /// @param gradients the flat buffer, at an address that never moves (the step's static
  /// memory), of the plan's dtype and at least `plan.buffer_count` elements
  /// @throws usage_error (an empty, null, misaligned or too small buffer, one of another dtype
  /// than the plan's, a plan without buckets), cuda_error
  bucketed_all_reduce(nccl_comm_view comm, device_span gradients, bucket_plan plan);

  /// @brief Bucket `index` is complete on `compute`: average it across ranks. Buckets are
  /// reduced in the plan's order on every rank, whatever order they are made ready in: NCCL
  /// pairs the ranks' collectives by their order, so a bucket made ready before the ones ahead
  /// of it waits for them (on the host: nothing is launched until they are ready too).
  /// @throws usage_error (index out of range, bucket made ready twice before a join)
  void bucket_ready(std::size_t index, cuda::stream_view compute);
  /// @brief Makes ready every bucket not ready yet that lies within the buffer's first `count`
  /// elements. For gradients laid out in the order the backward finishes them (the plan's order),
  /// call it with the extent the backward has finished so far: each bucket is reduced as soon as
  /// the backward has passed its end. The same extent again makes nothing ready.
  void ready_through(std::size_t count, cuda::stream_view compute);
  /// @brief Buckets made ready since the last join.
  [[nodiscard]] std::size_t buckets_ready() const noexcept;
  /// @brief Makes every bucket not yet ready ready, then joins.
  void all(cuda::stream_view compute);
  /// @brief `compute` waits for every launched bucket; the next step can make them ready again.
  /// @throws usage_error when a bucket was made ready but still waits for one ahead of it that
  /// never was (its all-reduce would pair with another bucket on the other ranks); the state is
  /// reset all the same
  void join(cuda::stream_view compute);

  [[nodiscard]] bucket_plan const& plan() const noexcept { return plan_; }
  [[nodiscard]] cuda::stream_view communication_stream() const noexcept { return comm_stream_; }

 private:
  nccl_comm_view comm_;
  device_span gradients_;
  bucket_plan plan_;
  graphstep::cuda::stream comm_stream_;
  std::vector<cuda::event> ready_;
  cuda::event done_;
  std::vector<bool> made_ready_;
  std::size_t next_to_launch_{0};  ///< the plan's order: buckets before it are launched

  void launch(std::size_t index);
};

}  // namespace graphstep::nccl
