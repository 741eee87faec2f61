#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bucketed_all_reduce.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <utility>

namespace graphstep::nccl {

bucketed_all_reduce::bucketed_all_reduce(nccl_comm_view comm, void* gradients, bucket_plan plan,
                                         dtype type)
    : bucketed_all_reduce{std::move(comm), gradients, plan.buffer_bytes, std::move(plan), type} {}

bucketed_all_reduce::bucketed_all_reduce(nccl_comm_view comm, void* gradients,
                                         std::size_t gradient_bytes, bucket_plan plan, dtype type)
    : comm_{std::move(comm)},
      gradients_{static_cast<unsigned char*>(gradients)},
      plan_{std::move(plan)},
      type_{type},
      launched_(plan_.buckets.size(), false) {
  GRAPHSTEP_EXPECTS(gradients != nullptr, "bucketed_all_reduce: the gradient buffer is null");
  GRAPHSTEP_EXPECTS(!plan_.buckets.empty(), "bucketed_all_reduce: the plan has no bucket");
  GRAPHSTEP_EXPECTS(gradient_bytes >= plan_.buffer_bytes,
                    "bucketed_all_reduce: the gradient buffer holds " +
                        std::to_string(gradient_bytes) + " bytes but the plan needs " +
                        std::to_string(plan_.buffer_bytes) + ": allocate plan.buffer_bytes");
  for (auto const& b : plan_.buckets) {
    GRAPHSTEP_EXPECTS(b.bytes % size_in_bytes(type) == 0,
                      "bucketed_all_reduce: a bucket of " + std::to_string(b.bytes) +
                          " bytes is not a whole number of " + name(type) + " elements");
  }
  ready_.resize(plan_.buckets.size());
}

void bucketed_all_reduce::bucket_ready(std::size_t index, cuda::stream_view compute) {
  GRAPHSTEP_EXPECTS(index < plan_.buckets.size(),
                    "bucketed_all_reduce: bucket " + std::to_string(index) + " of " +
                        std::to_string(plan_.buckets.size()) + " does not exist");
  GRAPHSTEP_EXPECTS(!launched_[index], "bucketed_all_reduce: bucket " + std::to_string(index) +
                                           " was launched twice before a join");
  bucket const& b = plan_.buckets[index];
  ready_[index].record(compute);
  comm_stream_.view().wait(ready_[index]);
  buffer_view const data{gradients_ + b.offset, b.bytes, type_};
  all_reduce(data, data, reduce_op::avg, comm_, comm_stream_);
  launched_[index] = true;
}

void bucketed_all_reduce::all(cuda::stream_view compute) {
  for (std::size_t i = 0; i < launched_.size(); ++i) {
    if (!launched_[i]) bucket_ready(i, compute);
  }
  join(compute);
}

void bucketed_all_reduce::join(cuda::stream_view compute) {
  done_.record(comm_stream_);
  compute.wait(done_);
  std::fill(launched_.begin(), launched_.end(), false);
}

}  // namespace graphstep::nccl
