// A learning rate the host computes each step reaches the optimizer without a synchronization:
// on the simulated device in deferred mode, work runs only when the host waits for it, so a
// training loop whose per-step calls never wait leaves every step queued. A GPU cannot show
// this (a wait that happens to find the stream idle costs nothing visible).

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/sim/sim.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <vector>

namespace gs = graphstep;
namespace gt = graphstep::train;

namespace {

class host_learning_rate_test : public ::testing::Test {
 protected:
  void TearDown() override { gs::sim::set_execution_mode(gs::sim::execution_mode::immediate); }
};

}  // namespace

TEST_F(host_learning_rate_test, feeding_it_each_step_never_waits_for_the_device) {
  gs::cuda::stream stream;
  std::size_t const n = 256;
  gs::cuda::device_buffer weights{n * sizeof(float), stream};
  gs::cuda::device_buffer gradients{n * sizeof(float), stream};
  std::vector<float> const ones(n, 1.0F);
  GRAPHSTEP_CUDA_TRY(cudaMemcpy(weights.data(), ones.data(), n * sizeof(float),
                                cudaMemcpyHostToDevice));
  GRAPHSTEP_CUDA_TRY(cudaMemcpy(gradients.data(), ones.data(), n * sizeof(float),
                                cudaMemcpyHostToDevice));
  // From pageable memory the copies may return before their DMA lands, and the optimizer
  // reads the weights on a non-blocking stream.
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  gt::mixed_precision_adamw optimizer{
      {{{weights.data(), gs::dtype::float32, n}, {gradients.data(), gs::dtype::float32, n}}},
      {{}},
      {},
      {},
      {},
      stream};
  gs::memory::step_input<float> learning_rate{1, stream};
  optimizer.read_learning_rate_from(learning_rate.data(), stream);
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, [&] { optimizer.step(stream); });
  step.replay(stream);  // the first launch uploads the executable
  stream.synchronize();

  gs::sim::set_execution_mode(gs::sim::execution_mode::deferred);
  int const steps = 2;  // the step_input's staging depth: a third upload waits for the first
  for (int s = 1; s <= steps; ++s) {
    learning_rate.set(1e-3F / static_cast<float>(s), stream);
    step.replay(stream);
  }
  // Each step's upload and replay are still queued: nothing above waited for the device.
  EXPECT_GE(gs::sim::queued_operations(), static_cast<std::size_t>(2 * steps));
  stream.synchronize();
  EXPECT_EQ(gs::sim::queued_operations(), 0U);
  EXPECT_EQ(optimizer.steps_taken(stream), steps + 1);

  // What this test would catch: changing the schedule is a call that waits.
  learning_rate.set(1e-4F, stream);
  step.replay(stream);
  EXPECT_GT(gs::sim::queued_operations(), 0U);
  optimizer.set_schedule({}, stream);
  EXPECT_EQ(gs::sim::queued_operations(), 0U);
}
