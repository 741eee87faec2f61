// The README's code, as a user would paste it into a trainer (tests/docs/readme_snippets.py
// checks that the text between the README markers below is the README's, character for
// character): it compiles, trains on the batches it is given, and leaves no memory behind.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "common/gpu_test.hpp"

// README begin
#include <graphstep/graphstep.hpp>
namespace gs = graphstep;
// README end

namespace {

float* step_sum = nullptr;  // where the user's step writes: twice the sum of its batch

__global__ void double_input(float const* input, float* activation, std::int64_t n) {
  std::int64_t const i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  activation[i] = 2.0F * input[i];
}

__global__ void sum_into(float const* activation, float* sum, std::int64_t n) {
  std::int64_t const i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  atomicAdd(sum, activation[i]);  // small integers: exact in any order
}

// A user's step: an activation from the pool, two kernels, the activation freed in stream
// order (captured, the pool keeps its memory for the graph).
void train_step(gs::cuda::stream_view stream, gs::memory::memory_pool& pool,
                gs::cuda::device_buffer const& input) {
  auto const n = static_cast<std::int64_t>(input.view().count());
  void* activation = pool.allocate(input.size(), stream);
  int const blocks = static_cast<int>((n + 255) / 256);
  double_input<<<blocks, 256, 0, stream.get()>>>(static_cast<float const*>(input.data()),
                                                 static_cast<float*>(activation), n);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(step_sum, 0, sizeof(float), stream.get()));
  sum_into<<<blocks, 256, 0, stream.get()>>>(static_cast<float const*>(activation), step_sum, n);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  pool.deallocate(activation, input.size(), stream);
}

// The README's loop over `loader`; returns what the last replay wrote.
float readme_loop(std::vector<std::vector<float>> const& loader, std::int64_t batch_size,
                  std::int64_t features) {
  // The README's own alignment:
  // clang-format off
  // README begin
  gs::cuda::stream stream;                 // non-blocking stream
  gs::memory::memory_pool pool;            // graph-private memory at fixed addresses
  gs::cuda::device_buffer input{{"input", {batch_size, features}, gs::dtype::float32}, stream, pool};

  for (int i = 0; i < 3; ++i) train_step(stream, pool, input);   // warm-up, eager

  gs::graphs::graph_exec step;             // an executable graph, filled by the capture
  gs::graphs::capture(step, stream, pool, [&] {   // everything issued to `stream` is recorded;
    train_step(stream, pool, input);       // allocations come from `pool` at fixed addresses
  });

  for (std::vector<float> const& batch : loader) {
    input.copy_from_host(batch, stream);   // the static input, refilled between replays
    step.replay(stream);                   // one launch per step
  }
  // README end
  // clang-format on
  float sum = 0.0F;
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(&sum, step_sum, sizeof sum, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return sum;
}

}  // namespace

TEST(readme, the_first_snippet_trains_on_every_batch_and_leaves_no_memory_behind) {
  if (gs::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  gs::cuda::stream setup;
  gs::cuda::device_buffer sum{sizeof(float), setup};
  step_sum = static_cast<float*>(sum.data());
  std::int64_t const batch_size = 4;
  std::int64_t const features = 300;
  std::vector<std::vector<float>> loader;
  for (int b = 0; b < 3; ++b) {
    std::vector<float> batch(static_cast<std::size_t>(batch_size * features));
    for (std::size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>((i + b) % 7);
    loader.push_back(batch);
  }
  double expected = 0.0;
  for (float x : loader.back()) expected += 2.0 * x;
  // The pool's destructor reports blocks never given back (the test fails on that warning).
  EXPECT_EQ(readme_loop(loader, batch_size, features), static_cast<float>(expected));
  step_sum = nullptr;
}
