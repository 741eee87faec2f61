// A whole data-parallel step — loss and gradients, bucketed all-reduce, optimizer — captured
// into one graph and replayed equals the same step run eagerly.

#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <graphstep/nccl/bucketed_all_reduce.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <graphstep/nccl/nccl_comm.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/mse_loss.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/sgd.hpp>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/nccl_test.hpp"
#include "common/pool_blocks.hpp"

namespace gs = graphstep;
namespace gn = graphstep::nccl;
namespace gt = graphstep::train;

namespace {

// Two parameter tensors fitted to fixed targets by MSE; their gradients share one flat buffer.
struct replica {
  gs::testing::pool_blocks blocks;  // every buffer below, back to the pool at the end
  gn::bucket_plan plan;
  std::vector<float*> params;
  std::vector<float*> targets;
  float* gradients{};
  float* loss{};
  std::vector<gt::mse_loss> losses;
  std::optional<gt::sgd> optimizer;
  std::optional<gn::bucketed_all_reduce> reducer;

  replica(gs::memory::memory_pool& p, gn::nccl_comm_view comm,
          std::vector<std::size_t> const& counts, gs::cuda::stream_view stream)
      : blocks{p, stream} {
    plan = gn::plan_buckets(gs::dtype::float32, counts, 64 * 1024, 16 * 1024, 256);
    gradients = blocks.get(plan.buffer_count);
    loss = blocks.get(1);
    std::vector<gt::parameter> parameters;
    for (std::size_t t = 0; t < counts.size(); ++t) {
      std::size_t const n = counts[t];
      std::vector<float> init(n);
      std::vector<float> goal(n);
      for (std::size_t i = 0; i < n; ++i) {
        init[i] = static_cast<float>((i * 7 + t) % 13) * 0.1F;
        goal[i] = static_cast<float>((i * 3 + t) % 5) * 0.2F;
      }
      params.push_back(blocks.get(n));
      targets.push_back(blocks.get(n));
      graphstep::testing::copy_to_device(params.back(), init.data(), n * sizeof(float));
      graphstep::testing::copy_to_device(targets.back(), goal.data(), n * sizeof(float));
      losses.emplace_back(n, stream);
      parameters.push_back(
          {{params.back(), gs::dtype::float32, n}, {gradient(t), gs::dtype::float32, n}});
    }
    gt::lr_schedule schedule;
    schedule.base = 0.5F;
    optimizer.emplace(parameters, gt::sgd_options{0.9F}, schedule, nullptr, stream);
    reducer.emplace(comm, gs::device_span{gradients, gs::dtype::float32, plan.buffer_count}, plan);
  }
  float* gradient(std::size_t t) const { return gradients + plan.offsets[t]; }
  void step(gs::cuda::stream_view stream) {
    // Tensors are listed in the order backward produces their gradients; each bucket is
    // reduced as soon as its last gradient is written.
    std::size_t next_bucket = 0;
    for (std::size_t t = 0; t < params.size(); ++t) {
      std::size_t const n = losses[t].count();
      losses[t].forward_backward(
          {params[t], gs::dtype::float32, n}, {targets[t], gs::dtype::float32, n},
          {gradient(t), gs::dtype::float32, n}, {loss, gs::dtype::float32, 1}, stream);
      while (next_bucket < plan.buckets.size() && plan.buckets[next_bucket].last == t + 1) {
        reducer->bucket_ready(next_bucket++, stream);
      }
    }
    reducer->join(stream);
    optimizer->step(stream);
  }
  std::vector<float> values(std::size_t t, std::size_t n, gs::cuda::stream_view stream) const {
    std::vector<float> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), params[t], n * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    return host;
  }
};

}  // namespace

class nccl_step_test : public gs::testing::nccl_gpu_test {};

TEST_F(nccl_step_test, captured_step_with_bucketed_all_reduce_equals_eager) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  auto comms = gn::nccl_comm::for_local_devices({0});
  std::vector<std::size_t> const counts{3000, 20000, 9000};
  replica eager{pool, comms.front(), counts, stream};
  replica graphed{pool, comms.front(), counts, stream};
  ASSERT_GT(eager.plan.buckets.size(), 1U);

  eager.step(stream);  // also warms up the collectives of the communicator
  graphed.step(stream);
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, stream, pool, [&] { graphed.step(stream); });
  gn::verify_captured_sequence(comms.front(), stream);
  for (int i = 0; i < 4; ++i) {
    eager.step(stream);
    g.replay(stream);
  }
  for (std::size_t t = 0; t < counts.size(); ++t) {
    EXPECT_EQ(graphed.values(t, counts[t], stream), eager.values(t, counts[t], stream))
        << "tensor " << t;
  }
}

TEST_F(nccl_step_test, several_ranks_when_several_gpus_are_present) {
  int const devices = gs::cuda::device_count();
  if (devices < 2) GTEST_SKIP() << "needs 2 or more GPUs, " << devices << " visible";
  std::vector<int> ids(static_cast<std::size_t>(devices));
  for (int d = 0; d < devices; ++d) ids[static_cast<std::size_t>(d)] = d;
  auto comms = gn::nccl_comm::for_local_devices(ids);
  std::size_t const n = 4096;
  std::vector<float*> data(ids.size());
  std::vector<gs::cuda::stream> streams;
  for (int d = 0; d < devices; ++d) {
    gs::cuda::device_guard const on{d};
    streams.emplace_back();
    std::vector<float> const mine(n, static_cast<float>(d + 1));
    void* p = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&p, n * sizeof(float)));
    graphstep::testing::copy_to_device(p, mine.data(), n * sizeof(float));
    data[static_cast<std::size_t>(d)] = static_cast<float*>(p);
  }
  {
    gn::group_guard group;
    for (int d = 0; d < devices; ++d) {
      gs::device_span const b{data[static_cast<std::size_t>(d)], gs::dtype::float32, n};
      gn::all_reduce(b, b, gn::reduce_op::avg, comms[static_cast<std::size_t>(d)],
                     streams[static_cast<std::size_t>(d)]);
    }
    group.end();
  }
  float const expected = static_cast<float>(devices + 1) / 2.0F;
  for (int d = 0; d < devices; ++d) {
    gs::cuda::device_guard const on{d};
    std::vector<float> host(n);
    streams[static_cast<std::size_t>(d)].synchronize();
    GRAPHSTEP_CUDA_TRY(cudaMemcpy(host.data(), data[static_cast<std::size_t>(d)], n * sizeof(float),
                                  cudaMemcpyDeviceToHost));
    EXPECT_EQ(host, std::vector<float>(n, expected)) << "device " << d;
    GRAPHSTEP_CUDA_TRY(cudaFree(data[static_cast<std::size_t>(d)]));
  }
}
