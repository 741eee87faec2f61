// The allocation planner on generated training-step traces: planning time, and the footprint
// against the lower bound (counter footprint_ratio = slab / peak of live bytes; 1.0 is optimal).

#include <graphstep/memory/allocation_plan.hpp>

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace gm = graphstep::memory;

namespace {

// Forward keeps activations until backward and frees temporaries at once; backward frees
// activations layer by layer and keeps weight gradients to the end.
gm::allocation_trace training_trace(int layers, std::uint32_t seed) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<std::size_t> size{16 << 10, 16 << 20};
  gm::allocation_trace t;
  std::vector<std::size_t> activations;
  for (int l = 0; l < layers; ++l) {
    std::size_t const temp = t.record_allocate(size(rng) / 4);
    activations.push_back(t.record_allocate(size(rng)));
    t.record_deallocate(temp);
  }
  for (int l = layers; l-- > 0;) {
    static_cast<void>(t.record_allocate(size(rng) / 2));  // weight gradient
    std::size_t const temp = t.record_allocate(size(rng) / 4);
    t.record_deallocate(temp);
    t.record_deallocate(activations[static_cast<std::size_t>(l)]);
  }
  return t;
}

void plan_training_step(benchmark::State& state) {
  auto const trace = training_trace(static_cast<int>(state.range(0)), 7);
  gm::allocation_plan plan;
  for (auto _ : state) {
    plan = gm::plan_allocations(trace);
    benchmark::DoNotOptimize(plan.slab_bytes);
  }
  state.counters["allocations"] = static_cast<double>(trace.allocation_count());
  state.counters["footprint_ratio"] = plan.footprint_ratio();
}

}  // namespace

BENCHMARK(plan_training_step)
    ->Arg(10)
    ->Arg(100)
    ->Arg(500)
    ->Arg(2000)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
