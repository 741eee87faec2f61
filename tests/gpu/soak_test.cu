// Soak: a step with pool churn, buckets, an eager segment and random numbers, run for
// GRAPHSTEP_SOAK_SECONDS (default 20 s): results stay exact, and neither device nor host memory
// grows after the first minute's worth of warm-up.

#include "common/gpu_test.hpp"

#include <graphstep/graphstep.hpp>
#include <graphstep/schedule/graph_cache.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>

namespace gs = graphstep;
namespace gsch = graphstep::schedule;

namespace {

__global__ void scale_kernel(float* out, float const* in, int n, float factor) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}

long resident_pages() {
  std::ifstream statm{"/proc/self/statm"};
  long size = 0;
  long resident = 0;
  statm >> size >> resident;
  return resident;
}

class soak_test : public gs::testing::gpu_test {};

}  // namespace

TEST_F(soak_test, long_running_steps_keep_results_and_memory_stable) {
  double seconds = 20.0;
  if (char const* env = std::getenv("GRAPHSTEP_SOAK_SECONDS")) seconds = std::atof(env);
  gs::stream stream;
  gs::memory_pool pool;
  int const largest = 512;
  auto* input = static_cast<float*>(pool.allocate(sizeof(float) * largest * 256, stream));
  auto* output = static_cast<float*>(pool.allocate(sizeof(float) * largest * 256, stream));
  std::vector<float> const ones(std::size_t(largest) * 256, 1.0F);
  GRAPHSTEP_CUDA_TRY(cudaMemcpy(input, ones.data(), ones.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
  gs::capture_safe_rng rng{5, stream};
  auto* mask = static_cast<std::uint8_t*>(pool.allocate(std::size_t(largest) * 256, stream));
  auto step = [&](std::int64_t bucket, gs::stream_view s) {
    int const n = static_cast<int>(bucket) * 256;
    auto* scratch = static_cast<float*>(pool.allocate(sizeof(float) * n, s));
    scale_kernel<<<(n + 255) / 256, 256, 0, s.value()>>>(scratch, input, n, 3.0F);
    gs::dropout_forward(scratch, mask, scratch, static_cast<std::size_t>(n), 0.0F,
                        rng.reserve(gs::dropout_counters(static_cast<std::size_t>(n))), s);
    scale_kernel<<<(n + 255) / 256, 256, 0, s.value()>>>(output, scratch, n, 0.5F);
    pool.deallocate(scratch, s);
    rng.end_step(s);
  };
  gsch::graph_cache cache{gsch::bucket_policy::powers_then_steps(largest, 32), step, pool, {}};
  std::mt19937 sizes{1};
  std::uniform_int_distribution<int> size{1, largest};
  auto run_for = [&](double limit) {
    auto const start = std::chrono::steady_clock::now();
    std::size_t steps = 0;
    float value = 0.0F;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
           limit) {
      auto const choice = cache.run(size(sizes), stream);
      if (++steps % 1000 == 0) {
        GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&value, output + choice.bucket * 256 - 1,
                                           sizeof value, cudaMemcpyDeviceToHost, stream.get()));
        stream.synchronize();
        EXPECT_EQ(value, 1.5F) << "after " << steps << " steps";
      }
    }
    stream.synchronize();
    return steps;
  };
  run_for(seconds * 0.2);  // warm-up: every bucket gets captured
  std::size_t free_before = 0;
  std::size_t total = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_before, &total));
  auto const mapped_before = pool.statistics().mapped_bytes;
  long const pages_before = resident_pages();
  std::size_t const steps = run_for(seconds * 0.8);
  std::size_t free_after = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_after, &total));
  std::printf("soak: %zu steps in %.0f s, %zu graphs\n", steps, seconds * 0.8,
              cache.captured_count());
  EXPECT_EQ(free_after, free_before);
  EXPECT_EQ(pool.statistics().mapped_bytes, mapped_before);
  EXPECT_LE(resident_pages() - pages_before, 256) << "host memory grew";
}
