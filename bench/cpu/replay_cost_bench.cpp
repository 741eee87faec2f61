// Host cost of the pool's part of a graph cache's replay against the number of graphs of capture
// sizes sharing one pool, on the CPU: on every request graph_cache::run chooses the capture size
// (capture_sizes) and, around the launch, the pool orders the replay after launches of graphs
// that share its memory (pool_engine::before_replay, after_replay); here on a device whose
// launches and events cost nothing. The simulator's graph_cache_replay benchmark
// (bench/schedule_bench.cpp) measures the whole call, the cache's own bookkeeping included.
//
// The capture sizes (1 to N rows) are captured largest first into one pool, after a warm-up step of
// each, every step reusing the memory of the larger ones, so every graph shares memory with
// every other (counter `sharing`). Requests then go round the capture sizes, so that each one
// switches capture size:
//   replay_cost/one_stream/N       every request on one stream (the common training loop);
//   replay_cost/two_streams/N      requests alternate between two streams whose launches have
//                                  completed by the next request (the GPU keeps up).
// One iteration is one request; read the median of the repetitions.

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/schedule/capture_sizes.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memory/detail/pool_engine.hpp"

// Under valgrind --tool=callgrind --collect-atstart=no, only the requests of the timed loop are
// counted (bench/replay_cost_callgrind.py); elsewhere the toggles do nothing.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

namespace gm = graphstep::memory::detail;
namespace gsch = graphstep::schedule;

namespace {

constexpr gm::stream_id first_stream = 0x1000;
constexpr gm::stream_id second_stream = 0x2000;
constexpr std::size_t row_bytes = 4096;

// One address range that grows at its end; events that cost nothing and have completed when
// `completes` says.
class null_device final : public gm::pool_device {
 public:
  explicit null_device(bool completes) : completes_{completes} {}
  growth_status grow(std::size_t bytes, growth& out) override {
    out.base = base_;
    out.bytes = bytes;
    out.extends_region = mapped_ > 0;
    mapped_ += bytes;
    return growth_status::grown;
  }
  [[nodiscard]] std::size_t granularity() const override { return std::size_t{2} << 20; }
  [[nodiscard]] std::size_t reserved_bytes() const override { return mapped_; }
  [[nodiscard]] std::size_t mapped_bytes() const override { return mapped_; }
  std::size_t shrink(std::uintptr_t /*base*/, std::size_t /*region_bytes*/,
                     std::size_t /*free_bytes*/) override {
    return 0;
  }
  void record(gm::event_id /*event*/, gm::stream_id /*stream*/) override {}
  [[nodiscard]] bool complete(gm::event_id /*event*/) override { return completes_; }
  void wait(gm::stream_id /*stream*/, gm::event_id /*event*/) override {}
  void synchronize(gm::event_id /*event*/) override {}
  void forget(gm::event_id /*event*/) noexcept override {}

 private:
  bool completes_;
  std::uintptr_t base_{std::uintptr_t{1} << 40};
  std::size_t mapped_{};
};

// A step sized by its capture size: two activations and a temporary, all freed by its end.
void run_step(gm::pool_engine& pool, std::int64_t size, gm::stream_id stream,
              std::optional<gm::capture_id> capture) {
  std::size_t const bytes = static_cast<std::size_t>(size) * row_bytes;
  std::uintptr_t const a = pool.allocate(bytes, stream, capture);
  std::uintptr_t const b = pool.allocate(bytes, stream, capture);
  std::uintptr_t const temp = pool.allocate(bytes / 2 + 256, stream, capture);
  pool.deallocate(temp, stream, capture);
  pool.deallocate(b, stream, capture);
  pool.deallocate(a, stream, capture);
}

// What graph_cache::run does on a request, but for the cache's bookkeeping and the launch: a
// graph id is its capture size.
struct cache {
  gsch::capture_sizes policy;
  gm::pool_engine& pool;
  // Per graph, what its lease keeps between replays; its launch event is its id.
  std::map<gm::graph_id, gm::replay_memo> memos;

  gsch::size_choice run(std::int64_t size, gm::stream_id stream) {
    gsch::size_choice const choice = policy.choose(size);
    auto const graph = static_cast<gm::graph_id>(choice.captured);
    gm::replay_memo& memo = memos[graph];
    if (!pool.replay_is_settled(memo, stream, graph)) {
      pool.before_replay(graph, stream);
      pool.after_replay(graph, stream, graph, memo);
    }
    return choice;
  }

  // As graph_cache::precapture: every warm-up first, then the captures, largest first.
  void precapture(gm::stream_id stream) {
    std::vector<std::int64_t> const order = policy.capture_order();
    for (std::int64_t size : order) run_step(pool, size, stream, std::nullopt);
    for (std::int64_t size : order) {
      auto const graph = static_cast<gm::graph_id>(size);
      pool.begin_capture(graph, graph, "size " + std::to_string(size), stream);
      run_step(pool, size, stream, gm::capture_id{graph});
      static_cast<void>(pool.finish_capture(graph, true));
    }
  }
};

// Requests timed in every run of the benchmark so far, trial runs included: what a profiler
// collecting around each request saw (bench/replay_cost_callgrind.py divides by it).
std::int64_t timed_requests = 0;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

void replay_cost(benchmark::State& state, bool two_streams) {
  std::int64_t const size_count = state.range(0);
  null_device device{two_streams};
  gm::pool_engine_options options;
  options.growth_bytes = std::size_t{2} << 20;
  gm::pool_engine pool{options, device};
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 1; b <= size_count; ++b) sizes.push_back(b);
  cache c{gsch::capture_sizes{sizes}, pool, {}};
  c.precapture(first_stream);
  gm::stream_id stream = first_stream;
  auto const next_stream = [&stream, two_streams] {
    if (two_streams) stream = stream == first_stream ? second_stream : first_stream;
  };
  // Two rounds untimed, as the timed loop goes: a graph's first replay on a second stream
  // finds the graphs it shares memory with, once.
  for (int round = 0; round < 2; ++round) {
    for (std::int64_t size : sizes) {
      c.run(size, stream);
      next_stream();
    }
  }
  std::size_t next = 0;
  for (auto _ : state) {
    ++timed_requests;
    CALLGRIND_TOGGLE_COLLECT;
    benchmark::DoNotOptimize(c.run(sizes[next], stream));
    CALLGRIND_TOGGLE_COLLECT;
    if (++next == sizes.size()) next = 0;
    next_stream();
  }
  std::size_t shared = 0;
  for (std::int64_t size : sizes) {
    shared += pool.blocks().graphs_sharing_memory_with(static_cast<gm::graph_id>(size)).size();
  }
  state.counters["sizes"] = static_cast<double>(size_count);
  state.counters["timed_requests"] = static_cast<double>(timed_requests);
  // Graphs each shares memory with, itself included, on average.
  state.counters["sharing"] = static_cast<double>(shared) / static_cast<double>(size_count);
  state.counters["ordered_replays"] = static_cast<double>(pool.stats().ordered_replays);
  for (std::int64_t size : sizes) pool.release_graph(static_cast<gm::graph_id>(size));
}

}  // namespace

BENCHMARK_CAPTURE(replay_cost, one_stream, false)
    ->Arg(8)
    ->Arg(32)
    ->Arg(128)
    ->Arg(512)
    ->Repetitions(5)
    ->DisplayAggregatesOnly(true);
BENCHMARK_CAPTURE(replay_cost, two_streams, true)
    ->Arg(8)
    ->Arg(32)
    ->Arg(128)
    ->Arg(512)
    ->Repetitions(5)
    ->DisplayAggregatesOnly(true);
