#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <graphstep/ops/gelu.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "detail/logger.hpp"
#include "detail/span_checks.hpp"

namespace graphstep::ops {

void detail::lt_handle_deleter::operator()(pointer handle) const noexcept {
  if (cublasStatus_t const s = cublasLtDestroy(handle); s != CUBLAS_STATUS_SUCCESS) {
    graphstep::detail::log_lazily(log_level::error, [&] {
      return "cublasLtDestroy failed (" + std::to_string(static_cast<int>(s)) + ")";
    });
  }
}

cublaslt_handle::cublaslt_handle() {
  cublasLtHandle_t handle = nullptr;
  GRAPHSTEP_CUBLAS_TRY(cublasLtCreate(&handle));
  handle_.reset(handle);
}

namespace {

struct desc_deleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const noexcept { cublasLtMatmulDescDestroy(d); }
};
struct layout_deleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const noexcept {
    cublasLtMatrixLayoutDestroy(l);
  }
};
struct preference_deleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const noexcept {
    cublasLtMatmulPreferenceDestroy(p);
  }
};
using matmul_desc = std::unique_ptr<cublasLtMatmulDescOpaque_t, desc_deleter>;
using matrix_layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, layout_deleter>;
using matmul_preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, preference_deleter>;

cudaDataType_t data_type(dtype type) {
  switch (type) {
    case dtype::float16: return CUDA_R_16F;
    case dtype::bfloat16: return CUDA_R_16BF;
    case dtype::float32: break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("gemm", type);
  }
  return CUDA_R_32F;
}

cublasComputeType_t compute_type(gemm_math math) {
  return math == gemm_math::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

cublasLtEpilogue_t to_cublaslt(epilogue e) {
  switch (e) {
    case epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case epilogue::gelu_aux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case epilogue::dgelu: return CUBLASLT_EPILOGUE_DGELU;
    case epilogue::gelu_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case epilogue::dgelu_bgrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case epilogue::bgradb: return CUBLASLT_EPILOGUE_BGRADB;
    case epilogue::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

std::uint32_t alignment_of(void const* p) {
  return ops::alignment_of(reinterpret_cast<std::uintptr_t>(p));
}

// Algorithms chosen per algorithm_key (gemm_problem.hpp), shared by every gemm of the process: a
// second gemm of the same shape and alignments (another layer, another capture size's capture)
// skips the heuristic query and the autotune.
std::mutex algorithm_mutex;
std::map<algorithm_key, cublasLtMatmulAlgo_t>& algorithm_cache() {
  static std::map<algorithm_key, cublasLtMatmulAlgo_t> cache;
  return cache;
}

// Each operand the kind uses, of the problem's type and as large as its row-major shape
// (gemm_operands): a missing one is an empty span, refused by name.
void check_operands(gemm_problem const& p, gemm_operands const& o) {
  std::string const what = std::string{"gemm "} + name(p.kind);
  lt_call const c = map_to_cublaslt(p);  // refuses bad sizes and types first
  auto const m = static_cast<std::size_t>(p.m);
  auto const n = static_cast<std::size_t>(p.n);
  auto const k = static_cast<std::size_t>(p.k);
  bool const forward = p.kind == gemm_kind::forward || p.kind == gemm_kind::forward_bias ||
                       p.kind == gemm_kind::forward_bias_gelu || p.kind == gemm_kind::forward_gelu;
  bool const weight =
      p.kind == gemm_kind::backward_weight || p.kind == gemm_kind::backward_weight_bias;
  std::size_t const lhs = forward ? m * k : m * n;
  std::size_t const rhs = weight ? m * k : n * k;
  std::size_t const out = forward ? m * n : (weight ? n * k : m * k);
  using graphstep::detail::expect_operand;
  expect_operand(what, "lhs", o.lhs, p.type, lhs);
  expect_operand(what, "rhs", o.rhs, p.type, rhs);
  expect_operand(what, "out", o.out, p.type, out);
  auto const bias_length = static_cast<std::size_t>(c.bias_length);
  if (p.kind == gemm_kind::forward_bias || p.kind == gemm_kind::forward_bias_gelu) {
    expect_operand(what, "bias", o.bias, p.type, bias_length);
  }
  // The pre-activation: written by the forward ([M,N]), read by the backward ([M,K]).
  if (c.aux_ld != 0) expect_operand(what, "pre_activation", o.pre_activation, p.type, out);
  if (p.kind == gemm_kind::backward_data_gelu || p.kind == gemm_kind::backward_weight_bias) {
    expect_operand(what, "bias_gradient", o.bias_gradient, p.type, bias_length);
  }
}

operand_addresses addresses_of(gemm_problem const& problem, gemm_operands const& o) {
  auto const address = [](device_span const& s) {
    return reinterpret_cast<std::uintptr_t>(s.data());
  };
  // cuBLASLt's A is the row-major rhs and its B the lhs, for every kind (map_to_cublaslt).
  bool const gradient_epilogue = problem.kind == gemm_kind::backward_data_gelu ||
                                 problem.kind == gemm_kind::backward_weight_bias;
  operand_addresses at;
  at.a = address(o.rhs);
  at.b = address(o.lhs);
  at.d = address(o.out);
  at.bias = address(gradient_epilogue ? o.bias_gradient : o.bias);
  at.aux = address(o.pre_activation);
  return at;
}

}  // namespace

struct detail::lt_state {
  cublasLtHandle_t handle{};
  gemm_problem problem;
  gemm_operands operands;
  gemm_options options;
  lt_call call;
  path_decision path;
  void* workspace{};
  std::size_t workspace_bytes{};
  matmul_desc desc;
  matrix_layout a, b, d;
  cublasLtMatmulAlgo_t algorithm{};

  // cuBLASLt's A is the row-major rhs and its B the lhs, for every kind (map_to_cublaslt):
  // forward A = W, B = X; backward_data A = W, B = dY; backward_weight A = X, B = dY.
  [[nodiscard]] void const* a_ptr() const noexcept { return operands.rhs.data(); }
  [[nodiscard]] void const* b_ptr() const noexcept { return operands.lhs.data(); }

  [[nodiscard]] cublasStatus_t matmul(cublasLtMatmulAlgo_t const& algo,
                                      cuda::stream_view stream) const {
    float const alpha = 1.0F;  // host pointer mode: the values are baked into a captured graph
    float const beta = 0.0F;
    return cublasLtMatmul(handle, desc.get(), &alpha, a_ptr(), a.get(), b_ptr(), b.get(), &beta,
                          operands.out.data(), d.get(), operands.out.data(), d.get(), &algo,
                          workspace, workspace_bytes, stream.get());
  }

  void enqueue(cuda::stream_view stream) const {
    GRAPHSTEP_CUBLAS_TRY(matmul(algorithm, stream));
    // The unfused path: the plain GEMM above, then the epilogue as kernels, in order.
    gemm_problem const& p = problem;
    for (unfused_kernel const kernel : path.kernels) {
      switch (kernel) {
        case unfused_kernel::bias:
          launch_bias_gelu(operands.out, {}, operands.bias, p.m, p.n, false, options.form, stream);
          break;
        case unfused_kernel::gelu:
          launch_bias_gelu(operands.out, operands.pre_activation, {}, p.m, p.n, true, options.form,
                           stream);
          break;
        case unfused_kernel::bias_gelu:
          launch_bias_gelu(operands.out, operands.pre_activation, operands.bias, p.m, p.n, true,
                           options.form, stream);
          break;
        case unfused_kernel::gelu_backward:
          launch_gelu_backward(operands.out, operands.out, operands.pre_activation, p.m, p.k,
                               options.form, stream);
          break;
        // The GEMM's workspace is free again once the GEMM is done, in stream order: the bias
        // gradient keeps its partial sums there.
        case unfused_kernel::bias_gradient_of_out:
          launch_bias_gradient(operands.bias_gradient, operands.out, p.m, p.k, workspace,
                               workspace_bytes, stream);
          break;
        case unfused_kernel::bias_gradient_of_lhs:
          launch_bias_gradient(operands.bias_gradient, operands.lhs, p.m, p.n, workspace,
                               workspace_bytes, stream);
          break;
      }
    }
  }

  // Descriptor and layouts for the current path (the epilogue only when fused).
  void describe() {
    lt_call const& c = call;
    cudaDataType_t const type = data_type(problem.type);
    cublasLtMatmulDesc_t raw = nullptr;
    GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescCreate(&raw, compute_type(problem.math), CUDA_R_32F));
    desc.reset(raw);
    cublasOperation_t const ta = c.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t const tb = c.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    GRAPHSTEP_CUBLAS_TRY(
        cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GRAPHSTEP_CUBLAS_TRY(
        cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    epilogue const e = path.gemm_epilogue;
    if (e != epilogue::none) {
      cublasLtEpilogue_t const ep = to_cublaslt(e);
      GRAPHSTEP_CUBLAS_TRY(
          cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
      if (c.bias_length != 0) {
        // Bias and bias gradient take D's type (the default BIAS_DATA_TYPE).
        void const* bias = e == epilogue::dgelu_bgrad || e == epilogue::bgradb
                               ? operands.bias_gradient.data()
                               : operands.bias.data();
        GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                            &bias, sizeof bias));
      }
      if (c.aux_ld != 0) {
        void* const aux = operands.pre_activation.data();
        GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
            raw, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        std::int64_t const aux_ld = c.aux_ld;
        GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
            raw, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
      }
    }
    auto layout = [&](std::int64_t rows, std::int64_t cols, std::int64_t ld) {
      cublasLtMatrixLayout_t l = nullptr;
      GRAPHSTEP_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&l, type, static_cast<std::uint64_t>(rows),
                                                      static_cast<std::uint64_t>(cols), ld));
      return matrix_layout{l};
    };
    a = c.transpose_a ? layout(c.k, c.m, c.lda) : layout(c.m, c.k, c.lda);
    b = c.transpose_b ? layout(c.n, c.k, c.ldb) : layout(c.k, c.n, c.ldb);
    d = layout(c.m, c.n, c.ldc);
  }

  // Up to `wanted` candidates from the pointer-aware heuristic; empty when cuBLASLt has none.
  [[nodiscard]] std::vector<cublasLtMatmulHeuristicResult_t> candidates(int wanted) const {
    cublasLtMatmulPreference_t raw = nullptr;
    GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&raw));
    matmul_preference const pref{raw};
    std::uint64_t const ws = workspace_bytes;
    GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
        raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    // The heuristic must know the real alignments, or it may pick a kernel that faults. The
    // bias and aux pointers it reads from the descriptor.
    std::uint32_t const align_d = alignment_of(operands.out.data());
    for (auto [attribute, value] :
         {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(a_ptr())},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(b_ptr())},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
          std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}}) {
      GRAPHSTEP_CUBLAS_TRY(
          cublasLtMatmulPreferenceSetAttribute(raw, attribute, &value, sizeof value));
    }
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(wanted));
    int found = 0;
    cublasStatus_t const status =
        cublasLtMatmulAlgoGetHeuristic(handle, desc.get(), a.get(), b.get(), d.get(), d.get(), raw,
                                       wanted, results.data(), &found);
    // NOT_SUPPORTED is cuBLASLt's answer when no algorithm fits: the caller decides.
    if (status == CUBLAS_STATUS_NOT_SUPPORTED)
      found = 0;
    else
      GRAPHSTEP_CUBLAS_TRY(status);
    results.resize(static_cast<std::size_t>(std::max(found, 0)));
    return results;
  }

  // Times each candidate (after a warm-up run of it) and returns the fastest that ran.
  [[nodiscard]] cublasLtMatmulAlgo_t fastest(
      std::vector<cublasLtMatmulHeuristicResult_t> const& results, cuda::stream_view stream) const {
    cuda::timed_event start;
    cuda::timed_event stop;
    float best = std::numeric_limits<float>::max();
    cublasLtMatmulAlgo_t chosen = results.front().algo;
    for (auto const& result : results) {
      if (matmul(result.algo, stream) != CUBLAS_STATUS_SUCCESS) continue;
      start.record(stream);
      bool ran = true;
      for (int r = 0; r < 3 && ran; ++r) ran = matmul(result.algo, stream) == CUBLAS_STATUS_SUCCESS;
      stop.record(stream);
      stop.synchronize();
      float const ms = cuda::timed_event::elapsed_ms(start, stop);
      if (ran && ms < best) {
        best = ms;
        chosen = result.algo;
      }
    }
    return chosen;
  }
};

support gemm::can_implement(gemm_problem const& problem, gemm_operands const& o) {
  return can_fuse(problem, addresses_of(problem, o));
}

std::size_t gemm::workspace_size() {
  int device = 0;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&device));
  int major = 0;
  GRAPHSTEP_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9 ? std::size_t{32} << 20 : std::size_t{4} << 20;
}

gemm::gemm(cublaslt_handle const& handle, gemm_problem const& problem,
           gemm_operands const& operands, void* workspace, std::size_t workspace_bytes,
           gemm_options const& options, cuda::stream_view stream)
    : state_{std::make_unique<detail::lt_state>()} {
  auto& s = *state_;
  std::string const what = describe(problem);
  GRAPHSTEP_EXPECTS(handle.get() != nullptr, what + ": the cuBLASLt handle was moved from");
  check_operands(problem, operands);
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    what +
                        ": a gemm is made before the capture (choosing an algorithm cannot "
                        "be captured); make it first, then capture run()");
  GRAPHSTEP_EXPECTS(workspace_bytes == 0 || workspace != nullptr,
                    what + ": a workspace size was given without a workspace pointer");
  GRAPHSTEP_EXPECTS(reinterpret_cast<std::uintptr_t>(workspace) % 256 == 0,
                    what + ": the workspace must be 256-byte aligned (take it from the pool)");
  s.handle = handle.get();
  s.problem = problem;
  s.operands = operands;
  s.options = options;
  s.workspace = workspace;
  s.workspace_bytes = workspace_bytes;
  s.call = map_to_cublaslt(problem);
  s.path = decide_path(problem, addresses_of(problem, operands), options);
  s.describe();

  int device = 0;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&device));
  auto const key = [&] {
    return algorithm_key_for(device, problem, s.path, addresses_of(problem, operands),
                             options.autotune_candidates, workspace_bytes);
  };
  bool cached = false;
  {
    std::lock_guard const lock{algorithm_mutex};
    if (auto found = algorithm_cache().find(key()); found != algorithm_cache().end()) {
      s.algorithm = found->second;
      cached = true;
    }
  }
  if (cached) {
    s.enqueue(stream);  // one eager run before any capture
    return;
  }
  auto results = s.candidates(options.autotune_candidates);
  while (results.empty()) {  // falls back from a fused epilogue once, then throws
    s.path = path_without_algorithm(problem, s.path, options, workspace_bytes, what);
    s.describe();
    results = s.candidates(options.autotune_candidates);
  }
  // Autotuning times even a single candidate: it also proves that the candidate runs.
  s.algorithm = options.autotune_candidates > 1 ? s.fastest(results, stream) : results.front().algo;
  {
    std::lock_guard const lock{algorithm_mutex};
    algorithm_cache().emplace(key(), s.algorithm);
  }
  s.enqueue(stream);  // one eager run before any capture
}

gemm::~gemm() = default;
gemm::gemm(gemm&&) noexcept = default;
gemm& gemm::operator=(gemm&&) noexcept = default;

void gemm::run(cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(state_ != nullptr,
                    "gemm: this gemm was moved from; run the one it was moved to");
  state_->enqueue(stream);
}

namespace {
std::string const& no_reason() {
  static std::string const empty;
  return empty;
}
path_decision const& no_decision() {
  static path_decision const empty;
  return empty;
}
gemm_problem const& no_problem() {
  static gemm_problem const empty;
  return empty;
}
}  // namespace

bool gemm::fused() const noexcept {
  return state_ && state_->path.fused;
}
std::string const& gemm::unfused_reason() const noexcept {
  return state_ ? state_->path.reason : no_reason();
}
path_decision const& gemm::decision() const noexcept {
  return state_ ? state_->path : no_decision();
}
gemm_problem const& gemm::problem() const noexcept {
  return state_ ? state_->problem : no_problem();
}

}  // namespace graphstep::ops
