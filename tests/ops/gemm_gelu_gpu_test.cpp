// The fused Linear + bias + GELU layer on the GPU against the fp64 reference of
// ops/reference.hpp (GELU in the tanh form unless a test names the erf form): every element type
// and math mode,
// many shapes with odd and non-multiple-of-8 sizes (which take the unfused path or fail
// clearly), outputs poisoned with NaN before each run, fused against unfused, capture and
// replay against eager, and one kernel node for the captured fused forward. Capture uses the
// plain CUDA calls so that this test depends only on the op itself.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/gelu.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/ops/reference.hpp>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/captured_graph.hpp"
#include "common/gemm_numerics.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace ref = graphstep::ops::reference;

static_assert(std::is_nothrow_move_constructible_v<go::cublaslt_handle>);
static_assert(!std::is_copy_constructible_v<go::cublaslt_handle>);
static_assert(std::is_nothrow_move_constructible_v<go::gemm>);
static_assert(!std::is_copy_constructible_v<go::gemm>);

namespace {

// --- host conversions to the 16-bit storage types (round to nearest even) ---------------------

std::uint32_t bits_of(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(std::uint32_t u) {
  float f = 0.0F;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t to_bf16(float f) {
  std::uint32_t const u = bits_of(f);
  if (std::isnan(f)) return 0x7FC0;
  return static_cast<std::uint16_t>((u + 0x7FFFU + ((u >> 16) & 1U)) >> 16);
}
float from_bf16(std::uint16_t h) {
  return float_of(std::uint32_t{h} << 16);
}

std::uint16_t to_fp16(float f) {
  std::uint32_t const x = bits_of(f);
  std::uint32_t const sign = (x >> 16) & 0x8000U;
  std::uint32_t const exponent = (x >> 23) & 0xFFU;
  std::uint32_t mantissa = x & 0x7FFFFFU;
  if (exponent == 0xFF)
    return static_cast<std::uint16_t>(sign | 0x7C00U | (mantissa ? 0x200U : 0U));
  int const e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7C00U);
  if (e <= 0) {  // subnormal half
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mantissa |= 0x800000U;
    auto const shift = static_cast<std::uint32_t>(14 - e);
    std::uint32_t half = mantissa >> shift;
    std::uint32_t const rest = mantissa & ((1U << shift) - 1U);
    std::uint32_t const halfway = 1U << (shift - 1U);
    if (rest > halfway || (rest == halfway && (half & 1U) != 0U)) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = sign | (static_cast<std::uint32_t>(e) << 10) | (mantissa >> 13);
  std::uint32_t const rest = mantissa & 0x1FFFU;
  if (rest > 0x1000U || (rest == 0x1000U && (half & 1U) != 0U)) ++half;  // may carry: correct
  return static_cast<std::uint16_t>(half);
}
float from_fp16(std::uint16_t h) {
  std::uint32_t const sign = (std::uint32_t{h} & 0x8000U) << 16;
  std::uint32_t const exponent = (h >> 10) & 0x1FU;
  std::uint32_t const mantissa = h & 0x3FFU;
  if (exponent == 0) {
    float const magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return float_of(sign | 0x7F800000U | (mantissa << 13));
  return float_of(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

// Bounds from the arithmetic of a real GPU (tests/common/gemm_numerics.hpp): `through_gelu` when
// the result passed through cuBLASLt's GELU or GELU′ epilogue.
double bound(gs::testing::gemm_numerics numerics, bool through_gelu = false) {
  return gs::testing::tolerance(numerics, through_gelu);
}
// Two GPU results against each other (fused against unfused): each carries its own error.
double bound_between(gs::testing::gemm_numerics numerics, bool through_gelu = false) {
  return gs::testing::tolerance(numerics, through_gelu) + gs::testing::tolerance(numerics, false);
}

// Device memory of one element type, `offset_bytes` past a 256-byte boundary (to test alignment).
// Values are rounded to the storage type on upload, so the reference sees exactly what the GPU
// sees.
class device_matrix {
 public:
  device_matrix(gs::dtype type, std::size_t elements, std::size_t offset_bytes = 0)
      : type_{type}, elements_{elements} {
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&base_, bytes() + offset_bytes + 256));
    data_ = static_cast<unsigned char*>(base_) + offset_bytes;
    poison();
  }
  ~device_matrix() { GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(base_)); }
  device_matrix(device_matrix const&) = delete;
  device_matrix& operator=(device_matrix const&) = delete;

  [[nodiscard]] void* get() const { return data_; }
  [[nodiscard]] gs::device_span span() const { return {data_, type_, elements_}; }
  [[nodiscard]] std::size_t bytes() const { return elements_ * gs::size_in_bytes(type_); }
  // All bits set: NaN in fp32, fp16 and bf16, so an element the GPU never wrote shows up.
  // cudaMemset and a pageable cudaMemcpy run on the legacy stream, unordered with the
  // non-blocking stream of the test: wait for them before anything else touches the data.
  void poison() {
    GRAPHSTEP_CUDA_TRY(cudaMemset(data_, 0xFF, bytes()));
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  }

  std::vector<double> upload(std::vector<double> values) {
    std::vector<unsigned char> raw(bytes());
    for (std::size_t i = 0; i < elements_; ++i) {
      auto const f = static_cast<float>(values[i]);
      if (type_ != gs::dtype::float32) {
        std::uint16_t const h = type_ == gs::dtype::float16 ? to_fp16(f) : to_bf16(f);
        values[i] = type_ == gs::dtype::float16 ? from_fp16(h) : from_bf16(h);
        std::memcpy(&raw[i * 2], &h, 2);
      } else {
        values[i] = f;
        std::memcpy(&raw[i * 4], &f, 4);
      }
    }
    graphstep::testing::copy_to_device(data_, raw.data(), raw.size());
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    return values;
  }

  [[nodiscard]] std::vector<double> download() const {
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    std::vector<unsigned char> raw(bytes());
    GRAPHSTEP_CUDA_TRY(cudaMemcpy(raw.data(), data_, raw.size(), cudaMemcpyDeviceToHost));
    std::vector<double> values(elements_);
    for (std::size_t i = 0; i < elements_; ++i) {
      if (type_ != gs::dtype::float32) {
        std::uint16_t h = 0;
        std::memcpy(&h, &raw[i * 2], 2);
        values[i] = type_ == gs::dtype::float16 ? from_fp16(h) : from_bf16(h);
      } else {
        float f = 0.0F;
        std::memcpy(&f, &raw[i * 4], 4);
        values[i] = f;
      }
    }
    return values;
  }

 private:
  gs::dtype type_;
  std::size_t elements_;
  void* base_{};
  void* data_{};
};

std::vector<double> random(std::size_t n, std::mt19937& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> dist{-scale, scale};
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

bool has_nan(std::vector<double> const& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

// Relative error, or infinity when the output kept a poisoned element.
double error_of(std::vector<double> const& got, std::vector<double> const& want) {
  if (has_nan(got)) return std::numeric_limits<double>::infinity();
  return ref::relative_error(got, want);
}

// The nodes of a graph by type.
struct node_counts {
  std::size_t kernels{};
  std::size_t memsets{};
  std::size_t others{};  ///< host, memcpy, event, child graph, ...
  [[nodiscard]] std::size_t total() const { return kernels + memsets + others; }
};
node_counts count_nodes(cudaGraph_t graph) {
  std::size_t count = 0;
  GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  GRAPHSTEP_CUDA_TRY(cudaGraphGetNodes(graph, nodes.data(), &count));
  node_counts counts;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    GRAPHSTEP_CUDA_TRY(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) {
      ++counts.kernels;
    } else if (type == cudaGraphNodeTypeMemset) {
      ++counts.memsets;
    } else {
      ++counts.others;
    }
  }
  return counts;
}

using gs::testing::captured_graph;

class linear_gelu_gpu : public gs::testing::gpu_test,
                        public ::testing::WithParamInterface<gs::testing::gemm_numerics> {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
    handle_.emplace();
    workspace_bytes_ = go::gemm::workspace_size();
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&workspace_, workspace_bytes_));
  }
  void TearDown() override {
    if (workspace_ != nullptr) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(workspace_));
  }
  [[nodiscard]] go::gemm make_gemm(go::gemm_problem const& p, go::gemm_operands const& o,
                                   go::gemm_options const& options = {}) const {
    return go::gemm{*handle_, p, o, workspace_, workspace_bytes_, options, *stream_};
  }
  static go::gemm_options fallback() {
    go::gemm_options o;
    o.allow_unfused = true;
    return o;
  }
  [[nodiscard]] cudaStream_t raw() const { return stream_->get(); }
  void sync() const { stream_->synchronize(); }

  std::optional<gs::cuda::stream> stream_;
  std::optional<go::cublaslt_handle> handle_;
  void* workspace_{};
  std::size_t workspace_bytes_{};
};

// Shapes with odd M, K, N and sizes that are not multiples of 8, beside aligned ones.
std::vector<std::tuple<int, int, int>> const forward_shapes{
    {64, 128, 256}, {256, 384, 320}, {33, 64, 72},   {17, 40, 24}, {31, 13, 19},
    {1, 8, 8},      {7, 24, 1001},   {129, 136, 96}, {5, 100, 64}};

}  // namespace

// Runs without a GPU: the test's own conversions, on values worked out by hand.
TEST(linear_gelu_host_conversions, known_bit_patterns) {
  EXPECT_EQ(to_fp16(1.0F), 0x3C00);
  EXPECT_EQ(to_fp16(-2.0F), 0xC000);
  EXPECT_EQ(to_fp16(65504.0F), 0x7BFF);               // largest finite half
  EXPECT_EQ(to_fp16(1.0F / 3.0F), 0x3555);            // 0.333251953125
  EXPECT_EQ(to_fp16(std::ldexp(1.0F, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(to_bf16(1.0F), 0x3F80);
  EXPECT_EQ(to_bf16(3.14159265F), 0x4049);                  // 3.140625
  EXPECT_EQ(to_bf16(1.0F + std::ldexp(1.0F, -8)), 0x3F80);  // a tie rounds to even
  for (float f : {0.0F, 1.5F, -0.375F, 1000.0F, 6.1035156e-05F}) {
    EXPECT_EQ(from_fp16(to_fp16(f)), f);
    EXPECT_EQ(from_bf16(to_bf16(f)), f);
  }
  EXPECT_FLOAT_EQ(from_fp16(0x3555), 0.333251953125F);
}

TEST_P(linear_gelu_gpu, forward_kinds_match_the_reference_on_many_shapes) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{21};
  for (auto [m, n, k] : forward_shapes) {
    std::size_t const M = m, N = n, K = k;
    device_matrix x{type, M * K}, w{type, N * K}, b{type, N}, y{type, M * N}, z{type, M * N};
    auto const hx = x.upload(random(M * K, rng));
    auto const hw = w.upload(random(N * K, rng, 1.0 / std::sqrt(double(K))));
    auto const hb = b.upload(random(N, rng));
    auto const plain = ref::matmul_abt(hx, hw, M, N, K);
    for (auto kind : {go::gemm_kind::forward, go::gemm_kind::forward_bias,
                      go::gemm_kind::forward_gelu, go::gemm_kind::forward_bias_gelu}) {
      std::string const what = std::string{go::name(kind)} + " " +
                               gs::testing::short_name(GetParam()) + " " + std::to_string(m) + "x" +
                               std::to_string(n) + "x" + std::to_string(k);
      bool const biased =
          kind == go::gemm_kind::forward_bias || kind == go::gemm_kind::forward_bias_gelu;
      go::gemm_problem const problem{kind, m, n, k, type, math};
      go::gemm_operands const operands{x.span(),
                                       w.span(),
                                       y.span(),
                                       biased ? b.span() : gs::device_span{},
                                       go::uses_gelu(kind) ? z.span() : gs::device_span{},
                                       gs::device_span{}};
      bool const fusable = go::gemm::can_implement(problem, operands).fused;
      if (!fusable) {
        EXPECT_THROW(static_cast<void>(make_gemm(problem, operands)), gs::usage_error) << what;
      }
      y.poison();
      z.poison();
      auto const p = make_gemm(problem, operands, fallback());
      EXPECT_EQ(p.fused(), fusable) << what;
      EXPECT_EQ(p.unfused_reason().empty(), fusable) << what;
      auto pre = plain;
      if (biased) {
        for (std::size_t i = 0; i < M * N; ++i) pre[i] += hb[i % N];
      }
      std::vector<double> want = pre;
      if (go::uses_gelu(kind)) {
        for (auto& v : want) v = ref::gelu(v, go::gelu_form::tanh);
        EXPECT_LT(error_of(z.download(), pre), bound(GetParam())) << what << " pre-activation";
      }
      EXPECT_LT(error_of(y.download(), want), bound(GetParam(), go::uses_gelu(kind))) << what;
      // run() again gives the same result as the constructor's eager run.
      auto const first = y.download();
      y.poison();
      p.run(*stream_);
      EXPECT_EQ(y.download(), first) << what;
    }
  }
}

TEST_P(linear_gelu_gpu, mlp_backward_matches_the_reference) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{22};
  // X[M,K] -> fc1 (N1) -> GELU -> fc2 (N2). Odd and non-multiple-of-8 shapes fall back.
  for (auto [m, k, n1, n2] :
       {std::tuple{96, 64, 128, 32}, std::tuple{33, 40, 72, 24}, std::tuple{17, 19, 36, 13}}) {
    std::size_t const M = m, K = k, N1 = n1, N2 = n2;
    std::string const what = std::string{gs::testing::short_name(GetParam())} +
                             " M=" + std::to_string(m) + " K=" + std::to_string(k) +
                             " N1=" + std::to_string(n1) + " N2=" + std::to_string(n2);
    device_matrix z1{type, M * N1}, w2{type, N2 * N1}, dy2{type, M * N2}, y1{type, M * N1};
    device_matrix x{type, M * K}, w1{type, N1 * K}, dz1{type, M * N1}, db1{type, N1};
    device_matrix dw2{type, N2 * N1}, db2{type, N2}, dw1{type, N1 * K}, dx{type, M * K};
    device_matrix dz1_nobias{type, M * N1};
    auto const hz1 = z1.upload(random(M * N1, rng, 2.0));
    auto const hw2 = w2.upload(random(N2 * N1, rng, 0.2));
    auto const hdy2 = dy2.upload(random(M * N2, rng));
    std::vector<double> gelu_z1(M * N1);
    for (std::size_t i = 0; i < M * N1; ++i) gelu_z1[i] = ref::gelu(hz1[i], go::gelu_form::tanh);
    auto const hy1 = y1.upload(gelu_z1);
    auto const hx = x.upload(random(M * K, rng));
    auto const hw1 = w1.upload(random(N1 * K, rng, 0.2));
    // fc2: dW2 and db2 in one GEMM (BGRADB).
    auto const wgrad2 = make_gemm(
        {go::gemm_kind::backward_weight_bias, m, n2, n1, type, math},
        {dy2.span(), y1.span(), dw2.span(), gs::device_span{}, gs::device_span{}, db2.span()},
        fallback());
    // Into fc1 through GELU: dZ1 and db1 in one GEMM (DGELU_BGRAD); and without db (DGELU).
    auto const dgrad = make_gemm(
        {go::gemm_kind::backward_data_gelu, m, n2, n1, type, math},
        {dy2.span(), w2.span(), dz1.span(), gs::device_span{}, z1.span(), db1.span()}, fallback());
    auto const dgrad_nobias = make_gemm(
        {go::gemm_kind::backward_data_dgelu, m, n2, n1, type, math},
        {dy2.span(), w2.span(), dz1_nobias.span(), gs::device_span{}, z1.span(), gs::device_span{}},
        fallback());
    // fc1: dW1 and dX, plain GEMMs.
    auto const wgrad1 = make_gemm({go::gemm_kind::backward_weight, m, n1, k, type, math},
                                  {dz1.span(), x.span(), dw1.span(), gs::device_span{},
                                   gs::device_span{}, gs::device_span{}});
    auto const dgrad1 = make_gemm({go::gemm_kind::backward_data, m, n1, k, type, math},
                                  {dz1.span(), w1.span(), dx.span(), gs::device_span{},
                                   gs::device_span{}, gs::device_span{}});
    bool const aligned_widths = n1 % 8 == 0 && n2 % 8 == 0 && k % 8 == 0;
    if (aligned_widths) {
      EXPECT_TRUE(wgrad2.fused() && dgrad.fused() && dgrad_nobias.fused())
          << what << ": " << wgrad2.unfused_reason() << dgrad.unfused_reason();
    }
    sync();
    auto const want_dw2 = ref::matmul_atb(hdy2, hy1, M, N2, N1);
    auto const want_db2 = ref::column_sums(hdy2, M, N2);
    auto want_dz1 = ref::matmul_ab(hdy2, hw2, M, N1, N2);
    for (std::size_t i = 0; i < M * N1; ++i) {
      want_dz1[i] *= ref::gelu_derivative(hz1[i], go::gelu_form::tanh);
    }
    auto const want_db1 = ref::column_sums(want_dz1, M, N1);
    double const tol = bound(GetParam());
    double const tol_gelu = bound(GetParam(), true);
    EXPECT_LT(error_of(dw2.download(), want_dw2), tol) << what << " dW2";
    EXPECT_LT(error_of(db2.download(), want_db2), tol) << what << " db2";
    EXPECT_LT(error_of(dz1.download(), want_dz1), tol_gelu) << what << " dZ1";
    EXPECT_LT(error_of(dz1_nobias.download(), want_dz1), tol_gelu) << what << " dZ1 (DGELU)";
    EXPECT_LT(error_of(db1.download(), want_db1), tol_gelu) << what << " db1";
    auto const got_dz1 = dz1.download();  // what the GPU fed into fc1's gradients
    EXPECT_LT(error_of(dw1.download(), ref::matmul_atb(got_dz1, hx, M, N1, K)), tol)
        << what << " dW1";
    EXPECT_LT(error_of(dx.download(), ref::matmul_ab(got_dz1, hw1, M, K, N1)), tol)
        << what << " dX";
  }
}

// The forward's saved pre-activation is what the backward reads: fc1's Z1 from the
// GELU_AUX_BIAS forward feeds fc2's DGELU_BGRAD, checked against the reference computed from
// the inputs alone (the other backward tests upload a Z1 of their own).
TEST_P(linear_gelu_gpu, forward_pre_activation_feeds_the_backward) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{29};
  for (auto [m, k, n1, n2] : {std::tuple{64, 96, 128, 32}, std::tuple{33, 40, 72, 24}}) {
    std::size_t const M = m, K = k, N1 = n1, N2 = n2;
    std::string const what = std::string{gs::testing::short_name(GetParam())} +
                             " M=" + std::to_string(m) + " K=" + std::to_string(k) +
                             " N1=" + std::to_string(n1) + " N2=" + std::to_string(n2);
    device_matrix x{type, M * K}, w1{type, N1 * K}, b1{type, N1}, z1{type, M * N1};
    device_matrix a1{type, M * N1}, w2{type, N2 * N1}, dy2{type, M * N2}, dz1{type, M * N1};
    device_matrix db1{type, N1};
    auto const hx = x.upload(random(M * K, rng));
    auto const hw1 = w1.upload(random(N1 * K, rng, 1.0 / std::sqrt(double(K))));
    auto const hb1 = b1.upload(random(N1, rng));
    auto const hw2 = w2.upload(random(N2 * N1, rng, 0.2));
    auto const hdy2 = dy2.upload(random(M * N2, rng));
    auto const forward = make_gemm(
        {go::gemm_kind::forward_bias_gelu, m, n1, k, type, math},
        {x.span(), w1.span(), a1.span(), b1.span(), z1.span(), gs::device_span{}}, fallback());
    auto const backward = make_gemm(
        {go::gemm_kind::backward_data_gelu, m, n2, n1, type, math},
        {dy2.span(), w2.span(), dz1.span(), gs::device_span{}, z1.span(), db1.span()}, fallback());
    sync();
    auto pre = ref::matmul_abt(hx, hw1, M, N1, K);
    for (std::size_t i = 0; i < M * N1; ++i) pre[i] += hb1[i % N1];
    auto want_dz1 = ref::matmul_ab(hdy2, hw2, M, N1, N2);
    for (std::size_t i = 0; i < M * N1; ++i) {
      want_dz1[i] *= ref::gelu_derivative(pre[i], go::gelu_form::tanh);
    }
    // Z1 carries the forward's rounding into GELU′; GELU″ is below 1, so it adds no more than
    // one more rounding, within the budget's three.
    EXPECT_LT(error_of(z1.download(), pre), bound(GetParam())) << what << " Z1";
    EXPECT_LT(error_of(dz1.download(), want_dz1), bound(GetParam(), true)) << what << " dZ1";
    EXPECT_LT(error_of(db1.download(), ref::column_sums(want_dz1, M, N1)), bound(GetParam(), true))
        << what << " db1";
    // A forward run again (Z1 rewritten by the same values) leaves the backward's result alone.
    auto const first = dz1.download();
    z1.poison();
    forward.run(*stream_);
    backward.run(*stream_);
    EXPECT_EQ(dz1.download(), first) << what;
  }
}

// Autotuning times every candidate cuBLASLt offers and keeps the fastest that ran; the gemm then
// computes what the heuristic's first choice computes, eagerly and captured.
TEST_P(linear_gelu_gpu, an_autotuned_gemm_matches_the_reference_and_captures) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{30};
  int const m = 96, n = 128, k = 64;
  std::size_t const M = m, N = n, K = k;
  device_matrix x{type, M * K}, w{type, N * K}, b{type, N}, y{type, M * N}, z{type, M * N};
  auto const hx = x.upload(random(M * K, rng));
  auto const hw = w.upload(random(N * K, rng, 0.2));
  auto const hb = b.upload(random(N, rng));
  go::gemm_options tuned;
  tuned.autotune_candidates = 4;
  auto const p =
      make_gemm({go::gemm_kind::forward_bias_gelu, m, n, k, type, math},
                {x.span(), w.span(), y.span(), b.span(), z.span(), gs::device_span{}}, tuned);
  EXPECT_TRUE(p.fused()) << p.unfused_reason();
  auto pre = ref::matmul_abt(hx, hw, M, N, K);
  for (std::size_t i = 0; i < M * N; ++i) pre[i] += hb[i % N];
  std::vector<double> want(M * N);
  for (std::size_t i = 0; i < M * N; ++i) want[i] = ref::gelu(pre[i], go::gelu_form::tanh);
  sync();
  auto const eager = y.download();
  EXPECT_LT(error_of(eager, want), bound(GetParam(), true));
  EXPECT_LT(error_of(z.download(), pre), bound(GetParam()));
  captured_graph const g{raw(), [&] { p.run(*stream_); }};
  y.poison();
  g.replay(raw());
  EXPECT_EQ(y.download(), eager);
}

TEST_P(linear_gelu_gpu, fused_equals_unfused_forward_and_backward) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{23};
  int const m = 128, n = 256, k = 192;
  std::size_t const M = m, N = n, K = k;
  device_matrix x{type, M * K}, w{type, N * K}, b{type, N};
  device_matrix y1{type, M * N}, z1{type, M * N}, y2{type, M * N}, z2{type, M * N};
  static_cast<void>(x.upload(random(M * K, rng)));
  static_cast<void>(w.upload(random(N * K, rng, 0.1)));
  static_cast<void>(b.upload(random(N, rng)));
  go::gemm_problem const forward{go::gemm_kind::forward_bias_gelu, m, n, k, type, math};
  auto const fused =
      make_gemm(forward, {x.span(), w.span(), y1.span(), b.span(), z1.span(), gs::device_span{}});
  go::gemm_options forced;
  forced.force_unfused = true;
  auto const unfused = make_gemm(
      forward, {x.span(), w.span(), y2.span(), b.span(), z2.span(), gs::device_span{}}, forced);
  EXPECT_TRUE(fused.fused()) << fused.unfused_reason();
  EXPECT_FALSE(unfused.fused());
  EXPECT_EQ(unfused.decision().kernels,
            std::vector<go::unfused_kernel>{go::unfused_kernel::bias_gelu});
  EXPECT_LT(error_of(y2.download(), y1.download()), bound_between(GetParam(), true));
  EXPECT_LT(error_of(z2.download(), z1.download()), bound_between(GetParam()));

  // Backward: dZ = (dY·W) ⊙ GELU′(Z) with db, and dW with db, fused and unfused.
  device_matrix dy{type, M * N}, dz1{type, M * K}, dz2{type, M * K}, zk{type, M * K};
  device_matrix dbk1{type, K}, dbk2{type, K}, dw1{type, N * K}, dw2{type, N * K};
  device_matrix dbn1{type, N}, dbn2{type, N};
  static_cast<void>(dy.upload(random(M * N, rng)));
  static_cast<void>(zk.upload(random(M * K, rng, 2.0)));
  go::gemm_problem const dgelu{go::gemm_kind::backward_data_gelu, m, n, k, type, math};
  auto const f1 = make_gemm(
      dgelu, {dy.span(), w.span(), dz1.span(), gs::device_span{}, zk.span(), dbk1.span()});
  auto const u1 = make_gemm(
      dgelu, {dy.span(), w.span(), dz2.span(), gs::device_span{}, zk.span(), dbk2.span()}, forced);
  go::gemm_problem const wgrad{go::gemm_kind::backward_weight_bias, m, n, k, type, math};
  auto const f2 = make_gemm(
      wgrad, {dy.span(), x.span(), dw1.span(), gs::device_span{}, gs::device_span{}, dbn1.span()});
  auto const u2 = make_gemm(
      wgrad, {dy.span(), x.span(), dw2.span(), gs::device_span{}, gs::device_span{}, dbn2.span()},
      forced);
  EXPECT_TRUE(f1.fused() && f2.fused()) << f1.unfused_reason() << f2.unfused_reason();
  EXPECT_FALSE(u1.fused() || u2.fused());
  EXPECT_LT(error_of(dz2.download(), dz1.download()), bound_between(GetParam(), true));
  EXPECT_LT(error_of(dbk2.download(), dbk1.download()), bound_between(GetParam(), true));
  EXPECT_LT(error_of(dw2.download(), dw1.download()), bound_between(GetParam()));
  EXPECT_LT(error_of(dbn2.download(), dbn1.download()), bound_between(GetParam()));
}

TEST_P(linear_gelu_gpu, erf_form_runs_unfused_and_matches_its_reference) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{25};
  int const m = 48, n = 64, k = 40;
  std::size_t const M = m, N = n, K = k;
  device_matrix x{type, M * K}, w{type, N * K}, b{type, N}, y{type, M * N}, z{type, M * N};
  auto const hx = x.upload(random(M * K, rng));
  auto const hw = w.upload(random(N * K, rng, 0.3));
  auto const hb = b.upload(random(N, rng));
  go::gemm_options erf;
  erf.form = go::gelu_form::erf;
  auto const p =
      make_gemm({go::gemm_kind::forward_bias_gelu, m, n, k, type, math},
                {x.span(), w.span(), y.span(), b.span(), z.span(), gs::device_span{}}, erf);
  EXPECT_FALSE(p.fused());
  EXPECT_NE(p.unfused_reason().find("tanh form"), std::string::npos) << p.unfused_reason();
  auto pre = ref::matmul_abt(hx, hw, M, N, K);
  for (std::size_t i = 0; i < M * N; ++i) pre[i] += hb[i % N];
  std::vector<double> want(M * N);
  for (std::size_t i = 0; i < M * N; ++i) want[i] = ref::gelu(pre[i], go::gelu_form::erf);
  EXPECT_LT(error_of(y.download(), want), bound(GetParam()));
  // The bias-only kind ignores the form and stays fused.
  auto const linear = make_gemm(
      {go::gemm_kind::forward_bias, m, n, k, type, math},
      {x.span(), w.span(), y.span(), b.span(), gs::device_span{}, gs::device_span{}}, erf);
  EXPECT_TRUE(linear.fused());
}

TEST_P(linear_gelu_gpu, capture_and_replay_of_forward_and_backward_equal_eager) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{24};
  int const m = 64, k = 96, n1 = 128, n2 = 64;
  std::size_t const M = m, K = k, N1 = n1, N2 = n2;
  device_matrix x{type, M * K}, w1{type, N1 * K}, b1{type, N1}, z1{type, M * N1};
  device_matrix a1{type, M * N1}, w2{type, N2 * N1}, b2{type, N2}, y2{type, M * N2};
  device_matrix dy2{type, M * N2}, dw2{type, N2 * N1}, db2{type, N2}, dz1{type, M * N1};
  device_matrix db1{type, N1}, dw1{type, N1 * K}, dx{type, M * K};
  static_cast<void>(x.upload(random(M * K, rng)));
  static_cast<void>(w1.upload(random(N1 * K, rng, 0.1)));
  static_cast<void>(b1.upload(random(N1, rng)));
  static_cast<void>(w2.upload(random(N2 * N1, rng, 0.1)));
  static_cast<void>(b2.upload(random(N2, rng)));
  static_cast<void>(dy2.upload(random(M * N2, rng)));
  std::vector<go::gemm> gemms;
  gemms.push_back(
      make_gemm({go::gemm_kind::forward_bias_gelu, m, n1, k, type, math},
                {x.span(), w1.span(), a1.span(), b1.span(), z1.span(), gs::device_span{}}));
  gemms.push_back(make_gemm(
      {go::gemm_kind::forward_bias, m, n2, n1, type, math},
      {a1.span(), w2.span(), y2.span(), b2.span(), gs::device_span{}, gs::device_span{}}));
  gemms.push_back(make_gemm(
      {go::gemm_kind::backward_weight_bias, m, n2, n1, type, math},
      {dy2.span(), a1.span(), dw2.span(), gs::device_span{}, gs::device_span{}, db2.span()}));
  gemms.push_back(
      make_gemm({go::gemm_kind::backward_data_gelu, m, n2, n1, type, math},
                {dy2.span(), w2.span(), dz1.span(), gs::device_span{}, z1.span(), db1.span()}));
  gemms.push_back(make_gemm(
      {go::gemm_kind::backward_weight, m, n1, k, type, math},
      {dz1.span(), x.span(), dw1.span(), gs::device_span{}, gs::device_span{}, gs::device_span{}}));
  gemms.push_back(make_gemm(
      {go::gemm_kind::backward_data, m, n1, k, type, math},
      {dz1.span(), w1.span(), dx.span(), gs::device_span{}, gs::device_span{}, gs::device_span{}}));
  for (auto const& p : gemms) EXPECT_TRUE(p.fused()) << p.unfused_reason();
  std::vector<device_matrix*> const outputs{&z1, &a1, &y2, &dw2, &db2, &dz1, &db1, &dw1, &dx};
  // Eager, in order, after poisoning every output. Each gemm's constructor ran once on the
  // non-blocking stream, which the legacy-stream memset of poison() does not wait for: wait here.
  sync();
  for (auto* out : outputs) out->poison();
  for (auto const& p : gemms) p.run(*stream_);
  sync();
  std::vector<std::vector<double>> eager;
  for (auto* out : outputs) {
    eager.push_back(out->download());
    EXPECT_FALSE(has_nan(eager.back()));
  }
  captured_graph const step{raw(), [&] {
                              for (auto const& p : gemms) p.run(*stream_);
                            }};
  auto const nodes = count_nodes(step.graph());
  // At least one kernel per GEMM; a GEMM may add a split-K reduction or an epilogue kernel.
  EXPECT_GE(nodes.kernels, gemms.size()) << nodes.total() << " nodes";
  EXPECT_EQ(nodes.others, 0U) << "host, copy or other nodes in a captured step";
  for (int replay = 0; replay < 2; ++replay) {
    for (auto* out : outputs) out->poison();
    step.replay(raw());
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      EXPECT_EQ(outputs[i]->download(), eager[i]) << "output " << i << ", replay " << replay;
    }
  }
}

// What cuBLASLt records for one fused GEMM is its own business: on sm_90 the fp32 (COMPUTE_32F)
// epilogue may run as a separate kernel after the main one, and a split-K algorithm adds a
// reduction kernel and sometimes a memset of its workspace (docs/ops.md lists the counts).
// What holds everywhere: device work only, at least one kernel, at most three kernels and one
// memset, and the replay equals the eager run.
TEST_P(linear_gelu_gpu, captured_fused_forward_is_a_few_kernel_nodes) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{26};
  for (auto [m, n, k] : {std::tuple{64, 128, 128}, std::tuple{640, 2048, 4096}}) {
    // The large shape is there for a GPU's cuBLASLt, whose heuristic may pick split-K for it; the
    // simulated device's cuBLASLt runs one kernel whatever the shape, and multiplying it on the
    // CPU costs minutes under the sanitizers.
    if (gs::testing::simulated_device && m > 64) continue;
    std::size_t const M = m, N = n, K = k;
    std::string const what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                             " " + gs::testing::short_name(GetParam());
    device_matrix x{type, M * K}, w{type, N * K}, b{type, N}, y{type, M * N}, z{type, M * N};
    static_cast<void>(x.upload(random(M * K, rng)));
    static_cast<void>(w.upload(random(N * K, rng, 0.05)));
    static_cast<void>(b.upload(random(N, rng)));
    auto const p = make_gemm({go::gemm_kind::forward_bias_gelu, m, n, k, type, math},
                             {x.span(), w.span(), y.span(), b.span(), z.span(), gs::device_span{}});
    ASSERT_TRUE(p.fused()) << p.unfused_reason();
    sync();
    auto const eager = y.download();
    captured_graph const g{raw(), [&] { p.run(*stream_); }};
    auto const nodes = count_nodes(g.graph());
    EXPECT_GE(nodes.kernels, 1U) << what;
    EXPECT_LE(nodes.kernels, 3U) << what << ": main, epilogue and split-K reduction at most";
    EXPECT_LE(nodes.memsets, 1U) << what;
    EXPECT_EQ(nodes.others, 0U) << what << ": no host, copy or other nodes";
    y.poison();
    g.replay(raw());
    EXPECT_EQ(y.download(), eager) << what;
  }
}

TEST_P(linear_gelu_gpu, making_a_gemm_while_capturing_is_a_usage_error) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  device_matrix x{type, 64 * 64}, w{type, 64 * 64}, y{type, 64 * 64};
  go::gemm_operands const operands{x.span(),          w.span(),          y.span(),
                                   gs::device_span{}, gs::device_span{}, gs::device_span{}};
  auto const ready = make_gemm({go::gemm_kind::forward, 64, 64, 64, type, math}, operands);
  try {
    captured_graph const g{
        raw(), [&] {
          ready.run(*stream_);  // capturable
          static_cast<void>(make_gemm({go::gemm_kind::forward, 64, 64, 64, type, math}, operands));
        }};
    FAIL() << "a gemm was set up on a capturing stream";
  } catch (gs::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("before the capture"), std::string::npos) << e.what();
  }
  // The failed capture was ended: the stream works eagerly again.
  cudaStreamCaptureStatus status{};
  ASSERT_EQ(cudaStreamIsCapturing(raw(), &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_NO_THROW(ready.run(*stream_));
  sync();
}

TEST_P(linear_gelu_gpu, misaligned_operands_fall_back_or_fail_clearly) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  std::mt19937 rng{27};
  int const m = 32, n = 64, k = 64;
  std::size_t const M = m, N = n, K = k;
  std::size_t const element = gs::size_in_bytes(type);
  device_matrix x{type, M * K, element}, w{type, N * K}, b{type, N, element};
  device_matrix y{type, M * N}, z{type, M * N};
  auto const hx = x.upload(random(M * K, rng));
  auto const hw = w.upload(random(N * K, rng, 0.2));
  auto const hb = b.upload(random(N, rng));
  go::gemm_problem const problem{go::gemm_kind::forward_bias_gelu, m, n, k, type, math};
  go::gemm_operands const operands{x.span(), w.span(), y.span(),
                                   b.span(), z.span(), gs::device_span{}};
  auto const s = go::gemm::can_implement(problem, operands);
  EXPECT_FALSE(s.fused);
  EXPECT_NE(s.reason.find("16-byte boundary"), std::string::npos) << s.reason;
  EXPECT_THROW(static_cast<void>(make_gemm(problem, operands)), gs::usage_error);
  auto const p = make_gemm(problem, operands, fallback());
  EXPECT_FALSE(p.fused());
  auto pre = ref::matmul_abt(hx, hw, M, N, K);
  for (std::size_t i = 0; i < M * N; ++i) pre[i] += hb[i % N];
  std::vector<double> want(M * N);
  for (std::size_t i = 0; i < M * N; ++i) want[i] = ref::gelu(pre[i], go::gelu_form::tanh);
  EXPECT_LT(error_of(y.download(), want), bound(GetParam()));
  EXPECT_LT(error_of(z.download(), pre), bound(GetParam()));
}

TEST_P(linear_gelu_gpu, bad_arguments_are_usage_errors) {
  gs::dtype const type = GetParam().type;
  go::gemm_math const math = GetParam().math;
  device_matrix x{type, 64 * 64};
  EXPECT_THROW(static_cast<void>(make_gemm(
                   {go::gemm_kind::forward_bias_gelu, 64, 64, 64, type, math},
                   {x.span(), x.span(), x.span(), gs::device_span{}, x.span(), gs::device_span{}})),
               gs::usage_error);  // no bias
  EXPECT_THROW(static_cast<void>(make_gemm({go::gemm_kind::forward_gelu, 64, 64, 64, type, math},
                                           {x.span(), x.span(), x.span(), gs::device_span{},
                                            gs::device_span{}, gs::device_span{}})),
               gs::usage_error);  // no pre-activation
  EXPECT_THROW(
      static_cast<void>(make_gemm(
          {go::gemm_kind::backward_weight_bias, 64, 64, 64, type, math},
          {x.span(), x.span(), x.span(), gs::device_span{}, gs::device_span{}, gs::device_span{}})),
      gs::usage_error);  // no bias gradient
  EXPECT_THROW(static_cast<void>(make_gemm({go::gemm_kind::forward, 0, 64, 64, type, math},
                                           {x.span(), x.span(), x.span(), gs::device_span{},
                                            gs::device_span{}, gs::device_span{}})),
               gs::usage_error);
  EXPECT_THROW(static_cast<void>(go::gemm{*handle_,
                                          {go::gemm_kind::forward, 8, 8, 8, type, math},
                                          {x.span(), x.span(), x.span(), gs::device_span{},
                                           gs::device_span{}, gs::device_span{}},
                                          static_cast<char*>(workspace_) + 16,
                                          1024,
                                          {},
                                          *stream_}),
               gs::usage_error);  // misaligned workspace
  // A gemm runs once when made: its output must not alias its inputs.
  device_matrix out{type, std::size_t{64}};
  auto p = make_gemm(
      {go::gemm_kind::forward, 8, 8, 8, type, math},
      {x.span(), x.span(), out.span(), gs::device_span{}, gs::device_span{}, gs::device_span{}});
  auto moved = std::move(p);
  EXPECT_THROW(p.run(*stream_), gs::usage_error);  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(p.fused());                         // NOLINT(bugprone-use-after-move)
  EXPECT_NO_THROW(moved.run(*stream_));
  sync();
}

// The hand-written kernels alone, vectorized and scalar, on shapes with tails.
TEST_P(linear_gelu_gpu, kernels_match_the_reference) {
  gs::dtype const type = GetParam().type;
  std::mt19937 rng{28};
  std::size_t const element = gs::size_in_bytes(type);
  for (auto [m, n] : {std::tuple{1, 1}, std::tuple{3, 5}, std::tuple{1000, 7},
                      std::tuple{640, 1024}, std::tuple{33, 130}, std::tuple{2, 4097}}) {
    for (std::size_t offset : {std::size_t{0}, element}) {  // 16-byte aligned, then not
      std::size_t const M = m, N = n;
      std::string const what = std::string{gs::testing::short_name(GetParam())} + " " +
                               std::to_string(m) + "x" + std::to_string(n) +
                               (offset != 0 ? " unaligned" : "");
      device_matrix dz{type, M * N, offset}, db{type, N}, y{type, M * N, offset};
      device_matrix pre{type, M * N, offset}, bias{type, N}, g{type, M * N, offset};
      auto const hdz = dz.upload(random(M * N, rng));
      go::launch_bias_gradient(db.span(), dz.span(), m, n, *stream_);
      auto const first = db.download();
      EXPECT_LT(error_of(first, ref::column_sums(hdz, M, N)), bound(GetParam())) << what;
      db.poison();
      go::launch_bias_gradient(db.span(), dz.span(), m, n, *stream_);
      EXPECT_EQ(db.download(), first) << what << ": the bias gradient is not reproducible";

      auto const hy = y.upload(random(M * N, rng, 3.0));
      auto const hb = bias.upload(random(N, rng));
      for (auto form : {go::gelu_form::tanh, go::gelu_form::erf}) {
        static_cast<void>(y.upload(hy));
        pre.poison();
        go::launch_bias_gelu(y.span(), pre.span(), bias.span(), m, n, true, form, *stream_);
        std::vector<double> want_pre(M * N), want(M * N);
        for (std::size_t i = 0; i < M * N; ++i) {
          want_pre[i] = hy[i] + hb[i % N];
          want[i] = ref::gelu(want_pre[i], form);
        }
        EXPECT_LT(error_of(pre.download(), want_pre), bound(GetParam())) << what;
        EXPECT_LT(error_of(y.download(), want), bound(GetParam())) << what;
        // dz = dy ⊙ GELU′(pre), in place on dy.
        auto const hpre = pre.download();
        auto const hg = g.upload(random(M * N, rng));
        go::launch_gelu_backward(g.span(), g.span(), pre.span(), m, n, form, *stream_);
        std::vector<double> want_dz(M * N);
        for (std::size_t i = 0; i < M * N; ++i)
          want_dz[i] = hg[i] * ref::gelu_derivative(hpre[i], form);
        EXPECT_LT(error_of(g.download(), want_dz), bound(GetParam())) << what;
      }
      // Bias only, without GELU and without saving.
      static_cast<void>(y.upload(hy));
      go::launch_bias_gelu(y.span(), gs::device_span{}, bias.span(), m, n, false,
                           go::gelu_form::tanh, *stream_);
      std::vector<double> want_bias(M * N);
      for (std::size_t i = 0; i < M * N; ++i) want_bias[i] = hy[i] + hb[i % N];
      EXPECT_LT(error_of(y.download(), want_bias), bound(GetParam())) << what;
    }
  }
  device_matrix any{type, 16};
  EXPECT_THROW(go::launch_bias_gradient(gs::device_span{}, any.span(), 4, 4, *stream_),
               gs::usage_error);
  EXPECT_THROW(go::launch_bias_gelu(any.span(), gs::device_span{}, gs::device_span{}, 0, 4, true,
                                    go::gelu_form::tanh, *stream_),
               gs::usage_error);
  EXPECT_THROW(go::launch_gelu_backward(any.span(), any.span(), gs::device_span{}, 4, 4,
                                        go::gelu_form::tanh, *stream_),
               gs::usage_error);
}

// GELU and GELU′ saturate instead of turning into NaN: at ±inf (inf·0 in the formula), and, for
// GELU′, where x·x overflows fp32 (|x| > 1.8e19). Vectorized and scalar, both forms.
TEST_P(linear_gelu_gpu, gelu_kernels_saturate_at_large_and_infinite_inputs) {
  gs::dtype const type = GetParam().type;
  double const inf = std::numeric_limits<double>::infinity();
  // 3e38 and 2e19 become inf in fp16; bf16 and fp32 keep them finite (x·x overflows fp32).
  std::vector<double> const inputs{inf,  -inf,  3e38,  -3e38, 2e19, -2e19, 1e6,  -1e6,
                                   12.0, -12.0, 100.0, -100., 0.0,  1.0,   -1.0, 0.5};
  std::size_t const n = inputs.size();
  std::size_t const element = gs::size_in_bytes(type);
  for (std::size_t offset : {std::size_t{0}, element}) {  // 16-byte aligned, then not
    for (auto form : {go::gelu_form::tanh, go::gelu_form::erf}) {
      std::string const what = std::string{gs::testing::short_name(GetParam())} +
                               (form == go::gelu_form::erf ? " erf" : " tanh") +
                               (offset != 0 ? " unaligned" : "");
      device_matrix y{type, n, offset}, pre{type, n, offset}, g{type, n, offset};
      auto const stored = y.upload(inputs);
      static_cast<void>(g.upload(std::vector<double>(n, 1.0)));
      go::launch_bias_gelu(y.span(), pre.span(), gs::device_span{}, 1, static_cast<std::int64_t>(n),
                           true, form, *stream_);
      go::launch_gelu_backward(g.span(), g.span(), pre.span(), 1, static_cast<std::int64_t>(n),
                               form, *stream_);
      auto const got = y.download();
      auto const slope = g.download();
      for (std::size_t i = 0; i < n; ++i) {
        double const x = stored[i];
        EXPECT_FALSE(std::isnan(got[i])) << what << ": GELU(" << x << ")";
        EXPECT_FALSE(std::isnan(slope[i])) << what << ": GELU'(" << x << ")";
        if (std::fabs(x) > 10.0) {
          EXPECT_EQ(got[i], x > 0 ? x : 0.0) << what << ": GELU(" << x << ")";
          EXPECT_EQ(slope[i], x > 0 ? 1.0 : 0.0) << what << ": GELU'(" << x << ")";
        } else {
          EXPECT_NEAR(got[i], ref::gelu(x, form), 1e-2) << what << ": GELU(" << x << ")";
          EXPECT_NEAR(slope[i], ref::gelu_derivative(x, form), 1e-2)
              << what << ": GELU'(" << x << ")";
        }
      }
    }
  }
}

// The bias gradient splits M across a 2-D grid and adds the slices in a second pass: against
// the reference on shapes with M not a multiple of the slice or the row groups, N not a
// multiple of the 64- or 32-column tile, M = 1, N = 1, aligned and not; the same bits on every
// run; the same sums (to fp32 rounding) as the one-pass kernel without workspace.
TEST_P(linear_gelu_gpu, bias_gradient_with_workspace_is_exact_and_reproducible) {
  gs::dtype const type = GetParam().type;
  std::mt19937 rng{31};
  std::size_t const element = gs::size_in_bytes(type);
  for (auto [m, n] :
       {std::tuple{640, 1024}, std::tuple{1000, 72}, std::tuple{777, 130}, std::tuple{1, 64},
        std::tuple{1, 1}, std::tuple{3000, 1}, std::tuple{4099, 8}, std::tuple{65, 4097}}) {
    for (std::size_t offset : {std::size_t{0}, element}) {
      std::size_t const M = m, N = n;
      std::string const what = std::string{gs::testing::short_name(GetParam())} + " " +
                               std::to_string(m) + "x" + std::to_string(n) +
                               (offset != 0 ? " unaligned" : "");
      std::size_t const bytes = go::bias_gradient_workspace_size(n);
      void* workspace = nullptr;
      GRAPHSTEP_CUDA_TRY(cudaMalloc(&workspace, bytes));
      device_matrix dz{type, M * N, offset}, db{type, N}, one_pass{type, N};
      auto const hdz = dz.upload(random(M * N, rng));
      go::launch_bias_gradient(db.span(), dz.span(), m, n, workspace, bytes, *stream_);
      auto const first = db.download();
      EXPECT_LT(error_of(first, ref::column_sums(hdz, M, N)), bound(GetParam())) << what;
      for (int run = 0; run < 2; ++run) {
        db.poison();
        GRAPHSTEP_CUDA_TRY(cudaMemset(workspace, 0xFF, bytes));  // stale partials must not count
        GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
        go::launch_bias_gradient(db.span(), dz.span(), m, n, workspace, bytes, *stream_);
        EXPECT_EQ(db.download(), first) << what << ": not reproducible, run " << run;
      }
      go::launch_bias_gradient(one_pass.span(), dz.span(), m, n, *stream_);
      EXPECT_LT(error_of(one_pass.download(), first), 2 * bound(GetParam())) << what;
      GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(workspace));
    }
  }
  device_matrix any{type, 16};
  EXPECT_THROW(go::launch_bias_gradient(any.span(), any.span(), 4, 4, nullptr, 64, *stream_),
               gs::usage_error);  // a size without a workspace
  EXPECT_THROW(static_cast<void>(go::bias_gradient_workspace_size(0)), gs::usage_error);
}

INSTANTIATE_TEST_SUITE_P(precisions, linear_gelu_gpu,
                         ::testing::ValuesIn(gs::testing::all_gemm_numerics), [](auto const& info) {
                           return std::string{gs::testing::short_name(info.param)};
                         });
