// Padding waste of lists of capture sizes on a realistic request-size distribution (log-normal
// batch sizes, as in serving and packed-sequence training): the counter pad_ratio is the fraction
// of processed elements that are padding; capture sizes the number of graphs it costs.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <graphstep/schedule/capture_sizes.hpp>
#include <random>
#include <vector>

namespace gsch = graphstep::schedule;

namespace {

std::vector<std::int64_t> lognormal_sizes(std::int64_t largest) {
  std::mt19937 rng{11};
  std::lognormal_distribution<double> dist{std::log(40.0), 0.9};
  std::vector<std::int64_t> sizes(100000);
  for (auto& s : sizes) {
    s = std::clamp<std::int64_t>(static_cast<std::int64_t>(dist(rng)), 1, largest);
  }
  return sizes;
}

void capture_size_padding(benchmark::State& state) {
  std::int64_t const step = state.range(0);
  auto const policy = gsch::capture_sizes::powers_then_steps(512, step);
  auto const sizes = lognormal_sizes(512);
  gsch::cache_statistics stats;
  for (auto _ : state) {
    stats = {};
    for (std::int64_t size : sizes) {
      auto const choice = policy.choose(size);
      stats.requested_elements += size;
      stats.padded_elements += choice.padding;
    }
    benchmark::DoNotOptimize(stats.padded_elements);
  }
  state.counters["sizes"] = static_cast<double>(policy.sizes().size());
  state.counters["pad_ratio"] = stats.pad_ratio();
}

}  // namespace

BENCHMARK(capture_size_padding)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMillisecond);
