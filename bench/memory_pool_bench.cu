// The memory pool on a device: allocation latency against cudaMallocAsync, and the memory of
// N bucket graphs sharing one pool against N separate pools.

#include <benchmark/benchmark.h>

#include <chrono>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <vector>

namespace gs = graphstep;

namespace {

__global__ void touch_kernel(float* x, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 1.0F;
}

// Host time of an allocate + deallocate pair; a few sizes cycled so best fit has work to do.
void pool_allocate_free(benchmark::State& state) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  std::vector<std::size_t> const sizes{256, 4096, 65536, 1 << 20};
  for (std::size_t s : sizes) pool.deallocate(pool.allocate(s, stream), stream);  // warm-up
  std::size_t i = 0;
  for (auto _ : state) {
    void* p = pool.allocate(sizes[i++ % sizes.size()], stream);
    pool.deallocate(p, stream);
  }
  stream.synchronize();
}

void cuda_malloc_async_free(benchmark::State& state) {
  gs::cuda::stream stream;
  std::vector<std::size_t> const sizes{256, 4096, 65536, 1 << 20};
  for (std::size_t s : sizes) {  // warm-up: the default memory pool keeps the memory
    void* p = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMallocAsync(&p, s, stream.get()));
    GRAPHSTEP_CUDA_TRY(cudaFreeAsync(p, stream.get()));
  }
  std::size_t i = 0;
  for (auto _ : state) {
    void* p = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMallocAsync(&p, sizes[i++ % sizes.size()], stream.get()));
    GRAPHSTEP_CUDA_TRY(cudaFreeAsync(p, stream.get()));
  }
  stream.synchronize();
}

// N bucket graphs, largest first, each allocating two buffers proportional to its bucket.
void bucket_graph_memory(benchmark::State& state) {
  bool const shared = state.range(0) != 0;
  int const buckets = static_cast<int>(state.range(1));
  gs::cuda::stream stream;
  std::size_t mapped = 0;
  double capture_ms = 0.0;
  for (auto _ : state) {
    std::vector<gs::memory::memory_pool> pools;
    std::vector<gs::graphs::graph_exec> graphs(static_cast<std::size_t>(buckets));
    if (shared) pools.emplace_back();
    auto const start = std::chrono::steady_clock::now();
    for (int b = buckets; b >= 1; --b) {
      gs::memory::memory_pool& pool = shared ? pools.front() : pools.emplace_back();
      int const n = b * (1 << 18);
      gs::graphs::capture(graphs[static_cast<std::size_t>(b - 1)], stream, pool, [&] {
        auto* x = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
        auto* y = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
        touch_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(x, n);
        touch_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(y, n);
        pool.deallocate(x, stream);
        pool.deallocate(y, stream);
      });
    }
    capture_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    mapped = 0;
    for (auto const& p : pools) mapped += p.statistics().mapped_bytes;
    state.SetIterationTime(capture_ms / 1e3);
  }
  state.counters["mapped_MiB"] = static_cast<double>(mapped) / (1 << 20);
  state.counters["largest_bucket_MiB"] = 2.0 * sizeof(float) * buckets * (1 << 18) / (1 << 20);
  state.counters["capture_ms"] = capture_ms;
}

}  // namespace

BENCHMARK(pool_allocate_free)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(cuda_malloc_async_free)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(bucket_graph_memory)
    ->ArgNames({"shared", "buckets"})
    ->Args({1, 8})
    ->Args({0, 8})
    ->Args({1, 32})
    ->Args({0, 32})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
