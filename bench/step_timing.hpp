#pragma once

// How the GPU benchmarks time one step: warm-up, then per iteration the GPU time between two
// CUDA events around the step (manual time) and the host time spent issuing it (counter
// host_us, the mean over the iterations).

#include <benchmark/benchmark.h>

#include <chrono>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream_view.hpp>

namespace bench {

template <typename Enqueue>
void time_steps(benchmark::State& state, graphstep::cuda::stream_view stream, int warmup_steps,
                Enqueue&& enqueue) {
  graphstep::cuda::timed_event start;
  graphstep::cuda::timed_event stop;
  for (int i = 0; i < warmup_steps; ++i) enqueue();  // outside the timed loop
  stream.synchronize();
  double host_seconds = 0.0;
  for (auto _ : state) {
    start.record(stream);
    auto const host_start = std::chrono::steady_clock::now();
    enqueue();
    host_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(graphstep::cuda::timed_event::elapsed_ms(start, stop) / 1e3);
  }
  state.counters["host_us"] =
      benchmark::Counter(host_seconds * 1e6 / static_cast<double>(state.iterations()));
}

}  // namespace bench
