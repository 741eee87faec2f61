// Fused Linear + bias + GELU in TFLOP/s against its floor (the plain cuBLASLt GEMM: GELU should
// be almost free) and its alternative (the same GEMM followed by separate bias/GELU kernels),
// forward, backward through GELU, the weight gradient with its bias gradient, and the whole
// backward of the two-layer MLP. The alternative is a fair one: its bias gradient splits the
// rows across a grid that fills the GPU (the gemm hands it the GEMM's workspace for the partial
// sums), and `bias_gradient` below times that kernel alone against the one-pass form, whose
// N/64 blocks leave most SMs idle at MLP widths. Shapes: 4096³ (compute-bound), M=8192 N=4096
// K=1024 (where the epilogue's memory traffic shows), and the MLP of the design (batch 640, 4096 ->
// 2048 -> 1024).
//
// Method (CUTLASS's measurement guidelines): the gemms are made and autotuned outside the timed
// loop; operands hold random data (zeros would draw less power and flatter the clocks); enough
// operand sets rotate that the timed runs do not find their inputs in L2; warm-up runs precede
// timing; each iteration times a batch of runs with CUDA events (UseManualTime) and reports the
// time of one run; repetitions give the median.

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/gelu.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <random>
#include <string>
#include <vector>

namespace gs = graphstep;
namespace go = graphstep::ops;

namespace {

enum class variant { floor, fused, unfused };

constexpr int runs_per_iteration = 10;
constexpr int warm_up_runs = 5;

// Random device data of one element type, freed at the end of the benchmark.
class device_arena {
 public:
  explicit device_arena(gs::dtype type) : type_{type} {}
  ~device_arena() {
    for (void* p : blocks_) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(p));
  }
  device_arena(device_arena const&) = delete;
  device_arena& operator=(device_arena const&) = delete;

  gs::device_span random(std::size_t elements) {
    std::size_t const bytes = elements * gs::size_in_bytes(type_);
    void* p = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&p, bytes));
    blocks_.push_back(p);
    fill(p, bytes);
    return {p, type_, elements};
  }
  void* raw(std::size_t bytes) {
    void* p = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&p, bytes));
    blocks_.push_back(p);
    return p;
  }

 private:
  // Values in [-1, 1): a host pattern of 1 MiB, repeated.
  void fill(void* p, std::size_t bytes) {
    if (pattern_.empty()) {
      std::mt19937 rng{7};
      std::uniform_real_distribution<float> dist{-1.0F, 1.0F};
      pattern_.resize(std::size_t{1} << 20);
      std::size_t const width = gs::size_in_bytes(type_);
      for (std::size_t i = 0; i + width <= pattern_.size(); i += width) {
        float const f = dist(rng);
        std::uint32_t u = 0;
        std::memcpy(&u, &f, 4);
        if (type_ == gs::dtype::bfloat16) {
          auto const h = static_cast<std::uint16_t>(u >> 16);
          std::memcpy(&pattern_[i], &h, 2);
        } else if (type_ == gs::dtype::float16) {
          // |f| < 1: a normal half from the float's top mantissa bits (truncated), or zero.
          int const e = static_cast<int>((u >> 23) & 0xFFU) - 127 + 15;
          auto const h = static_cast<std::uint16_t>(
              e <= 0 ? 0U
                     : ((u >> 16) & 0x8000U) | (static_cast<std::uint32_t>(e) << 10) |
                           ((u >> 13) & 0x3FFU));
          std::memcpy(&pattern_[i], &h, 2);
        } else {
          std::memcpy(&pattern_[i], &f, 4);
        }
      }
    }
    for (std::size_t done = 0; done < bytes; done += pattern_.size()) {
      std::size_t const n = std::min(pattern_.size(), bytes - done);
      GRAPHSTEP_CUDA_TRY(
          cudaMemcpy(static_cast<char*>(p) + done, pattern_.data(), n, cudaMemcpyHostToDevice));
    }
    // A copy from pageable memory may return before it lands, on the legacy stream, which the
    // benchmark's non-blocking stream does not wait for.
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  }

  gs::dtype type_;
  std::vector<void*> blocks_;
  std::vector<unsigned char> pattern_;
};

// Operands for one problem of any kind, in the arena.
go::gemm_operands operands_for(go::gemm_problem const& p, device_arena& arena) {
  auto const m = static_cast<std::size_t>(p.m);
  auto const n = static_cast<std::size_t>(p.n);
  auto const k = static_cast<std::size_t>(p.k);
  go::gemm_operands o;
  std::string const kind = go::name(p.kind);
  if (kind.rfind("forward", 0) == 0) {
    o = {arena.random(m * k), arena.random(n * k), arena.random(m * n),
         arena.random(n),     arena.random(m * n), {}};
  } else if (kind.rfind("backward_data", 0) == 0) {
    o = {arena.random(m * n), arena.random(n * k), arena.random(m * k), {},
         arena.random(m * k), arena.random(k)};
  } else {
    o = {arena.random(m * n), arena.random(m * k), arena.random(n * k), {}, {}, arena.random(n)};
  }
  return o;
}

std::size_t operand_bytes(go::gemm_problem const& p) {
  auto const m = static_cast<std::size_t>(p.m);
  auto const n = static_cast<std::size_t>(p.n);
  auto const k = static_cast<std::size_t>(p.k);
  return (m * k + n * k + 2 * m * n + 2 * std::max(m, std::max(n, k))) * gs::size_in_bytes(p.type);
}

// Enough operand sets that one run's inputs were evicted from L2 by the others (2 at least).
int rotation_for(std::size_t set_bytes) {
  int device = 0;
  int l2 = 0;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&device));
  GRAPHSTEP_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  auto const wanted = (2 * static_cast<std::size_t>(l2)) / std::max<std::size_t>(set_bytes, 1) + 2;
  return static_cast<int>(std::min<std::size_t>(wanted, 16));
}

go::gemm_kind floor_kind(go::gemm_kind kind) {
  switch (kind) {
    case go::gemm_kind::forward_bias:
    case go::gemm_kind::forward_gelu:
    case go::gemm_kind::forward_bias_gelu: return go::gemm_kind::forward;
    case go::gemm_kind::backward_data_dgelu:
    case go::gemm_kind::backward_data_gelu: return go::gemm_kind::backward_data;
    case go::gemm_kind::backward_weight_bias: return go::gemm_kind::backward_weight;
    case go::gemm_kind::forward:
    case go::gemm_kind::backward_data:
    case go::gemm_kind::backward_weight: break;
  }
  return kind;
}

// Times `sets` groups of gemms, rotating, and reports TFLOP/s for `flops` per group run.
// Times `run(i)` for i = 0, 1, 2, ...: a warm-up, then per iteration `runs_per_iteration` runs
// between two events; the iteration time is the mean run.
template <typename Run>
void time_runs(benchmark::State& state, Run const& run, gs::cuda::stream_view stream) {
  for (int i = 0; i < warm_up_runs; ++i) run(static_cast<std::size_t>(i));
  stream.synchronize();
  gs::cuda::timed_event start;
  gs::cuda::timed_event stop;
  std::size_t next = 0;
  for (auto _ : state) {
    start.record(stream);
    for (int r = 0; r < runs_per_iteration; ++r) run(next++);
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(gs::cuda::timed_event::elapsed_ms(start, stop) / 1e3 /
                           runs_per_iteration);
  }
}

void time_rotating(benchmark::State& state, std::vector<std::vector<go::gemm>> const& sets,
                   double flops, gs::cuda::stream_view stream) {
  time_runs(
      state,
      [&](std::size_t i) {
        for (auto const& gemm : sets[i % sets.size()]) gemm.run(stream);
      },
      stream);
  state.counters["TFLOP/s"] =
      benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}

// One GEMM kind in one variant; range(0..2) = M, N, K.
void linear_gelu(benchmark::State& state, go::gemm_kind kind, variant how, gs::dtype type,
                 go::gemm_math math = go::gemm_math::standard) {
  if (gs::cuda::device_count() == 0) return state.SkipWithError("no CUDA device visible");
  go::gemm_problem const counted{kind, state.range(0), state.range(1), state.range(2), type, math};
  go::gemm_problem problem = counted;
  if (how == variant::floor) problem.kind = floor_kind(kind);
  go::gemm_options options;
  options.force_unfused = how == variant::unfused;
  options.autotune_candidates = 4;
  gs::cuda::stream stream;
  go::cublaslt_handle handle;
  device_arena arena{type};
  std::size_t const workspace_bytes = go::gemm::workspace_size();
  void* workspace = arena.raw(workspace_bytes);
  std::vector<std::vector<go::gemm>> sets;
  int const rotation = rotation_for(operand_bytes(problem));
  for (int i = 0; i < rotation; ++i) {
    std::vector<go::gemm> set;
    set.emplace_back(handle, problem, operands_for(problem, arena), workspace, workspace_bytes,
                     options, stream);
    sets.push_back(std::move(set));
  }
  bool const fused = sets.front().front().fused();
  if (how == variant::fused && !fused) {
    return state.SkipWithError(("not fused: " + sets.front().front().unfused_reason()).c_str());
  }
  time_rotating(state, sets, go::flops(counted), stream);
  state.SetLabel(go::describe(problem) + (fused ? "" : " + kernels") + ", " +
                 std::to_string(rotation) + " sets");
}

// The backward of fc1 (K -> N1, GELU) and fc2 (N1 -> N2) for a batch M; range = M, K, N1, N2.
// Fused: BGRADB (dW2, db2), DGELU_BGRAD (dZ1, db1), plain dW1 and dX: 4 GEMMs, no kernels.
void mlp_backward(benchmark::State& state, variant how, gs::dtype type) {
  if (gs::cuda::device_count() == 0) return state.SkipWithError("no CUDA device visible");
  std::int64_t const m = state.range(0), k = state.range(1), n1 = state.range(2),
                     n2 = state.range(3);
  go::gemm_options options;
  options.force_unfused = how == variant::unfused;
  options.autotune_candidates = 4;
  gs::cuda::stream stream;
  go::cublaslt_handle handle;
  device_arena arena{type};
  std::size_t const workspace_bytes = go::gemm::workspace_size();
  void* workspace = arena.raw(workspace_bytes);
  std::vector<go::gemm_problem> const problems{
      {go::gemm_kind::backward_weight_bias, m, n2, n1, type},
      {go::gemm_kind::backward_data_gelu, m, n2, n1, type},
      {go::gemm_kind::backward_weight, m, n1, k, type},
      {go::gemm_kind::backward_data, m, n1, k, type}};
  double flops = 0.0;
  std::size_t set_bytes = 0;
  for (auto const& p : problems) {
    flops += go::flops(p);
    set_bytes += operand_bytes(p);
  }
  int const rotation = rotation_for(set_bytes);
  std::vector<std::vector<go::gemm>> sets;
  for (int i = 0; i < rotation; ++i) {
    // Shared tensors as in a real backward: dY2 feeds both fc2 GEMMs, dZ1 both fc1 GEMMs.
    auto const rows = static_cast<std::size_t>(m);
    gs::device_span const dy2 = arena.random(rows * static_cast<std::size_t>(n2));
    gs::device_span const a1 = arena.random(rows * static_cast<std::size_t>(n1));
    gs::device_span const z1 = arena.random(rows * static_cast<std::size_t>(n1));
    gs::device_span const dz1 = arena.random(rows * static_cast<std::size_t>(n1));
    gs::device_span const x = arena.random(rows * static_cast<std::size_t>(k));
    gs::device_span const w1 = arena.random(static_cast<std::size_t>(n1 * k));
    gs::device_span const w2 = arena.random(static_cast<std::size_t>(n2 * n1));
    std::vector<go::gemm_operands> const operands{
        {dy2,
         a1,
         arena.random(static_cast<std::size_t>(n2 * n1)),
         {},
         {},
         arena.random(static_cast<std::size_t>(n2))},
        {dy2, w2, dz1, {}, z1, arena.random(static_cast<std::size_t>(n1))},
        {dz1, x, arena.random(static_cast<std::size_t>(n1 * k)), {}, {}, {}},
        {dz1, w1, arena.random(rows * static_cast<std::size_t>(k)), {}, {}, {}}};
    std::vector<go::gemm> set;
    for (std::size_t j = 0; j < problems.size(); ++j) {
      set.emplace_back(handle, problems[j], operands[j], workspace, workspace_bytes, options,
                       stream);
    }
    sets.push_back(std::move(set));
  }
  std::size_t kernels = 0;
  for (auto const& gemm : sets.front()) kernels += gemm.decision().kernels.size();
  time_rotating(state, sets, flops, stream);
  state.SetLabel(std::string{gs::name(type)} + ", " + std::to_string(problems.size()) +
                 " GEMMs + " + std::to_string(kernels) + " epilogue kernels per backward, " +
                 std::to_string(rotation) + " sets");
}

// The unfused path's bias gradient alone, db[N] = Σ_rows dz[M,N], in GB/s of dz read; range =
// M, N. `sliced` gives it the workspace a gemm gives it (rows split across the GPU, then the
// slices added in order); otherwise one block per column tile walks all M rows.
void bias_gradient(benchmark::State& state, bool sliced, gs::dtype type) {
  if (gs::cuda::device_count() == 0) return state.SkipWithError("no CUDA device visible");
  std::int64_t const m = state.range(0);
  std::int64_t const n = state.range(1);
  gs::cuda::stream stream;
  device_arena arena{type};
  std::size_t const workspace_bytes = sliced ? go::bias_gradient_workspace_size(n) : 0;
  void* workspace = sliced ? arena.raw(workspace_bytes) : nullptr;
  std::size_t const dz_bytes = static_cast<std::size_t>(m * n) * gs::size_in_bytes(type);
  int const rotation = rotation_for(dz_bytes);
  std::vector<gs::device_span> dz;
  std::vector<gs::device_span> db;
  for (int i = 0; i < rotation; ++i) {
    dz.push_back(arena.random(static_cast<std::size_t>(m * n)));
    db.push_back({arena.raw(static_cast<std::size_t>(n) * gs::size_in_bytes(type)), type,
                  static_cast<std::size_t>(n)});
  }
  auto run = [&](std::size_t i) {
    go::launch_bias_gradient(db[i % db.size()], dz[i % dz.size()], m, n, workspace, workspace_bytes,
                             stream);
  };
  time_runs(state, run, stream);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(dz_bytes) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string{gs::name(type)} + (sliced ? ", rows sliced" : ", one pass") + ", " +
                 std::to_string(rotation) + " sets");
}

void bias_gradient_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N"})
      ->Args({640, 1024})  // the MLP's fc2 width
      ->Args({640, 2048})  // its fc1 width
      ->Args({640, 4096})
      ->Args({8192, 1024})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
}

void layer_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K"})
      ->Args({4096, 4096, 4096})  // compute-bound: GELU should be almost free
      ->Args({8192, 4096, 1024})  // short K: the epilogue's traffic shows
      ->Args({640, 2048, 4096})   // the MLP's fc1 (batch 640, 4096 -> 2048)
      ->Args({640, 1024, 2048})   // and its fc2 (2048 -> 1024)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
}

void mlp_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N1", "N2"})
      ->Args({640, 4096, 2048, 1024})
      ->Args({8192, 4096, 2048, 1024})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
}

}  // namespace

// Forward: GEMM floor, GEMM + bias + GELU fused (GELU_AUX_BIAS), GEMM then a bias-GELU kernel.
BENCHMARK_CAPTURE(linear_gelu, forward_floor_bf16, go::gemm_kind::forward_bias_gelu, variant::floor,
                  gs::dtype::bfloat16)
    ->Apply(layer_shapes);
BENCHMARK_CAPTURE(linear_gelu, forward_fused_bf16, go::gemm_kind::forward_bias_gelu, variant::fused,
                  gs::dtype::bfloat16)
    ->Apply(layer_shapes);
BENCHMARK_CAPTURE(linear_gelu, forward_unfused_bf16, go::gemm_kind::forward_bias_gelu,
                  variant::unfused, gs::dtype::bfloat16)
    ->Apply(layer_shapes);
BENCHMARK_CAPTURE(linear_gelu, forward_fused_tf32, go::gemm_kind::forward_bias_gelu, variant::fused,
                  gs::dtype::float32, go::gemm_math::tf32)
    ->Apply(layer_shapes);
// Backward through GELU: dgrad floor, DGELU_BGRAD, dgrad then GELU′ and bias-gradient kernels.
BENCHMARK_CAPTURE(linear_gelu, dgrad_floor_bf16, go::gemm_kind::backward_data_gelu, variant::floor,
                  gs::dtype::bfloat16)
    ->Apply(layer_shapes);
BENCHMARK_CAPTURE(linear_gelu, dgrad_fused_bf16, go::gemm_kind::backward_data_gelu, variant::fused,
                  gs::dtype::bfloat16)
    ->Apply(layer_shapes);
BENCHMARK_CAPTURE(linear_gelu, dgrad_unfused_bf16, go::gemm_kind::backward_data_gelu,
                  variant::unfused, gs::dtype::bfloat16)
    ->Apply(layer_shapes);
// Weight gradient with its bias gradient: wgrad floor, BGRADB, wgrad then a bias-gradient kernel.
BENCHMARK_CAPTURE(linear_gelu, wgrad_floor_bf16, go::gemm_kind::backward_weight_bias,
                  variant::floor, gs::dtype::bfloat16)
    ->Apply(layer_shapes);
BENCHMARK_CAPTURE(linear_gelu, wgrad_fused_bf16, go::gemm_kind::backward_weight_bias,
                  variant::fused, gs::dtype::bfloat16)
    ->Apply(layer_shapes);
BENCHMARK_CAPTURE(linear_gelu, wgrad_unfused_bf16, go::gemm_kind::backward_weight_bias,
                  variant::unfused, gs::dtype::bfloat16)
    ->Apply(layer_shapes);
// The MLP's whole backward, fused epilogues against GEMMs + kernels.
BENCHMARK_CAPTURE(mlp_backward, fused_bf16, variant::fused, gs::dtype::bfloat16)->Apply(mlp_shapes);
BENCHMARK_CAPTURE(mlp_backward, unfused_bf16, variant::unfused, gs::dtype::bfloat16)
    ->Apply(mlp_shapes);
// The unfused path's bias gradient, rows sliced across the GPU against one pass.
BENCHMARK_CAPTURE(bias_gradient, sliced_bf16, true, gs::dtype::bfloat16)
    ->Apply(bias_gradient_shapes);
BENCHMARK_CAPTURE(bias_gradient, one_pass_bf16, false, gs::dtype::bfloat16)
    ->Apply(bias_gradient_shapes);
