// Capture cost of many shape buckets: every bucket captured and instantiated, against one
// instantiated template whose executable is switched by update. Reports the capture time of
// all buckets, the pool's memory, and the time of a replay that switches bucket.

#include <graphstep/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/capture_scope.hpp>
#include <graphstep/schedule/graph_cache.hpp>
#include <graphstep/schedule/replay_scheduler.hpp>
#include <graphstep/stream.hpp>
#include <graphstep/timed_event.hpp>

#include <benchmark/benchmark.h>

#include <chrono>

namespace gs = graphstep;
namespace gsch = graphstep::schedule;

namespace {

__global__ void layer_kernel(float* y, float const* x, int n, float w) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * w + 0.5F;
}

// A 40-kernel "model" sized by its bucket.
void bucket_step(gs::memory_pool& pool, std::int64_t bucket, gs::stream_view stream) {
  int const n = static_cast<int>(bucket) * 4096;
  auto* a = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
  auto* b = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
  for (int layer = 0; layer < 40; ++layer) {
    layer_kernel<<<(n + 255) / 256, 256, 0, stream.value()>>>(layer % 2 ? a : b,
                                                             layer % 2 ? b : a, n, 0.99F);
  }
  pool.deallocate(a, stream);
  pool.deallocate(b, stream);
}

void many_buckets(benchmark::State& state, gsch::bucket_instantiation how) {
  gs::stream stream;
  auto const policy = gsch::bucket_policy::powers_then_steps(256, 8);  // 35 buckets
  double capture_ms = 0.0;
  double switch_us = 0.0;
  std::size_t mapped = 0;
  for (auto _ : state) {
    gs::memory_pool pool;
    gsch::graph_cache_options options;
    options.instantiation = how;
    gsch::graph_cache cache{policy, [&](std::int64_t b, gs::stream_view s) {
                              bucket_step(pool, b, s);
                            },
                            pool, options};
    auto const start = std::chrono::steady_clock::now();
    cache.precapture(stream);
    stream.synchronize();
    capture_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                           start).count();
    state.SetIterationTime(capture_ms / 1e3);
    mapped = pool.statistics().mapped_bytes;
    // Host cost of serving requests that alternate between two buckets.
    int const rounds = 200;
    auto const serve_start = std::chrono::steady_clock::now();
    for (int i = 0; i < rounds; ++i) static_cast<void>(cache.run(i % 2 ? 64 : 128, stream));
    switch_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                          serve_start).count() / rounds;
    stream.synchronize();
  }
  state.counters["buckets"] = static_cast<double>(policy.buckets().size());
  state.counters["capture_ms"] = capture_ms;
  state.counters["pool_MiB"] = static_cast<double>(mapped) / (1 << 20);
  state.counters["switching_request_host_us"] = switch_us;
}

// Host cost of a step of one graphed segment through the scheduler, against the bare replay of
// the same graph: the scheduler's own overhead (target: within 5%).
void one_segment_step(benchmark::State& state, bool through_scheduler) {
  gs::stream stream;
  gs::memory_pool pool;
  int const n = 1 << 12;
  auto* x = static_cast<float*>(pool.allocate(sizeof(float) * n, stream));
  auto body = [&](gs::stream_view s) {
    for (int layer = 0; layer < 20; ++layer) {
      layer_kernel<<<(n + 255) / 256, 256, 0, s.value()>>>(x, x, n, 0.99F);
    }
  };
  gsch::step_spec spec;
  spec.streams = {"main"};
  spec.segments = {{"step", true, "main", {}, {}, {}}};
  gsch::replay_scheduler scheduler{spec, {{"step", body}}, {{"main", stream}}, pool};
  gs::graph bare;
  gs::capture(bare, stream, [&] { body(stream); });
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
    host += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count();
    stream.synchronize();
  }
  state.counters["host_us"] = host / static_cast<double>(state.iterations());
}

}  // namespace

BENCHMARK_CAPTURE(one_segment_step, bare_replay, false)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(one_segment_step, scheduler, true)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(many_buckets, each_bucket_instantiated, gsch::bucket_instantiation::each_bucket)
    ->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(many_buckets, update_template, gsch::bucket_instantiation::update_template)
    ->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);
