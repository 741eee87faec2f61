// Conditional nodes: an optimizer step skipped on the device when gradients are not finite
// (no host synchronization), and a device-decided loop.

#include <cmath>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/conditional.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/sgd.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"
#include "common/pool_blocks.hpp"

namespace gs = graphstep;
namespace gt = graphstep::train;

namespace {

__global__ void countdown_kernel(unsigned int* remaining, float* counter) {
  *counter += 1.0F;
  *remaining -= 1;
}

class conditional_test : public gs::testing::gpu_test {};

}  // namespace

TEST_F(conditional_test, an_update_is_skipped_on_the_device_when_gradients_are_not_finite) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::testing::pool_blocks blocks{pool, stream};
  std::size_t const n = 4096;
  float* param = blocks.get(n);
  float* grad = blocks.get(n);
  auto* finite = blocks.get<unsigned int>(1);
  std::vector<float> const ones(n, 1.0F);
  graphstep::testing::copy_to_device(param, ones.data(), sizeof(float) * n);
  graphstep::testing::copy_to_device(grad, ones.data(), sizeof(float) * n);
  gt::lr_schedule schedule;
  schedule.base = 0.5F;
  gt::sgd optimizer{
      {{{param, gs::dtype::float32, n}, {grad, gs::dtype::float32, n}}}, {}, schedule, {}, stream};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, pool, [&] {
    gt::check_finite({grad, gs::dtype::float32, n}, finite, stream);
    gs::graphs::capture_if(stream, finite, [&](gs::cuda::stream_view s) { optimizer.step(s); });
  });
  EXPECT_EQ(step.node_counts().conditional, 1U);
  auto read_param = [&] {
    float value = 0.0F;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(&value, param + 7, sizeof value, cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    return value;
  };
  step.replay(stream);
  EXPECT_EQ(read_param(), 0.5F);  // 1 - 0.5 · 1
  float const inf = std::numeric_limits<float>::infinity();
  graphstep::testing::copy_to_device(grad + 100, &inf, sizeof inf);
  step.replay(stream);
  EXPECT_EQ(read_param(), 0.5F) << "the step with an inf gradient must be skipped";
  EXPECT_EQ(optimizer.steps_taken(stream), 1);
  float const one = 1.0F;
  graphstep::testing::copy_to_device(grad + 100, &one, sizeof one);
  step.replay(stream);
  EXPECT_EQ(read_param(), 0.0F);
}

TEST_F(conditional_test, a_device_decided_loop_runs_until_its_flag_clears) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::testing::pool_blocks blocks{pool, stream};
  auto* remaining = blocks.get<unsigned int>(1);
  float* counter = blocks.get(1);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(counter, 0, sizeof(float), stream.get()));
  gs::graphs::graph_exec loop;
  gs::graphs::capture(loop, stream, [&] {
    gs::graphs::capture_while(stream, remaining, [&](gs::cuda::stream_view s) {
      countdown_kernel<<<1, 1, 0, s.get()>>>(remaining, counter);
    });
  });
  for (unsigned int k : {5U, 0U, 3U}) {
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(remaining, &k, sizeof k, cudaMemcpyHostToDevice, stream.get()));
    loop.replay(stream);
  }
  float total = 0.0F;
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(&total, counter, sizeof total, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  EXPECT_EQ(total, 8.0F);
}

TEST_F(conditional_test, outside_a_capture_is_a_usage_error) {
  gs::cuda::stream stream;
  unsigned int* flag = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&flag, sizeof(unsigned int)));
  EXPECT_THROW(gs::graphs::capture_if(stream, flag, [](gs::cuda::stream_view) {}), gs::usage_error);
  EXPECT_THROW(gs::graphs::capture_if(stream, nullptr, [](gs::cuda::stream_view) {}),
               gs::usage_error);
  GRAPHSTEP_CUDA_TRY(cudaFree(flag));
}

// A body is captured on a stream of its own into the conditional node's graph, which the
// pool does not serve: allocating there is refused, and the whole capture is discarded.
TEST_F(conditional_test, allocating_from_the_pool_inside_a_body_is_a_usage_error) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  unsigned int* flag = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&flag, sizeof(unsigned int)));
  gs::graphs::graph_exec g;
  std::string const what = gs::testing::message_of([&] {
    gs::graphs::capture(g, stream, pool, [&] {
      gs::graphs::capture_if(stream, flag, [&](gs::cuda::stream_view body) {
        static_cast<void>(pool.allocate(1024, body));
      });
    });
  });
  EXPECT_NE(what.find("not by a graphs::capture_scope given this pool"), std::string::npos) << what;
  EXPECT_TRUE(g.empty());
  EXPECT_FALSE(gs::cuda::stream_view{stream}.is_capturing());
  EXPECT_EQ(pool.statistics().bytes_in_use, 0U);
  GRAPHSTEP_CUDA_TRY(cudaFree(flag));
}
