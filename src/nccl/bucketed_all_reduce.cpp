#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bucketed_all_reduce.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <utility>

#include "detail/span_checks.hpp"

namespace graphstep::nccl {

bucketed_all_reduce::bucketed_all_reduce(nccl_comm_view comm, device_span gradients,
                                         bucket_plan plan)
    : comm_{std::move(comm)},
      gradients_{gradients},
      plan_{std::move(plan)},
      made_ready_(plan_.buckets.size(), false) {
  graphstep::detail::expect_valid_span("bucketed_all_reduce", "the gradient buffer", gradients,
                                       graphstep::detail::empty_span::refused);
  GRAPHSTEP_EXPECTS(!plan_.buckets.empty(), "bucketed_all_reduce: the plan has no bucket");
  GRAPHSTEP_EXPECTS(gradients.type() == plan_.type,
                    "bucketed_all_reduce: the gradient buffer is " + describe(gradients) +
                        " but the plan is of " + name(plan_.type) +
                        "; plan the buckets for the gradients' dtype");
  GRAPHSTEP_EXPECTS(gradients.count() >= plan_.buffer_count,
                    "bucketed_all_reduce: the gradient buffer holds " +
                        std::to_string(gradients.count()) + " elements but the plan needs " +
                        std::to_string(plan_.buffer_count) + ": allocate plan.buffer_count");
  for (auto const& b : plan_.buckets) {
    GRAPHSTEP_EXPECTS(b.count <= plan_.buffer_count && b.offset <= plan_.buffer_count - b.count,
                      "bucketed_all_reduce: a bucket of the plan reaches past its buffer_count");
  }
  ready_.resize(plan_.buckets.size());
}

void bucketed_all_reduce::bucket_ready(std::size_t index, cuda::stream_view compute) {
  GRAPHSTEP_EXPECTS(index < plan_.buckets.size(),
                    "bucketed_all_reduce: bucket " + std::to_string(index) + " of " +
                        std::to_string(plan_.buckets.size()) + " does not exist");
  GRAPHSTEP_EXPECTS(!made_ready_[index], "bucketed_all_reduce: bucket " + std::to_string(index) +
                                             " was made ready twice before a join");
  ready_[index].record(compute);
  made_ready_[index] = true;
  while (next_to_launch_ < made_ready_.size() && made_ready_[next_to_launch_]) {
    launch(next_to_launch_++);
  }
}

void bucketed_all_reduce::ready_through(std::size_t count, cuda::stream_view compute) {
  for (std::size_t i = 0; i < plan_.buckets.size(); ++i) {
    bucket const& b = plan_.buckets[i];
    if (!made_ready_[i] && b.offset + b.count <= count) bucket_ready(i, compute);
  }
}

std::size_t bucketed_all_reduce::buckets_ready() const noexcept {
  return static_cast<std::size_t>(std::count(made_ready_.begin(), made_ready_.end(), true));
}

void bucketed_all_reduce::launch(std::size_t index) {
  bucket const& b = plan_.buckets[index];
  comm_stream_.view().wait(ready_[index]);
  device_span const data = gradients_.subspan(b.offset, b.count);  // checked when made
  all_reduce(data, data, reduce_op::avg, comm_, comm_stream_);
}

void bucketed_all_reduce::all(cuda::stream_view compute) {
  for (std::size_t i = 0; i < made_ready_.size(); ++i) {
    if (!made_ready_[i]) bucket_ready(i, compute);
  }
  join(compute);
}

void bucketed_all_reduce::join(cuda::stream_view compute) {
  done_.record(comm_stream_);
  compute.wait(done_);
  // A bucket ready but not launched waits for one ahead of it that was never made ready.
  auto const first_unlaunched = made_ready_.begin() + static_cast<std::ptrdiff_t>(next_to_launch_);
  auto const waiting = static_cast<std::size_t>(
      std::find(first_unlaunched, made_ready_.end(), true) - made_ready_.begin());
  std::size_t const missing = next_to_launch_;
  std::fill(made_ready_.begin(), made_ready_.end(), false);
  next_to_launch_ = 0;
  GRAPHSTEP_EXPECTS(waiting == made_ready_.size(),
                    "bucketed_all_reduce: bucket " + std::to_string(waiting) +
                        " was made ready but never reduced: it waits for bucket " +
                        std::to_string(missing) +
                        ", which was not made ready before the join. Buckets are reduced in the "
                        "plan's order; make every bucket ready, or call all()");
}

}  // namespace graphstep::nccl
