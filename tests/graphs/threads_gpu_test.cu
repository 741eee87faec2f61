// Failed captures leak nothing, and separate threads capture and replay their own graphs at
// the same time.

#include <graphstep/graphstep.hpp>
#include <thread>

#include "common/gpu_test.hpp"
#include "common/process_memory.hpp"

namespace gs = graphstep;
using gs::testing::resident_pages;

namespace {

__global__ void add_kernel(float* x, float value, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += value;
}

class threads_test : public gs::testing::gpu_test {};

}  // namespace

TEST_F(threads_test, failed_captures_in_a_loop_leak_nothing) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  auto fail_once = [&](int i) {
    gs::graphs::graph_exec g;
    try {
      gs::graphs::capture(g, stream, pool, [&] {
        auto* x = static_cast<float*>(pool.allocate(std::size_t{1} << 20, stream));
        add_kernel<<<1, 32, 0, stream.get()>>>(x, 1.0F, 32);
        if (i % 2 == 0) throw std::runtime_error{"user code failed"};
        static_cast<void>(cudaStreamSynchronize(stream.get()));  // invalidates the capture
      });
    } catch (std::exception const&) {
    }
    EXPECT_TRUE(g.empty());
  };
  for (int i = 0; i < 50; ++i) fail_once(i);  // settle lazy allocations
  std::size_t free_before = 0;
  std::size_t total = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_before, &total));
  auto const in_use = pool.statistics().bytes_in_use;
  auto const mapped = pool.statistics().mapped_bytes;
  long const pages = resident_pages();
  for (int i = 0; i < 2000; ++i) fail_once(i);
  std::size_t free_after = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_after, free_before);
  EXPECT_EQ(pool.statistics().bytes_in_use, in_use);
  EXPECT_EQ(pool.statistics().mapped_bytes, mapped);
  EXPECT_LE(resident_pages() - pages, 64);
  EXPECT_FALSE(gs::cuda::stream_view{stream}.is_capturing());
}

TEST_F(threads_test, threads_capture_and_replay_their_own_graphs_concurrently) {
  int const n = 1 << 16;
  auto worker = [&](float value, float* result) {
    gs::cuda::stream stream;
    gs::memory::memory_pool pool;
    auto* x = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float) * n, stream.get()));
    gs::graphs::graph_exec g;
    for (int attempt = 0; attempt < 20; ++attempt) {
      gs::graphs::graph_exec fresh;
      gs::graphs::capture(fresh, stream, pool, [&] {
        add_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(x, value, n);
      });  // this_thread mode: the other thread's calls do not break it
      g = std::move(fresh);
    }
    for (int i = 0; i < 500; ++i) g.replay(stream);
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(result, x + n - 1, sizeof(float), cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
  };
  float first = 0.0F;
  float second = 0.0F;
  std::thread a{worker, 1.0F, &first};
  std::thread b{worker, 2.0F, &second};
  a.join();
  b.join();
  EXPECT_EQ(first, 500.0F);
  EXPECT_EQ(second, 1000.0F);
}
