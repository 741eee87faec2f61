// The replay scheduler: graphed segments replay, an eager segment with host logic runs between
// them on another stream, and the event dependencies order them.

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/schedule/replay_scheduler.hpp>
#include <graphstep/schedule/step_plan.hpp>

#include "common/gpu_test.hpp"
#include "common/pool_blocks.hpp"

namespace gs = graphstep;
namespace gsch = graphstep::schedule;

namespace {

__global__ void affine_kernel(float* out, float const* in, float a, float b, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * a + b;
}

class replay_scheduler_test : public gs::testing::gpu_test {};

}  // namespace

TEST_F(replay_scheduler_test, segments_run_in_order_across_streams) {
  int const n = 1 << 16;
  gs::cuda::stream compute;
  gs::cuda::stream side;
  gs::memory::memory_pool pool;
  gs::testing::pool_blocks blocks{pool, compute};
  float* input = blocks.get(n);
  float* a = blocks.get(n);
  float* b = blocks.get(n);
  float* out = blocks.get(n);
  std::vector<float> const ones(n, 1.0F);
  graphstep::testing::copy_to_device(input, ones.data(), sizeof(float) * n);
  float host_bias = 0.0F;  // host logic: changes every step, so that segment stays eager

  gsch::step_spec spec;
  spec.streams = {"compute", "side"};
  spec.static_inputs = {"input"};
  spec.segments = {{"produce", true, "compute", {}, {"input"}, {"a"}},
                   {"host_logic", false, "side", {"produce"}, {"a"}, {"b"}},
                   {"consume", true, "compute", {"host_logic"}, {"b"}, {"out"}}};
  std::map<std::string, gsch::replay_scheduler::segment_body> bodies{
      {"produce",
       [&](gs::cuda::stream_view s) {
         affine_kernel<<<(n + 255) / 256, 256, 0, s.get()>>>(a, input, 2.0F, 0.0F, n);
       }},
      {"host_logic",
       [&](gs::cuda::stream_view s) {
         host_bias += 1.0F;
         affine_kernel<<<(n + 255) / 256, 256, 0, s.get()>>>(b, a, 1.0F, host_bias, n);
       }},
      {"consume", [&](gs::cuda::stream_view s) {
         affine_kernel<<<(n + 255) / 256, 256, 0, s.get()>>>(out, b, 3.0F, 0.0F, n);
       }}};
  gsch::scheduler_options options;
  options.time_segments = true;
  gsch::replay_scheduler scheduler{
      spec, bodies, {{"compute", compute}, {"side", side}}, pool, options};
  for (int step = 1; step <= 5; ++step) {
    scheduler.run();
    std::vector<float> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), out, sizeof(float) * n, cudaMemcpyDeviceToHost,
                                       compute.get()));
    compute.synchronize();
    float const expected = 3.0F * (2.0F + static_cast<float>(step));
    EXPECT_EQ(host.front(), expected) << "step " << step;
    EXPECT_EQ(host.back(), expected) << "step " << step;
  }
  EXPECT_EQ(scheduler.graph_of("produce").node_counts().kernel, 1U);
  EXPECT_THROW(static_cast<void>(scheduler.graph_of("host_logic")), gs::usage_error);
  auto const times = scheduler.segment_milliseconds();
  EXPECT_EQ(times.size(), 3U);
  for (auto const& [name, ms] : times) EXPECT_GE(ms, 0.0F) << name;
}

TEST_F(replay_scheduler_test, a_missing_body_or_stream_is_a_usage_error) {
  gs::cuda::stream compute;
  gs::memory::memory_pool pool;
  gsch::step_spec spec;
  spec.streams = {"compute"};
  spec.segments = {{"only", true, "compute", {}, {}, {}}};
  EXPECT_THROW(gsch::replay_scheduler(spec, {}, {{"compute", compute}}, pool), gs::usage_error);
  EXPECT_THROW(gsch::replay_scheduler(spec, {{"only", [](gs::cuda::stream_view) {}}}, {}, pool),
               gs::usage_error);
}
