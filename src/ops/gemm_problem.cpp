// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <initializer_list>
#include <limits>
#include <string>
#include <tuple>

namespace graphstep::ops {

namespace {

// The refusal of tf32 math on 16-bit data, shared by element_type_for and map_to_cublaslt.
std::string tf32_refusal(std::string const& combination) {
  return "gemm: " + combination +
         " is not supported: tf32 math applies to float32 data only; drop tf32 for 16-bit data "
         "(it already runs on tensor cores)";
}

}  // namespace

char const* name(gemm_math math) noexcept {
  switch (math) {
    case gemm_math::standard: return "standard";
    case gemm_math::tf32: return "tf32";
  }
  return "unknown";
}

std::string describe(gemm_problem const& problem) {
  std::string text = std::string{"gemm "} + name(problem.kind) + " (" + name(problem.type);
  if (problem.math != gemm_math::standard)
    text += std::string{" with "} + name(problem.math) + " math";
  return text + ", M=" + std::to_string(problem.m) + " N=" + std::to_string(problem.n) +
         " K=" + std::to_string(problem.k) + ")";
}

char const* name(gemm_kind kind) noexcept {
  switch (kind) {
    case gemm_kind::forward: return "forward";
    case gemm_kind::forward_bias: return "forward_bias";
    case gemm_kind::forward_gelu: return "forward_gelu";
    case gemm_kind::forward_bias_gelu: return "forward_bias_gelu";
    case gemm_kind::backward_data: return "backward_data";
    case gemm_kind::backward_data_dgelu: return "backward_data_dgelu";
    case gemm_kind::backward_data_gelu: return "backward_data_gelu";
    case gemm_kind::backward_weight: return "backward_weight";
    case gemm_kind::backward_weight_bias: return "backward_weight_bias";
  }
  return "unknown";
}

char const* name(epilogue ep) noexcept {
  switch (ep) {
    case epilogue::none: return "DEFAULT";
    case epilogue::bias: return "BIAS";
    case epilogue::gelu_aux: return "GELU_AUX";
    case epilogue::gelu_aux_bias: return "GELU_AUX_BIAS";
    case epilogue::dgelu: return "DGELU";
    case epilogue::dgelu_bgrad: return "DGELU_BGRAD";
    case epilogue::bgradb: return "BGRADB";
  }
  return "unknown";
}

bool uses_gelu(gemm_kind kind) noexcept {
  return kind == gemm_kind::forward_gelu || kind == gemm_kind::forward_bias_gelu ||
         kind == gemm_kind::backward_data_dgelu || kind == gemm_kind::backward_data_gelu;
}

dtype element_type_for(dtype inputs, dtype output, gemm_math math) {
  bool const tf32 = math == gemm_math::tf32;
  std::string const combination = std::string{"inputs "} + name(inputs) + ", output " +
                                  name(output) + (tf32 ? ", tf32 math" : "");
  GRAPHSTEP_EXPECTS(inputs == output,
                    "gemm: " + combination +
                        " is not supported: the layer keeps inputs, output, "
                        "bias and pre-activation in one type (fp32, fp16 or bf16, accumulating in "
                        "fp32); convert the output, or store everything in one type");
  GRAPHSTEP_EXPECTS(!tf32 || inputs == dtype::float32, tf32_refusal(combination));
  graphstep::detail::expect_floating("gemm: " + combination, inputs);
  return inputs;
}

double flops(gemm_problem const& p) noexcept {
  return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
}

lt_call map_to_cublaslt(gemm_problem const& p) {
  GRAPHSTEP_EXPECTS(p.m > 0 && p.n > 0 && p.k > 0,
                    std::string{"gemm "} + name(p.kind) +
                        ": sizes must be positive (M=" + std::to_string(p.m) +
                        ", N=" + std::to_string(p.n) + ", K=" + std::to_string(p.k) + ")");
  constexpr std::int64_t limit = std::numeric_limits<std::int32_t>::max();
  GRAPHSTEP_EXPECTS(p.m <= limit && p.n <= limit && p.k <= limit,
                    std::string{"gemm "} + name(p.kind) + ": a dimension exceeds 2^31 - 1 (M=" +
                        std::to_string(p.m) + ", N=" + std::to_string(p.n) +
                        ", K=" + std::to_string(p.k) + "); split the GEMM");
  GRAPHSTEP_EXPECTS(
      p.math != gemm_math::tf32 || p.type == dtype::float32,
      tf32_refusal(std::string{name(p.kind)} + " on " + name(p.type) + " data with tf32 math"));
  graphstep::detail::expect_floating(std::string{"gemm "} + name(p.kind) + ": type", p.type);
  lt_call c;
  switch (p.kind) {
    case gemm_kind::forward:
    case gemm_kind::forward_bias:
    case gemm_kind::forward_gelu:
    case gemm_kind::forward_bias_gelu:
      // Yᵀ[N,M] = W[N,K] · Xᵀ[K,M]: row-major W[N,K] is column-major Wᵀ (K×N, ld K), so A is
      // W with transa = T; row-major X[M,K] is column-major Xᵀ (K×M, ld K), B as it is.
      c = {true, false, p.n, p.m, p.k, p.k, p.k, p.n};
      c.a_operand = "W";
      c.b_operand = "X";
      if (p.kind == gemm_kind::forward_bias) c.ep = epilogue::bias;
      if (p.kind == gemm_kind::forward_gelu) c.ep = epilogue::gelu_aux;
      if (p.kind == gemm_kind::forward_bias_gelu) c.ep = epilogue::gelu_aux_bias;
      if (p.kind == gemm_kind::forward_bias || p.kind == gemm_kind::forward_bias_gelu) {
        c.bias_length = p.n;  // rows of D
      }
      if (p.kind == gemm_kind::forward_gelu || p.kind == gemm_kind::forward_bias_gelu) {
        c.aux_ld = p.n;  // Z has D's layout
      }
      break;
    case gemm_kind::backward_data:
    case gemm_kind::backward_data_dgelu:
    case gemm_kind::backward_data_gelu:
      // dXᵀ[K,M] = Wᵀ[K,N] · dYᵀ[N,M]: row-major W[N,K] is column-major Wᵀ (K×N, ld K) and
      // row-major dY[M,N] is column-major dYᵀ (N×M, ld N), both as the product needs them.
      c = {false, false, p.k, p.m, p.n, p.k, p.n, p.k};
      c.a_operand = "W";
      c.b_operand = "dY";
      if (p.kind == gemm_kind::backward_data_dgelu) {
        c.ep = epilogue::dgelu;
        c.aux_ld = p.k;
      }
      if (p.kind == gemm_kind::backward_data_gelu) {
        c.ep = epilogue::dgelu_bgrad;
        c.aux_ld = p.k;
        c.bias_length = p.k;  // rows of D
      }
      break;
    case gemm_kind::backward_weight:
    case gemm_kind::backward_weight_bias:
      // dWᵀ[K,N] = Xᵀ[K,M] · dY[M,N]: X as stored (column-major Xᵀ, ld K); dY is stored as
      // column-major dYᵀ (N×M, ld N), so B is dY with transb = T.
      c = {false, true, p.k, p.n, p.m, p.k, p.n, p.k};
      c.a_operand = "X";
      c.b_operand = "dY";
      if (p.kind == gemm_kind::backward_weight_bias) {
        c.ep = epilogue::bgradb;
        c.bias_length = p.n;  // columns of D, reduced over the GEMM's k (the batch)
      }
      break;
  }
  return c;
}

support can_fuse(gemm_problem const& problem, operand_addresses const& addresses) {
  lt_call const c = map_to_cublaslt(problem);
  if (c.ep == epilogue::none) return {};
  std::string const what = describe(problem) + " with epilogue " + name(c.ep);
  if (c.aux_ld != 0) {
    if (c.aux_ld % 8 != 0 || c.aux_ld < c.m) {
      return {false, what + ": the GELU epilogue's pre-activation has a leading dimension of " +
                         std::to_string(c.aux_ld) +
                         " elements, which cuBLASLt requires to be "
                         "a multiple of 8 and at least " +
                         std::to_string(c.m) +
                         " (the rows of D): use a layer width that is a multiple of 8, or set "
                         "gemm_options::allow_unfused to take the unfused fallback"};
    }
  }
  std::size_t const bytes = size_in_bytes(problem.type);
  struct named_ld {
    char const* what;
    std::int64_t ld;
  };
  for (named_ld const& ld : {named_ld{c.a_operand, c.lda}, named_ld{c.b_operand, c.ldb},
                             named_ld{"the output", c.ldc}}) {
    if ((static_cast<std::size_t>(ld.ld) * bytes) % 16 != 0) {
      return {false, what + ": " + ld.what + " has a leading dimension of " +
                         std::to_string(ld.ld) + " " + name(problem.type) + " elements (" +
                         std::to_string(static_cast<std::size_t>(ld.ld) * bytes) +
                         " bytes), not a multiple of 16 bytes, which the fused epilogue kernels "
                         "need: pad that dimension to a multiple of " +
                         std::to_string(16 / bytes) +
                         ", or set gemm_options::allow_unfused to take the unfused fallback"};
    }
  }
  struct named_address {
    char const* what;
    std::uintptr_t address;
  };
  bool const has_bias = c.bias_length != 0;
  bool const has_aux = c.aux_ld != 0;
  for (named_address const& operand :
       {named_address{c.a_operand, addresses.a}, named_address{c.b_operand, addresses.b},
        named_address{"the output", addresses.d},
        named_address{c.ep == epilogue::dgelu_bgrad || c.ep == epilogue::bgradb
                          ? "the bias gradient"
                          : "the bias",
                      has_bias ? addresses.bias : 0},
        named_address{"the pre-activation", has_aux ? addresses.aux : 0}}) {
    if (operand.address % 16 != 0) {
      return {false,
              what + ": " + operand.what + " at address " + std::to_string(operand.address) +
                  " is " + std::to_string(operand.address % 16) +
                  " bytes past a 16-byte boundary; allocate it from graphstep::memory::memory_pool "
                  "(256-byte aligned) or offset it by a multiple of 16 bytes, or set "
                  "gemm_options::allow_unfused to take the unfused fallback"};
    }
  }
  return {};
}

path_decision path_without_algorithm(gemm_problem const& problem, path_decision const& current,
                                     gemm_options const& options, std::size_t workspace_bytes,
                                     std::string const& what) {
  std::string const workspace = std::to_string(workspace_bytes) + " bytes of workspace";
  GRAPHSTEP_EXPECTS(current.fused && current.gemm_epilogue != epilogue::none,
                    what + ": cuBLASLt has no algorithm for it with " + workspace +
                        "; give it more workspace (gemm::workspace_size)");
  std::string const reason = what + ": cuBLASLt offers no algorithm for the " +
                             name(current.gemm_epilogue) + " epilogue with these operands and " +
                             workspace;
  GRAPHSTEP_EXPECTS(options.allow_unfused,
                    reason +
                        "; set gemm_options::allow_unfused to take the unfused fallback, "
                        "or give it more workspace");
  return unfused_path(problem, reason);
}

path_decision unfused_path(gemm_problem const& p, std::string reason) {
  path_decision d;
  d.fused = false;
  d.reason = std::move(reason);
  d.gemm_epilogue = epilogue::none;
  switch (p.kind) {
    case gemm_kind::forward_bias: d.kernels = {unfused_kernel::bias}; break;
    case gemm_kind::forward_gelu: d.kernels = {unfused_kernel::gelu}; break;
    case gemm_kind::forward_bias_gelu: d.kernels = {unfused_kernel::bias_gelu}; break;
    case gemm_kind::backward_data_dgelu: d.kernels = {unfused_kernel::gelu_backward}; break;
    case gemm_kind::backward_data_gelu:
      d.kernels = {unfused_kernel::gelu_backward, unfused_kernel::bias_gradient_of_out};
      break;
    case gemm_kind::backward_weight_bias: d.kernels = {unfused_kernel::bias_gradient_of_lhs}; break;
    case gemm_kind::forward:
    case gemm_kind::backward_data:
    case gemm_kind::backward_weight: break;
  }
  return d;
}

path_decision decide_path(gemm_problem const& p, operand_addresses const& addresses,
                          gemm_options const& options) {
  lt_call const c = map_to_cublaslt(p);
  GRAPHSTEP_EXPECTS(options.autotune_candidates >= 1, std::string{"gemm "} + name(p.kind) +
                                                          ": autotune_candidates must be >= 1 "
                                                          "(1 keeps cuBLASLt's first choice)");
  path_decision fused;
  fused.gemm_epilogue = c.ep;
  if (c.ep == epilogue::none) return fused;  // nothing to fuse: the plain GEMM is the whole op
  if (options.force_unfused) return unfused_path(p, "the unfused path was requested");
  if (options.form == gelu_form::erf && uses_gelu(p.kind)) {
    return unfused_path(p,
                        "cuBLASLt's GELU epilogue is the tanh form; the erf form runs as "
                        "separate kernels");
  }
  support const s = can_fuse(p, addresses);
  if (s.fused) return fused;
  GRAPHSTEP_EXPECTS(options.allow_unfused, s.reason);
  return unfused_path(p, s.reason);
}

std::uint32_t alignment_of(std::uintptr_t address) noexcept {
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

namespace {
auto tied(algorithm_key const& key) noexcept {
  return std::tie(key.device, key.kind, key.gemm_epilogue, key.m, key.n, key.k, key.type, key.math,
                  key.autotune_candidates, key.align_a, key.align_b, key.align_d, key.align_bias,
                  key.align_aux, key.workspace_bytes);
}
}  // namespace

bool operator<(algorithm_key const& lhs, algorithm_key const& rhs) noexcept {
  return tied(lhs) < tied(rhs);
}
bool operator==(algorithm_key const& lhs, algorithm_key const& rhs) noexcept {
  return tied(lhs) == tied(rhs);
}

algorithm_key algorithm_key_for(int device, gemm_problem const& problem, path_decision const& path,
                                operand_addresses const& addresses, int autotune_candidates,
                                std::size_t workspace_bytes) {
  lt_call const c = map_to_cublaslt(problem);
  // The epilogue's pointers count only when the GEMM itself uses them (the fused path).
  bool const uses_bias = path.gemm_epilogue != epilogue::none && c.bias_length != 0;
  bool const uses_aux = path.gemm_epilogue != epilogue::none && c.aux_ld != 0;
  algorithm_key key;
  key.device = device;
  key.kind = problem.kind;
  key.gemm_epilogue = path.gemm_epilogue;
  key.m = problem.m;
  key.n = problem.n;
  key.k = problem.k;
  key.type = problem.type;
  key.math = problem.math;
  key.autotune_candidates = autotune_candidates;
  key.align_a = alignment_of(addresses.a);
  key.align_b = alignment_of(addresses.b);
  key.align_d = alignment_of(addresses.d);
  key.align_bias = uses_bias ? alignment_of(addresses.bias) : 0;
  key.align_aux = uses_aux ? alignment_of(addresses.aux) : 0;
  key.workspace_bytes = workspace_bytes;
  return key;
}

}  // namespace graphstep::ops
