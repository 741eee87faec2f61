// Capture sizes: 32 sizes of one 40-kernel step, every size captured and instantiated in
// full, against one instantiated template from which the other capture sizes' executables are
// derived by cudaGraphExecUpdate. Reports the capture time of all capture sizes, the time of the
// first request of every capture size (where the template mode pays its updates), the device memory
// taken (pool and executable graphs) and the host cost of a request that switches capture size.
// Then the replay scheduler's own host overhead against a bare replay of the same graph, and
// the host cost of a graph cache's replay against the number of capture sizes sharing its pool.

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/schedule/graph_cache.hpp>
#include <graphstep/schedule/replay_scheduler.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <vector>

// Under valgrind --tool=callgrind --collect-atstart=no, only the requests of the timed loop are
// counted (bench/replay_cost_callgrind.py); elsewhere the toggles do nothing.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

namespace gs = graphstep;
namespace gsch = graphstep::schedule;

namespace {

constexpr int layers = 40;
constexpr std::int64_t row_elements = 4096;

std::size_t device_free_bytes() {
  std::size_t free = 0;
  std::size_t total = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free, &total));
  return free;
}

// A 40-kernel "model" sized by its capture size: dropout layers between two pool buffers. Every
// capture size has the same topology; arguments and grids differ.
struct size_model {
  gs::memory::memory_pool& pool;
  gs::train::capture_safe_rng& rng;
  void operator()(std::int64_t size, gs::cuda::stream_view stream) const {
    std::size_t const n = static_cast<std::size_t>(size * row_elements);
    auto* a = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
    auto* b = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
    auto* mask = static_cast<std::uint8_t*>(pool.allocate(n, stream));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(a, 0, sizeof(float) * n, stream.get()));
    for (int layer = 0; layer < layers; ++layer) {
      float* y = layer % 2 != 0 ? a : b;
      float* x = layer % 2 != 0 ? b : a;
      gs::train::dropout_forward({y, gs::dtype::float32, n}, {mask, gs::dtype::uint8, n},
                                 {x, gs::dtype::float32, n}, 0.1F,
                                 rng.reserve(gs::train::dropout_counters(n)), stream);
    }
    rng.end_step(stream);
    pool.deallocate(mask, stream);
    pool.deallocate(b, stream);
    pool.deallocate(a, stream);
  }
};

gsch::capture_sizes thirty_two_sizes() {
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 8; b <= 256; b += 8) sizes.push_back(b);  // 8, 16, ..., 256
  return gsch::capture_sizes{std::move(sizes)};
}

void many_sizes(benchmark::State& state, gsch::graph_instantiation how) {
  if (gs::cuda::device_count() == 0) return state.SkipWithError("no CUDA device visible");
  gs::cuda::stream stream;
  gs::train::capture_safe_rng rng{7, stream};
  auto const policy = thirty_two_sizes();
  double capture_ms = 0.0;
  double first_serve_ms = 0.0;
  double switch_us = 0.0;
  std::size_t mapped = 0;
  std::size_t device_taken = 0;
  gsch::cache_statistics last;
  for (auto _ : state) {
    stream.synchronize();
    std::size_t const free_before = device_free_bytes();
    {
      gs::memory::memory_pool pool;
      gsch::graph_cache_options options;
      options.instantiation = how;
      gsch::graph_cache cache{policy, size_model{pool, rng}, pool, options};
      auto const start = std::chrono::steady_clock::now();
      cache.precapture(stream);
      stream.synchronize();
      auto const captured = std::chrono::steady_clock::now();
      for (std::int64_t size : policy.capture_order()) {
        static_cast<void>(cache.run(size, stream));
      }
      stream.synchronize();
      auto const served = std::chrono::steady_clock::now();
      capture_ms = std::chrono::duration<double, std::milli>(captured - start).count();
      first_serve_ms = std::chrono::duration<double, std::milli>(served - captured).count();
      state.SetIterationTime(std::chrono::duration<double>(served - start).count());
      mapped = pool.statistics().mapped_bytes;
      std::size_t const free_after = device_free_bytes();
      device_taken = free_before > free_after ? free_before - free_after : 0;
      // Host cost of requests that alternate between two capture sizes (an update each, in
      // template mode).
      int const rounds = 200;
      auto const serve_start = std::chrono::steady_clock::now();
      for (int i = 0; i < rounds; ++i) static_cast<void>(cache.run(i % 2 ? 64 : 128, stream));
      switch_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - serve_start)
              .count() /
          rounds;
      stream.synchronize();
      last = cache.statistics();
    }
  }
  state.counters["sizes"] = static_cast<double>(policy.sizes().size());
  state.counters["capture_ms"] = capture_ms;
  state.counters["first_serve_ms"] = first_serve_ms;
  state.counters["pool_MiB"] = static_cast<double>(mapped) / (1 << 20);
  state.counters["device_MiB"] = static_cast<double>(device_taken) / (1 << 20);
  state.counters["updates"] = static_cast<double>(last.updates);
  state.counters["update_refusals"] = static_cast<double>(last.update_refusals);
  state.counters["switching_request_host_us"] = switch_us;
}

// Host cost of a step of one graphed segment through the scheduler, against the bare replay of
// the same graph: the scheduler's own overhead.
void one_segment_step(benchmark::State& state, bool through_scheduler) {
  if (gs::cuda::device_count() == 0) return state.SkipWithError("no CUDA device visible");
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::train::capture_safe_rng rng{11, stream};
  std::size_t const n = std::size_t{1} << 12;
  auto* x = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
  auto* mask = static_cast<std::uint8_t*>(pool.allocate(n, stream));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float) * n, stream.get()));
  auto body = [&](gs::cuda::stream_view s) {
    for (int layer = 0; layer < 20; ++layer) {
      gs::device_span const data{x, gs::dtype::float32, n};
      gs::train::dropout_forward(data, {mask, gs::dtype::uint8, n}, data, 0.1F,
                                 rng.reserve(gs::train::dropout_counters(n)), s);
    }
    rng.end_step(s);
  };
  gsch::step_spec spec;
  spec.streams = {"main"};
  spec.segments = {{"step", true, "main", {}, {}, {}}};
  gsch::replay_scheduler scheduler{spec, {{"step", body}}, {{"main", stream}}, pool};
  gs::graphs::graph_exec bare;
  gs::graphs::capture(bare, stream, [&] { body(stream); });
  for (int i = 0; i < 10; ++i) {
    scheduler.run();
    bare.replay(stream);
  }
  stream.synchronize();
  double host = 0.0;
  for (auto _ : state) {
    auto const start = std::chrono::steady_clock::now();
    if (through_scheduler) {
      scheduler.run();
    } else {
      bare.replay(stream);
    }
    host +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    stream.synchronize();
  }
  state.counters["host_us"] = host / static_cast<double>(state.iterations());
  pool.deallocate(mask, stream);
  pool.deallocate(x, stream);
}

// Requests timed in every run of the benchmark so far, trial runs included: what a profiler
// collecting around each request saw (bench/replay_cost_callgrind.py divides by it).
std::int64_t timed_requests = 0;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

// Host cost of graph_cache::run replaying a capture size, against the number of capture sizes whose
// graphs share one pool (capture size b: two pool buffers of b x 256 bytes, the first 256 bytes of
// each cleared, so that the work a replay runs is the same in every capture size). The capture
// sizes are pre-captured and replayed once each; requests then go round the capture sizes on one
// stream, so that each one switches capture size. Timed: the call alone; the stream is synchronized
// every 64 requests, untimed. The target is a cost flat in the number of capture sizes.
void graph_cache_replay(benchmark::State& state) {
  if (gs::cuda::device_count() == 0) return state.SkipWithError("no CUDA device visible");
  std::int64_t const size_count = state.range(0);
  gs::cuda::stream stream;
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 1; b <= size_count; ++b) sizes.push_back(b);
  gs::memory::memory_pool pool;
  auto step = [&pool](std::int64_t size, gs::cuda::stream_view s) {
    std::size_t const bytes = static_cast<std::size_t>(size) * 256;
    void* a = pool.allocate(bytes, s);
    void* b = pool.allocate(bytes, s);
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(a, 0, 256, s.get()));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(b, 1, 256, s.get()));
    pool.deallocate(b, s);
    pool.deallocate(a, s);
  };
  gsch::graph_cache_options options;
  options.lifecycle.warmup_runs = 1;
  gsch::graph_cache cache{gsch::capture_sizes{sizes}, step, pool, options};
  cache.precapture(stream);
  for (std::int64_t size : sizes) static_cast<void>(cache.run(size, stream));
  stream.synchronize();
  std::size_t next = 0;
  std::int64_t requests = 0;
  for (auto _ : state) {
    ++timed_requests;
    CALLGRIND_TOGGLE_COLLECT;
    auto const start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(cache.run(sizes[next], stream));
    auto const end = std::chrono::steady_clock::now();
    CALLGRIND_TOGGLE_COLLECT;
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    if (++next == sizes.size()) next = 0;
    if (++requests % 64 == 0) stream.synchronize();
  }
  stream.synchronize();
  state.counters["sizes"] = static_cast<double>(size_count);
  state.counters["timed_requests"] = static_cast<double>(timed_requests);
  state.counters["ordered_replays"] = static_cast<double>(pool.statistics().ordered_replays);
}

}  // namespace

BENCHMARK_CAPTURE(one_segment_step, bare_replay, false)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(one_segment_step, scheduler, true)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(many_sizes, each_size_instantiated, gsch::graph_instantiation::each_size)
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(many_sizes, update_template, gsch::graph_instantiation::update_template)
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(graph_cache_replay)
    ->Arg(8)
    ->Arg(32)
    ->Arg(128)
    ->Arg(512)
    ->UseManualTime()
    ->Repetitions(5)
    ->DisplayAggregatesOnly(true)
    ->Unit(benchmark::kNanosecond);
