#include <graphstep/error.hpp>
#include <graphstep/ops/gelu_kernels.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/timed_event.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace graphstep::ops {

void detail::lt_handle_deleter::operator()(pointer handle) const noexcept {
  if (cublasStatus_t const s = cublasLtDestroy(handle); s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "graphstep: cublasLtDestroy failed (%d)\n", static_cast<int>(s));
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

cudaDataType_t data_type(precision p) {
  switch (p) {
    case precision::fp16: return CUDA_R_16F;
    case precision::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

cublasComputeType_t compute_type(precision p) {
  return p == precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

cublasLtEpilogue_t to_cublaslt(epilogue e) {
  switch (e) {
    case epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case epilogue::gelu_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case epilogue::dgelu_bgrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case epilogue::bgradb: return CUBLASLT_EPILOGUE_BGRADB;
    case epilogue::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

std::uint32_t alignment_of(void const* p) {
  auto const address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// Algorithms chosen per problem and alignment, shared by every plan of the process.
using algorithm_key = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, int, int,
                                 std::uint32_t, std::uint32_t, std::uint32_t, std::size_t>;
std::mutex algorithm_mutex;
std::map<algorithm_key, cublasLtMatmulAlgo_t>& algorithm_cache() {
  static std::map<algorithm_key, cublasLtMatmulAlgo_t> cache;
  return cache;
}

void check_operands(gemm_problem const& p, gemm_operands const& o) {
  std::string const what = std::string{"gemm "} + name(p.kind);
  GRAPHSTEP_EXPECTS(o.lhs && o.rhs && o.out, what + ": lhs, rhs and out are required");
  bool const needs_bias = p.kind == gemm_kind::forward_bias || p.kind == gemm_kind::forward_bias_gelu;
  GRAPHSTEP_EXPECTS(!needs_bias || o.bias, what + ": the bias operand is required");
  bool const needs_pre =
      p.kind == gemm_kind::forward_bias_gelu || p.kind == gemm_kind::backward_data_gelu;
  GRAPHSTEP_EXPECTS(!needs_pre || o.pre_activation,
                    what + ": the pre-activation operand (saved by the forward) is required");
  bool const needs_grad =
      p.kind == gemm_kind::backward_data_gelu || p.kind == gemm_kind::backward_weight_bias;
  GRAPHSTEP_EXPECTS(!needs_grad || o.bias_gradient, what + ": the bias-gradient operand is required");
}

}  // namespace

struct detail::lt_state {
  cublasLtHandle_t handle{};
  gemm_problem problem;
  gemm_operands operands;
  gemm_options options;
  lt_call call;
  bool fused{true};
  std::string unfused_reason;
  void* workspace{};
  std::size_t workspace_bytes{};
  matmul_desc desc;
  matrix_layout a, b, d;
  cublasLtMatmulAlgo_t algorithm{};
  // The GEMM's operands as cuBLASLt sees them (column-major A, B).
  void const* a_ptr{};
  void const* b_ptr{};

  void enqueue_gemm(stream_view stream) const {
    float const alpha = 1.0F;
    float const beta = 0.0F;
    GRAPHSTEP_CUBLAS_TRY(cublasLtMatmul(handle, desc.get(), &alpha, a_ptr, a.get(), b_ptr, b.get(),
                                        &beta, operands.out, d.get(), operands.out, d.get(),
                                        &algorithm, workspace, workspace_bytes, stream.value()));
  }

  void enqueue(stream_view stream) const {
    enqueue_gemm(stream);
    if (fused) return;
    // The unfused path: the plain GEMM above, then the epilogue as kernels.
    gemm_problem const& p = problem;
    switch (p.kind) {
      case gemm_kind::forward_bias:
      case gemm_kind::forward_bias_gelu:
        launch_bias_gelu(operands.out, operands.pre_activation, operands.bias, p.m, p.n, p.type,
                         p.kind == gemm_kind::forward_bias_gelu, options.form, stream);
        break;
      case gemm_kind::backward_data_gelu:
        launch_gelu_backward(operands.out, operands.out, operands.pre_activation, p.m, p.k,
                             p.type, options.form, stream);
        launch_bias_gradient(operands.bias_gradient, operands.out, p.m, p.k, p.type, stream);
        break;
      case gemm_kind::backward_weight_bias:
        launch_bias_gradient(operands.bias_gradient, operands.lhs, p.m, p.n, p.type, stream);
        break;
      default: break;
    }
  }
};

support gemm_plan::can_implement(gemm_problem const& problem, gemm_operands const& o) {
  auto const address = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p); };
  // cuBLASLt's A is the row-major rhs and its B the lhs, for every kind (map_to_cublaslt).
  bool const gradient_epilogue = problem.kind == gemm_kind::backward_data_gelu ||
                                 problem.kind == gemm_kind::backward_weight_bias;
  operand_addresses at;
  at.a = address(o.rhs);
  at.b = address(o.lhs);
  at.d = address(o.out);
  at.bias = address(gradient_epilogue ? o.bias_gradient : o.bias);
  at.aux = address(o.pre_activation);
  return can_fuse(problem, at);
}

std::size_t gemm_plan::workspace_size() {
  int device = 0;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&device));
  int major = 0;
  GRAPHSTEP_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9 ? std::size_t{32} << 20 : std::size_t{4} << 20;
}

gemm_plan::gemm_plan(cublaslt_handle const& handle, gemm_problem const& problem,
                     gemm_operands const& operands, void* workspace, std::size_t workspace_bytes,
                     gemm_options const& options, stream_view stream)
    : state_{std::make_unique<detail::lt_state>()} {
  auto& s = *state_;
  std::string const what = std::string{"gemm "} + name(problem.kind);
  check_operands(problem, operands);
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    what + ": plans are made before the capture (choosing an algorithm cannot "
                           "be captured); make the plan first, then capture run()");
  GRAPHSTEP_EXPECTS(workspace_bytes == 0 || reinterpret_cast<std::uintptr_t>(workspace) % 256 == 0,
                    what + ": the workspace must be 256-byte aligned (take it from the pool)");
  GRAPHSTEP_EXPECTS(options.autotune_candidates >= 1, what + ": autotune_candidates must be >= 1");
  s.handle = handle.get();
  s.problem = problem;
  s.operands = operands;
  s.options = options;
  s.workspace = workspace;
  s.workspace_bytes = workspace_bytes;
  s.call = map_to_cublaslt(problem);

  support const fusable = can_implement(problem, operands);
  bool const has_epilogue = s.call.ep != epilogue::none;
  if (has_epilogue && (options.force_unfused || options.form == gelu_form::erf || !fusable.fused)) {
    std::string reason = options.force_unfused ? "the unfused path was requested"
                         : options.form == gelu_form::erf
                             ? "cuBLASLt's GELU epilogue is the tanh form; the erf form runs as "
                               "separate kernels"
                             : fusable.reason;
    GRAPHSTEP_EXPECTS(options.allow_unfused || options.force_unfused ||
                          options.form == gelu_form::erf,
                      reason);
    s.fused = false;
    s.unfused_reason = std::move(reason);
  }
  lt_call const& c = s.call;
  // Column-major A and B (see map_to_cublaslt): forward A = W (rhs), B = X (lhs);
  // backward_data A = W (rhs), B = dY (lhs); backward_weight A = X (rhs), B = dY (lhs).
  s.a_ptr = operands.rhs;
  s.b_ptr = operands.lhs;

  cudaDataType_t const type = data_type(problem.type);
  cublasLtMatmulDesc_t desc = nullptr;
  GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescCreate(&desc, compute_type(problem.type), CUDA_R_32F));
  s.desc.reset(desc);
  cublasOperation_t const ta = c.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t const tb = c.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                      sizeof ta));
  GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                      sizeof tb));
  if (s.fused && has_epilogue) {
    cublasLtEpilogue_t const ep = to_cublaslt(c.ep);
    GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep,
                                                        sizeof ep));
    void const* bias = c.ep == epilogue::dgelu_bgrad || c.ep == epilogue::bgradb
                           ? operands.bias_gradient
                           : operands.bias;
    GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                        &bias, sizeof bias));
    if (c.ep == epilogue::gelu_aux_bias || c.ep == epilogue::dgelu_bgrad) {
      GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &operands.pre_activation,
          sizeof operands.pre_activation));
      std::int64_t const aux_ld = c.aux_ld;
      GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    }
  }
  auto layout = [&](std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    cublasLtMatrixLayout_t l = nullptr;
    GRAPHSTEP_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&l, type, static_cast<std::uint64_t>(rows),
                                                    static_cast<std::uint64_t>(cols), ld));
    return matrix_layout{l};
  };
  s.a = c.transpose_a ? layout(c.k, c.m, c.lda) : layout(c.m, c.k, c.lda);
  s.b = c.transpose_b ? layout(c.n, c.k, c.ldb) : layout(c.k, c.n, c.ldb);
  s.d = layout(c.m, c.n, c.ldc);

  std::uint32_t const align_a = alignment_of(s.a_ptr);
  std::uint32_t const align_b = alignment_of(s.b_ptr);
  std::uint32_t const align_d = alignment_of(operands.out);
  algorithm_key const key{static_cast<int>(problem.kind) * 2 + (s.fused ? 1 : 0), problem.m,
                          problem.n, problem.k, static_cast<int>(problem.type),
                          options.autotune_candidates, align_a, align_b, align_d,
                          workspace_bytes};
  {
    std::lock_guard const lock{algorithm_mutex};
    if (auto found = algorithm_cache().find(key); found != algorithm_cache().end()) {
      s.algorithm = found->second;
      s.enqueue(stream);
      return;
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
  matmul_preference const owned_pref{pref};
  std::uint64_t const ws = workspace_bytes;
  GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // The heuristic must know the real alignments, or it may pick a kernel that faults.
  for (auto [attribute, value] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}}) {
    GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value,
                                                              sizeof value));
  }
  int const wanted = std::max(1, options.autotune_candidates);
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(wanted));
  int found = 0;
  GRAPHSTEP_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(s.handle, desc, s.a.get(), s.b.get(),
                                                      s.d.get(), s.d.get(), pref, wanted,
                                                      results.data(), &found));
  GRAPHSTEP_EXPECTS(found > 0, what + " (" + name(problem.type) + ", M=" +
                                   std::to_string(problem.m) + " N=" + std::to_string(problem.n) +
                                   " K=" + std::to_string(problem.k) +
                                   "): cuBLASLt has no algorithm for it with " +
                                   std::to_string(workspace_bytes) +
                                   " bytes of workspace; give it more workspace, or use "
                                   "allow_unfused");
  s.algorithm = results[0].algo;
  if (found > 1) {
    // Autotune: time each candidate after a warm-up run; keep the fastest.
    timed_event start;
    timed_event stop;
    float best = std::numeric_limits<float>::max();
    for (int i = 0; i < found; ++i) {
      s.algorithm = results[static_cast<std::size_t>(i)].algo;
      s.enqueue_gemm(stream);
      start.record(stream);
      for (int r = 0; r < 3; ++r) s.enqueue_gemm(stream);
      stop.record(stream);
      stop.synchronize();
      float const ms = timed_event::elapsed_ms(start, stop);
      if (ms < best) {
        best = ms;
        results[0].algo = results[static_cast<std::size_t>(i)].algo;
      }
    }
    s.algorithm = results[0].algo;
  }
  {
    std::lock_guard const lock{algorithm_mutex};
    algorithm_cache().emplace(key, s.algorithm);
  }
  s.enqueue(stream);  // one eager run before any capture
}

gemm_plan::~gemm_plan() = default;
gemm_plan::gemm_plan(gemm_plan&&) noexcept = default;
gemm_plan& gemm_plan::operator=(gemm_plan&&) noexcept = default;

void gemm_plan::run(stream_view stream) const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "gemm_plan: this plan was moved from");
  state_->enqueue(stream);
}

bool gemm_plan::fused() const noexcept { return state_ && state_->fused; }
std::string const& gemm_plan::unfused_reason() const noexcept { return state_->unfused_reason; }
gemm_problem const& gemm_plan::problem() const noexcept { return state_->problem; }

}  // namespace graphstep::ops
