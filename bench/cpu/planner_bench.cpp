// The allocation planner on generated training-step traces: planning time, and the footprint
// against the lower bound (counter footprint_ratio = slab / peak of live bytes; 1.0 is optimal).
// Also the host cost of one allocate/deallocate pair in the allocator core with many blocks
// live, which is what a size-class cache for small blocks would have to beat.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <graphstep/memory/allocation_plan.hpp>
#include <graphstep/memory/detail/block_allocator.hpp>
#include <random>
#include <vector>

namespace gm = graphstep::memory;

namespace {

enum class model : std::int64_t { random_layers, transformer, cnn };

// Forward keeps each layer's activation until backward and frees its temporaries at once;
// backward walks the layers in reverse, frees each activation when its layer is done, passes a
// data gradient down and keeps weight gradients to the end (for the optimizer).
gm::allocation_trace training_trace(model shape, int layers, std::uint32_t seed) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<std::size_t> size{16 << 10, 16 << 20};
  std::vector<std::size_t> activation_bytes;
  std::vector<std::size_t> weight_bytes;
  for (int l = 0; l < layers; ++l) {
    switch (shape) {
      case model::random_layers:
        activation_bytes.push_back(size(rng));
        weight_bytes.push_back(size(rng) / 2);
        break;
      case model::transformer:  // attention / MLP blocks: a 4x wider activation every 4th
        activation_bytes.push_back(l % 4 == 1 ? 32u << 20 : 8u << 20);
        weight_bytes.push_back(l % 4 == 1 ? 16u << 20 : (4u << 20) + (12u << 10));
        break;
      case model::cnn:  // activations halve as channels double
        activation_bytes.push_back(std::size_t{64 << 20} >> (l * 6 / layers));
        weight_bytes.push_back(std::size_t{64 << 10} << (l * 6 / layers));
        break;
    }
  }
  gm::allocation_trace t;
  std::uniform_real_distribution<double> jitter{0.1, 0.5};
  std::vector<std::size_t> activations;
  for (std::size_t l = 0; l < activation_bytes.size(); ++l) {
    std::size_t const temp =
        t.record_allocate(static_cast<std::size_t>(activation_bytes[l] * jitter(rng)) + 1);
    activations.push_back(t.record_allocate(activation_bytes[l]));
    t.record_deallocate(temp);
  }
  std::size_t gradient = t.record_allocate(activation_bytes.back());
  for (std::size_t l = activation_bytes.size(); l-- > 0;) {
    static_cast<void>(t.record_allocate(weight_bytes[l]));  // weight gradient
    std::size_t const temp = t.record_allocate(weight_bytes[l] / 2 + 1);
    std::size_t const input_gradient = t.record_allocate(activation_bytes[l > 0 ? l - 1 : 0]);
    t.record_deallocate(temp);
    t.record_deallocate(gradient);
    t.record_deallocate(activations[l]);
    gradient = input_gradient;
  }
  t.record_deallocate(gradient);
  return t;
}

// range(0): the model shape; range(1): layers (5 allocations each).
void plan_training_step(benchmark::State& state) {
  auto const trace =
      training_trace(static_cast<model>(state.range(0)), static_cast<int>(state.range(1)), 7);
  gm::allocation_plan plan;
  for (auto _ : state) {
    plan = gm::plan_allocations(trace);
    benchmark::DoNotOptimize(plan.slab_bytes);
  }
  state.counters["allocations"] = static_cast<double>(trace.allocation_count());
  state.counters["footprint_ratio"] = plan.footprint_ratio();
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(trace.allocation_count()));
}

void verify_training_step(benchmark::State& state) {
  auto const trace = training_trace(model::random_layers, static_cast<int>(state.range(0)), 7);
  auto const plan = gm::plan_allocations(trace);
  for (auto _ : state) gm::verify_plan(trace, plan);
  state.counters["allocations"] = static_cast<double>(trace.allocation_count());
}

// range(0): blocks kept live (mixed sizes, 256 B to 1 MiB) around the measured pair.
void allocator_pair(benchmark::State& state) {
  gm::detail::block_allocator alloc{256};
  alloc.add_region(std::uintptr_t{1} << 40, std::size_t{1} << 40);
  std::mt19937 rng{3};
  std::uniform_int_distribution<int> log_size{8, 20};
  std::vector<std::uintptr_t> live;
  for (std::int64_t i = 0; i < state.range(0); ++i) {
    auto const b = alloc.allocate(std::size_t{1} << log_size(rng), 1, gm::detail::no_graph);
    live.push_back(b->address);
  }
  for (std::size_t i = 0; i < live.size(); i += 2) alloc.deallocate(live[i], 1);  // holes
  std::size_t const sizes[] = {256, 4096, 65536, 1 << 20};
  std::size_t next = 0;
  for (auto _ : state) {
    auto const b = alloc.allocate(sizes[next++ % 4], 1, gm::detail::no_graph);
    benchmark::DoNotOptimize(b);
    alloc.deallocate(b->address, 1);
  }
  state.counters["free_blocks"] = static_cast<double>(alloc.stats().free_blocks);
}

}  // namespace

BENCHMARK(allocator_pair)->Arg(100)->Arg(10000)->Unit(benchmark::kNanosecond);
BENCHMARK(plan_training_step)
    ->ArgNames({"model", "layers"})
    ->ArgsProduct({{static_cast<std::int64_t>(model::random_layers),
                    static_cast<std::int64_t>(model::transformer),
                    static_cast<std::int64_t>(model::cnn)},
                   {10, 100, 500, 2000}})
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK(verify_training_step)->Arg(2000)->Unit(benchmark::kMillisecond);
