// Captured kernel launches whose grid and arguments change between replays: the grid a batch
// needs each step, replays already queued keeping their launch, and each refusal.

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/kernel_node.hpp>
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

// As a model's header writes its kernels: a template, launched by a helper whose arguments are
// deduced, reading through a pointer to const.
template <typename T>
__global__ void affine_kernel(T* out, T const* in, T scale, T shift, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = scale * in[i] + shift;
}

constexpr unsigned affine_threads = 64;

template <typename T>
void launch_affine(T* out, T const* in, T scale, T shift, int n, cudaStream_t stream) {
  unsigned const blocks = (static_cast<unsigned>(n) + affine_threads - 1) / affine_threads;
  // The template argument is written: the simulated device's launch route cannot deduce it.
  affine_kernel<T><<<blocks, affine_threads, 0, stream>>>(out, in, scale, shift, n);
}

// A kernel taking its per-step values as one struct, as dropout or a noise layer takes a seed.
struct noise_params {
  std::uint32_t seed;
  float amplitude;
};

__global__ void noise_kernel(float* out, noise_params params, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    out[i] =
        params.amplitude * static_cast<float>((params.seed * 31U + static_cast<unsigned>(i)) % 17U);
  }
}

float noise_at(noise_params params, int i) {
  return params.amplitude *
         static_cast<float>((params.seed * 31U + static_cast<unsigned>(i)) % 17U);
}

class kernel_node_test : public gs::testing::stream_pool_test {};

using fill_node = gs::graphs::kernel_node_for<fill_kernel>;
using store_node = gs::graphs::kernel_node_for<store_kernel>;

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
    node = gs::graphs::last_captured_launch(*stream_, fill_kernel);
  });
  EXPECT_EQ(node->dims().grid.x, blocks_for(capacity, 128));
  EXPECT_EQ(node->dims().block.x, 128U);
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
  std::optional<store_node> node;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    store_kernel<<<1, 32, 0, stream_->get()>>>(slots, 1);
    node = gs::graphs::last_captured_launch(*stream_, store_kernel);
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
                 static_cast<void>(gs::graphs::last_captured_launch(*stream_, fill_kernel));
               }),
               "the stream is not capturing");
  gs::graphs::graph_exec g;
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(g, *stream_, *pool_, [&] {
                   static_cast<void>(gs::graphs::last_captured_launch(*stream_, fill_kernel));
                 });
               }),
               "nothing has been captured on this stream yet");
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(g, *stream_, *pool_, [&] {
                   fill_kernel<<<1, n, 0, stream_->get()>>>(out, 1.0F, n);
                   GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, sizeof(float), stream_->get()));
                   static_cast<void>(gs::graphs::last_captured_launch(*stream_, fill_kernel));
                 });
               }),
               "is a memset node, not a kernel launch");
  EXPECT_PRED2(contains, message_of([&] {
                 gs::graphs::capture(g, *stream_, *pool_, [&] {
                   store_kernel<<<1, 32, 0, stream_->get()>>>(slot, 3);
                   static_cast<void>(gs::graphs::last_captured_launch(*stream_, fill_kernel));
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
                 static_cast<void>(gs::graphs::last_captured_launch(*stream_, fill_kernel));
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
    node = gs::graphs::last_captured_launch(*stream_, fill_kernel);
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

// The node starts from the launch as captured, and each setter changes only what it names: one
// argument, then the grid alone (the rest as remembered), then block and grid together.
TEST_F(kernel_node_test, setters_change_what_they_name_and_keep_the_rest_of_the_launch) {
  int const n = 256;
  auto* in = blocks_->get(n);
  auto* out = blocks_->get(n);
  std::vector<float> input(n);
  for (int i = 0; i < n; ++i) input[static_cast<std::size_t>(i)] = static_cast<float>(i);
  gs::testing::copy_to_device(in, input.data(), n * sizeof(float));
  gs::graphs::graph_exec step;
  std::optional<gs::graphs::kernel_node_for<affine_kernel<float>>> node;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    launch_affine(out, in, 2.0F, 1.0F, n, stream_->get());
    node = gs::graphs::last_captured_launch(*stream_, affine_kernel<float>);
  });
  EXPECT_EQ(node->dims().grid.x, n / affine_threads);
  EXPECT_EQ(node->dims().block.x, affine_threads);
  EXPECT_EQ(std::get<0>(node->arguments()), out);
  EXPECT_EQ(std::get<1>(node->arguments()), in);
  EXPECT_EQ(std::get<2>(node->arguments()), 2.0F);
  EXPECT_EQ(std::get<3>(node->arguments()), 1.0F);
  EXPECT_EQ(std::get<4>(node->arguments()), n);
  auto expect = [&](float scale, int written) {
    std::vector<float> expected(n, -1.0F);
    for (int i = 0; i < written; ++i) {
      expected[static_cast<std::size_t>(i)] = scale * static_cast<float>(i) + 1.0F;
    }
    return expected;
  };
  auto replay = [&] {
    std::vector<float> const minus_one(n, -1.0F);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(out, minus_one.data(), n * sizeof(float),
                                       cudaMemcpyHostToDevice, stream_->get()));
    stream_->synchronize();
    step.replay(*stream_);
    return gs::testing::copy_to_host(out, n, *stream_);
  };
  EXPECT_EQ(replay(), expect(2.0F, n));

  node->set_argument<2>(step, 3);  // converted to the parameter's float, as a launch converts
  EXPECT_EQ(std::get<2>(node->arguments()), 3.0F);
  EXPECT_EQ(replay(), expect(3.0F, n));

  node->set_grid(step, dim3{1});  // one block of 64 threads: the rest of out is left alone
  EXPECT_EQ(node->dims().grid.x, 1U);
  EXPECT_EQ(node->dims().block.x, affine_threads);
  EXPECT_EQ(replay(), expect(3.0F, static_cast<int>(affine_threads)));

  node->set_dims(step, gs::graphs::launch_dims{dim3{2}, dim3{32}});
  EXPECT_EQ(replay(), expect(3.0F, 64));
  node->set_dims(step, gs::graphs::launch_dims{dim3{4}, dim3{64}});
  EXPECT_EQ(replay(), expect(3.0F, n));
}

TEST_F(kernel_node_test, a_struct_argument_is_read_at_capture_and_replaced_whole) {
  int const n = 100;
  auto* out = blocks_->get(n);
  gs::graphs::graph_exec step;
  std::optional<gs::graphs::kernel_node_for<noise_kernel>> node;
  noise_params const captured{11U, 0.5F};
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    noise_kernel<<<1, 128, 0, stream_->get()>>>(out, captured, n);
    node = gs::graphs::last_captured_launch(*stream_, noise_kernel);
  });
  EXPECT_EQ(std::get<1>(node->arguments()).seed, 11U);
  EXPECT_EQ(std::get<1>(node->arguments()).amplitude, 0.5F);
  auto expected = [&](noise_params params) {
    std::vector<float> values(n);
    for (int i = 0; i < n; ++i) values[static_cast<std::size_t>(i)] = noise_at(params, i);
    return values;
  };
  step.replay(*stream_);
  EXPECT_EQ(gs::testing::copy_to_host(out, n, *stream_), expected(captured));
  for (std::uint32_t seed : {12U, 13U, 40U}) {
    noise_params const params{seed, 0.25F};
    node->set_argument<1>(step, params);
    step.replay(*stream_);
    ASSERT_EQ(gs::testing::copy_to_host(out, n, *stream_), expected(params)) << "seed " << seed;
  }
}

// A node holds one launch, and a set applies all of it to the executable given: executables of
// one capture that run different launches keep a copy of the node each.
TEST_F(kernel_node_test, a_node_applies_its_one_launch_and_a_copy_per_executable_keeps_them_apart) {
  int const n = 64;
  auto* out = blocks_->get(n);
  gs::graphs::graph captured;
  std::optional<fill_node> node;
  gs::graphs::capture(captured, *stream_, *pool_, [&] {
    fill_kernel<<<1, n, 0, stream_->get()>>>(out, 1.0F, n);
    node = gs::graphs::last_captured_launch(*stream_, fill_kernel);
  });
  gs::graphs::graph_exec a = captured.instantiate();
  gs::graphs::graph_exec b = captured.instantiate();
  auto run = [&](gs::graphs::graph_exec& exec) {
    exec.replay(*stream_);
    return gs::testing::copy_to_host(out, n, *stream_);
  };
  std::vector<float> const halves = [&] {
    std::vector<float> values(n, 5.0F);
    std::fill(values.begin() + n / 2, values.end(), 0.0F);
    return values;
  }();

  // One node: b gets the value set for a.
  node->set_argument<1>(a, 5.0F);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, n * sizeof(float), stream_->get()));
  node->set_dims(b, gs::graphs::launch_dims{dim3{1}, dim3{n / 2}});
  EXPECT_EQ(run(b), halves);
  EXPECT_EQ(run(a), std::vector<float>(n, 5.0F));

  // A copy per executable: each remembers its own launch.
  fill_node for_b = *node;                                       // 5.0, n / 2 threads
  node->set_dims(a, gs::graphs::launch_dims{dim3{1}, dim3{n}});  // a: 5.0, n threads
  for_b.set_argument<1>(b, 9.0F);                                // b: 9.0, n / 2 threads
  node->set_argument<1>(a, 7.0F);                                // a: 7.0, n threads
  std::vector<float> nines(n, 9.0F);
  std::fill(nines.begin() + n / 2, nines.end(), 0.0F);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, n * sizeof(float), stream_->get()));
  EXPECT_EQ(run(b), nines);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, n * sizeof(float), stream_->get()));
  EXPECT_EQ(run(a), std::vector<float>(n, 7.0F));
  for_b.set_grid(b, dim3{2});  // b: 9.0, 2 blocks of n / 2
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, n * sizeof(float), stream_->get()));
  EXPECT_EQ(run(b), std::vector<float>(n, 9.0F));
  EXPECT_EQ(node->dims().grid.x, 1U);
  EXPECT_EQ(std::get<1>(node->arguments()), 7.0F);
}

// A refused set changes nothing: neither what the node remembers nor what the executable runs.
TEST_F(kernel_node_test, a_refused_setter_leaves_the_node_and_the_executable_as_they_were) {
  int const n = 64;
  auto* out = blocks_->get(n);
  gs::graphs::graph_exec step;
  std::optional<fill_node> node;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    fill_kernel<<<1, n, 0, stream_->get()>>>(out, 1.0F, n);
    node = gs::graphs::last_captured_launch(*stream_, fill_kernel);
  });
  node->set_argument<1>(step, 2.0F);
  EXPECT_PRED2(contains, message_of([&] {
                 node->set_grid(step, dim3{4, 0});
               }),
               "kernel_node::set: the grid (4, 0, 1) has an empty extent");
  EXPECT_PRED2(contains, message_of([&] {
                 node->set_dims(step, gs::graphs::launch_dims{dim3{1}, dim3{0}});
               }),
               "the block (0, 1, 1) has an empty extent");
  gs::graphs::graph_exec empty;
  EXPECT_PRED2(contains, message_of([&] { node->set_argument<1>(empty, 3.0F); }),
               "the executable is empty");
  gs::graphs::graph_exec other;
  gs::graphs::capture_options named;
  named.name = "other";
  gs::graphs::capture(
      other, *stream_, *pool_, [&] { fill_kernel<<<1, n, 0, stream_->get()>>>(out, 1.0F, n); },
      named);
  EXPECT_PRED2(contains, message_of([&] { node->set_argument<1>(other, 3.0F); }),
               "captured into another graph than 'other'");
  EXPECT_THROW(node->set_dims(step, gs::graphs::launch_dims{dim3{1}, dim3{4096}}), gs::cuda_error);
  EXPECT_EQ(node->dims().grid.x, 1U);
  EXPECT_EQ(node->dims().block.x, static_cast<unsigned>(n));
  EXPECT_EQ(std::get<1>(node->arguments()), 2.0F);
  step.replay(*stream_);
  EXPECT_EQ(gs::testing::copy_to_host(out, n, *stream_), std::vector<float>(n, 2.0F));
}
