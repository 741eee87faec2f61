// Captured kernel launches whose grid and arguments change between replays: the grid a batch
// needs each step, replays already queued keeping their launch, and each refusal.

#include <cstdint>
#include <graphstep/graphs/kernel_node.hpp>
#include <graphstep/graphstep.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

__global__ void fill_kernel(float* out, float value, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value;
}

__global__ void store_kernel(std::int32_t* where, std::int32_t value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *where = value;
}

class kernel_node_test : public gs::testing::stream_pool_test {};

using fill_node = gs::graphs::kernel_node<float*, float, int>;
using gs::testing::contains;
using gs::testing::message_of;

unsigned blocks_for(int n, unsigned threads) {
  return (static_cast<unsigned>(n) + threads - 1) / threads;
}

}  // namespace

// Host work sizes the grid each step (a batch of n rows): the node is launched with exactly the
// blocks it needs, not the maximum grid.
TEST_F(kernel_node_test, each_replay_launches_the_grid_and_arguments_set_before_it) {
  int const capacity = 1000;
  auto* out = blocks_->get(capacity);
  gs::graphs::graph_exec step;
  std::optional<fill_node> node;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    fill_kernel<<<blocks_for(capacity, 128), 128, 0, stream_->get()>>>(out, 0.0F, capacity);
    node = fill_node::last_captured(*stream_, fill_kernel);
  });
  EXPECT_EQ(node->captured_dims().grid.x, blocks_for(capacity, 128));
  EXPECT_EQ(node->captured_dims().block.x, 128U);
  step.replay(*stream_);
  std::vector<float> expected(capacity, 0.0F);
  for (int n : {1, 130, 999, 257}) {
    float const value = static_cast<float>(n);
    node->set(step, gs::graphs::launch_dims{dim3{blocks_for(n, 64)}, dim3{64}}, out, value, n);
    step.replay(*stream_);
    std::fill(expected.begin(), expected.begin() + n, value);
    ASSERT_EQ(gs::testing::copy_to_host(out, capacity, *stream_), expected) << "n = " << n;
  }
}

// "Already enqueued or running launches of hGraphExec are not affected by this call"
// (cudaGraphExecKernelNodeSetParams).
TEST_F(kernel_node_test, replays_already_queued_keep_the_launch_they_had) {
  gs::testing::queued_work const queued;
  auto* slots = blocks_->get<std::int32_t>(2);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(slots, 0, 2 * sizeof(std::int32_t), stream_->get()));
  gs::graphs::graph_exec step;
  std::optional<gs::graphs::kernel_node<std::int32_t*, std::int32_t>> node;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    store_kernel<<<1, 32, 0, stream_->get()>>>(slots, 1);
    node =
        gs::graphs::kernel_node<std::int32_t*, std::int32_t>::last_captured(*stream_, store_kernel);
  });
  step.replay(*stream_);
  node->set(step, gs::graphs::launch_dims{dim3{1}, dim3{32}}, slots + 1, 2);
  step.replay(*stream_);
  EXPECT_EQ(gs::testing::copy_to_host(slots, 2, *stream_), (std::vector<std::int32_t>{1, 2}));
}

TEST_F(kernel_node_test, the_node_must_be_the_launch_just_captured) {
  int const n = 64;
  auto* out = blocks_->get(n);
  auto* slot = blocks_->get<std::int32_t>(1);
  EXPECT_PRED2(contains, message_of([&] {
                 static_cast<void>(fill_node::last_captured(*stream_, fill_kernel));
               }),
               "the stream is not capturing");
  gs::graphs::graph_exec g;
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(g, *stream_, *pool_, [&] {
                   static_cast<void>(fill_node::last_captured(*stream_, fill_kernel));
                 });
               }),
               "nothing has been captured on this stream yet");
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(g, *stream_, *pool_, [&] {
                   fill_kernel<<<1, n, 0, stream_->get()>>>(out, 1.0F, n);
                   GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, sizeof(float), stream_->get()));
                   static_cast<void>(fill_node::last_captured(*stream_, fill_kernel));
                 });
               }),
               "is a memset node, not a kernel launch");
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(g, *stream_, *pool_, [&] {
                   store_kernel<<<1, 32, 0, stream_->get()>>>(slot, 3);
                   static_cast<void>(fill_node::last_captured(*stream_, fill_kernel));
                 });
               }),
               "launches another function than the one given");
  gs::cuda::stream side;
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture_scope scope{g, *stream_, *pool_};
                 fill_kernel<<<1, n, 0, stream_->get()>>>(out, 1.0F, n);
                 scope.fork(side);
                 store_kernel<<<1, 32, 0, side.get()>>>(slot, 3);
                 scope.join(side);
                 static_cast<void>(fill_node::last_captured(*stream_, fill_kernel));
                 scope.end();
               }),
               "would follow 2 nodes");
  // The refusals left the stream and pool usable.
  gs::graphs::capture(g, *stream_, *pool_,
                      [&] { fill_kernel<<<1, n, 0, stream_->get()>>>(out, 5.0F, n); });
  g.replay(*stream_);
  EXPECT_EQ(gs::testing::copy_to_host(out, n, *stream_), std::vector<float>(n, 5.0F));
}

TEST_F(kernel_node_test, a_node_sets_only_executables_of_its_capture_and_launches_that_can_run) {
  int const n = 64;
  auto* out = blocks_->get(n);
  gs::graphs::graph_exec first;
  std::optional<fill_node> node;
  gs::graphs::capture(first, *stream_, *pool_, [&] {
    fill_kernel<<<1, n, 0, stream_->get()>>>(out, 1.0F, n);
    node = fill_node::last_captured(*stream_, fill_kernel);
  });
  gs::graphs::graph_exec second;
  gs::graphs::capture_options named;
  named.name = "second";
  gs::graphs::capture(
      second, *stream_, *pool_, [&] { fill_kernel<<<1, n, 0, stream_->get()>>>(out, 1.0F, n); },
      named);
  gs::graphs::launch_dims const dims{dim3{1}, dim3{n}};
  EXPECT_PRED2(contains, message_of([&] { node->set(second, dims, out, 2.0F, n); }),
               "captured into another graph than 'second'");
  gs::graphs::graph_exec empty;
  EXPECT_PRED2(contains, message_of([&] { node->set(empty, dims, out, 2.0F, n); }),
               "the executable is empty");
  EXPECT_PRED2(contains, message_of([&] {
                 node->set(first, gs::graphs::launch_dims{dim3{0}, dim3{n}}, out, 2.0F, n);
               }),
               "the grid (0, 1, 1) has an empty extent");
  // More threads than a block can have: CUDA refuses, and the node keeps its launch.
  EXPECT_THROW(node->set(first, gs::graphs::launch_dims{dim3{1}, dim3{4096}}, out, 2.0F, n),
               gs::cuda_error);
  first.replay(*stream_);
  EXPECT_EQ(gs::testing::copy_to_host(out, n, *stream_), std::vector<float>(n, 1.0F));
}
