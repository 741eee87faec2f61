// Fused Linear + bias + GELU against its floor (the plain cuBLASLt GEMM) and its alternative
// (GEMM followed by a bias + GELU kernel), forward and backward; TFLOP/s from CUDA events.
// Buffers rotate between two sets so the timed runs do not read a warm L2.

#include <graphstep/error.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/stream.hpp>
#include <graphstep/timed_event.hpp>

#include <benchmark/benchmark.h>

#include <array>
#include <optional>

namespace gs = graphstep;
namespace go = graphstep::ops;

namespace {

enum class variant { floor, fused, unfused };

void gemm_gelu(benchmark::State& state, go::gemm_kind kind, variant how, go::precision type) {
  int const m = static_cast<int>(state.range(0));
  int const n = static_cast<int>(state.range(1));
  int const k = static_cast<int>(state.range(2));
  gs::stream stream;
  gs::memory_pool pool;
  go::cublaslt_handle handle;
  std::size_t const bytes = go::element_bytes(type);
  std::size_t const workspace_bytes = go::gemm_plan::workspace_size();
  void* workspace = pool.allocate(workspace_bytes, stream);
  bool const backward = kind == go::gemm_kind::backward_data_gelu;
  // forward: lhs X[M,K], rhs W[N,K], out Y[M,N]; backward_data_gelu: lhs dY[M,N], rhs W[N,K],
  // out dZ[M,K], with the pre-activation and bias gradient of width K.
  std::size_t const lhs = std::size_t(m) * (backward ? n : k);
  std::size_t const out = std::size_t(m) * (backward ? k : n);
  std::array<std::optional<go::gemm_plan>, 2> plans;
  for (auto& plan : plans) {
    auto alloc = [&](std::size_t elements) {
      void* p = pool.allocate(elements * bytes, stream);
      GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(p, 0, elements * bytes, stream.get()));
      return p;
    };
    go::gemm_operands operands{alloc(lhs), alloc(std::size_t(n) * k), alloc(out),
                               alloc(std::size_t(backward ? k : n)), alloc(out),
                               alloc(std::size_t(backward ? k : n))};
    go::gemm_problem problem{kind, m, n, k, type};
    go::gemm_options options;
    if (how == variant::floor) {
      problem.kind = backward ? go::gemm_kind::backward_data : go::gemm_kind::forward;
    }
    options.force_unfused = how == variant::unfused;
    options.autotune_candidates = 4;
    plan.emplace(handle, problem, operands, workspace, workspace_bytes, options, stream);
  }
  gs::timed_event start;
  gs::timed_event stop;
  for (int i = 0; i < 5; ++i) plans[i % 2]->run(stream);  // warm-up
  std::size_t i = 0;
  for (auto _ : state) {
    start.record(stream);
    plans[i++ % 2]->run(stream);
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(gs::timed_event::elapsed_ms(start, stop) / 1e3);
  }
  go::gemm_problem const counted{kind, m, n, k, type};
  state.counters["TFLOPs"] = benchmark::Counter(go::flops(counted) / 1e12,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string{go::name(type)} + (plans[0]->fused() ? " fused" : " unfused"));
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({4096, 4096, 4096})   // compute-bound: GELU should be almost free
      ->Args({8192, 4096, 1024})  // memory-bound: where fusing pays
      ->Args({640, 2048, 4096})   // the MLP's fc1 (batch 640, 4096 -> 2048)
      ->Args({640, 1024, 2048})   // and fc2
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
}

}  // namespace

BENCHMARK_CAPTURE(gemm_gelu, forward_floor_bf16, go::gemm_kind::forward_bias_gelu, variant::floor,
                  go::precision::bf16)->Apply(shapes);
BENCHMARK_CAPTURE(gemm_gelu, forward_fused_bf16, go::gemm_kind::forward_bias_gelu, variant::fused,
                  go::precision::bf16)->Apply(shapes);
BENCHMARK_CAPTURE(gemm_gelu, forward_unfused_bf16, go::gemm_kind::forward_bias_gelu,
                  variant::unfused, go::precision::bf16)->Apply(shapes);
BENCHMARK_CAPTURE(gemm_gelu, forward_fused_tf32, go::gemm_kind::forward_bias_gelu, variant::fused,
                  go::precision::tf32)->Apply(shapes);
BENCHMARK_CAPTURE(gemm_gelu, backward_floor_bf16, go::gemm_kind::backward_data_gelu,
                  variant::floor, go::precision::bf16)->Apply(shapes);
BENCHMARK_CAPTURE(gemm_gelu, backward_fused_bf16, go::gemm_kind::backward_data_gelu,
                  variant::fused, go::precision::bf16)->Apply(shapes);
BENCHMARK_CAPTURE(gemm_gelu, backward_unfused_bf16, go::gemm_kind::backward_data_gelu,
                  variant::unfused, go::precision::bf16)->Apply(shapes);
