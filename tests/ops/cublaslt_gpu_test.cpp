// cuBLASLt conformance, one test per rule the simulated device models (sim/docs/simulator.md,
// "cuBLASLt and cuBLAS"): every epilogue graphstep uses against an fp64 reference, transposes,
// leading dimensions, alpha and beta with C != D, each precision, the refusals, and capture with
// replay. Only the plain CUDA runtime, cuBLASLt and cuBLAS are used, so that a GPU run checks the
// simulator: every bound below holds for any summation order a GPU kernel may take.
//
// Error budget (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1): a dot product of
// k terms accumulated in fp32 differs from the exact one by at most γ_k·Σ|a||b|, γ_k = k·u/(1-k·u),
// u = 2^-24; TF32 inputs are each off by at most 2^-10 relative (2^-11 if rounded, 2^-10 if
// truncated), so a product by 2·2^-10 + 2^-20; the epilogue runs in fp32 (a few ulps for tanh);
// the output is rounded to its type: half an ulp, 2^-24, 2^-11 or 2^-8 relative. GELU' is at most
// 1.13 in magnitude, so an error in GELU's input reaches its output at most 1.13 times.

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <graphstep/ops/reference.hpp>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

namespace ref = graphstep::ops::reference;
using graphstep::ops::gelu_form;

#if defined(GRAPHSTEP_CUDA_SIM)
constexpr bool simulated = true;
#else
constexpr bool simulated = false;
#endif

#define LT_OK(call) ASSERT_EQ((call), CUBLAS_STATUS_SUCCESS) << #call
#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

bool has_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// --- element types ----------------------------------------------------------------------------

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
// Values exactly representable in every type used: a few significant bits, small exponents.
std::uint16_t bf16_bits(float f) {
  return static_cast<std::uint16_t>(bits_of(f) >> 16U);
}
std::uint16_t fp16_bits(float f) {  // exact for the test's values (normal, <= 11 significant bits)
  std::uint32_t const x = bits_of(f);
  if ((x & 0x7FFFFFFFU) == 0) return static_cast<std::uint16_t>((x >> 16U) & 0x8000U);
  std::uint32_t const sign = (x >> 16U) & 0x8000U;
  auto const e = static_cast<std::uint32_t>(static_cast<int>((x >> 23U) & 0xFFU) - 127 + 15);
  return static_cast<std::uint16_t>(sign | (e << 10U) | ((x & 0x7FFFFFU) >> 13U));
}
double from_fp16(std::uint16_t h) {
  int const e = (h >> 10) & 0x1F;
  double const m = h & 0x3FF;
  double const v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024.0 + m, e - 25);
  return (h & 0x8000) != 0 ? -v : v;
}

struct element {
  cudaDataType_t type;
  std::size_t bytes;
  double unit_roundoff;  // half an ulp, relative
  char const* name;
};
element const fp32{CUDA_R_32F, 4, std::ldexp(1.0, -24), "fp32"};
element const fp16{CUDA_R_16F, 2, std::ldexp(1.0, -11), "fp16"};
element const bf16{CUDA_R_16BF, 2, std::ldexp(1.0, -8), "bf16"};

// Random values with 6 significant bits in [-1, 1]: exact in fp16, bf16 and TF32 alike, so each
// type reads exactly what the reference does.
std::vector<double> random_values(std::size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist{-64, 64};
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng) / 64.0;
  return v;
}

// Device memory holding values of one type.
class device_buffer {
 public:
  device_buffer(element type, std::size_t count, std::size_t offset_bytes = 0)
      : type_{type}, count_{count} {
    EXPECT_EQ(cudaMalloc(&base_, count * type.bytes + offset_bytes + 256), cudaSuccess);
    data_ = static_cast<unsigned char*>(base_) + offset_bytes;
    fill_nan();
  }
  ~device_buffer() { static_cast<void>(cudaFree(base_)); }
  device_buffer(device_buffer const&) = delete;
  device_buffer& operator=(device_buffer const&) = delete;
  device_buffer(device_buffer&&) = delete;
  device_buffer& operator=(device_buffer&&) = delete;

  [[nodiscard]] void* get() const { return data_; }
  void fill_nan() {  // 0xFF bytes: NaN in every type, so an element nobody wrote shows
    EXPECT_EQ(cudaMemset(data_, 0xFF, count_ * type_.bytes), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  void upload(std::vector<double> const& values) {
    std::vector<unsigned char> raw(count_ * type_.bytes);
    for (std::size_t i = 0; i < count_; ++i) {
      auto const f = static_cast<float>(values[i]);
      if (type_.type == CUDA_R_32F) {
        std::memcpy(&raw[i * 4], &f, 4);
      } else {
        std::uint16_t const h = type_.type == CUDA_R_16F ? fp16_bits(f) : bf16_bits(f);
        std::memcpy(&raw[i * 2], &h, 2);
      }
    }
    EXPECT_EQ(cudaMemcpy(data_, raw.data(), raw.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  [[nodiscard]] std::vector<double> download() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<unsigned char> raw(count_ * type_.bytes);
    EXPECT_EQ(cudaMemcpy(raw.data(), data_, raw.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<double> values(count_);
    for (std::size_t i = 0; i < count_; ++i) {
      if (type_.type == CUDA_R_32F) {
        float f = 0.0F;
        std::memcpy(&f, &raw[i * 4], 4);
        values[i] = f;
      } else {
        std::uint16_t h = 0;
        std::memcpy(&h, &raw[i * 2], 2);
        values[i] = type_.type == CUDA_R_16F ? from_fp16(h) : float_of(std::uint32_t{h} << 16U);
      }
    }
    return values;
  }

 private:
  element type_;
  std::size_t count_;
  void* base_{};
  void* data_{};
};

// Every element within its own bound; NaN (an element never written) fails.
void expect_within(std::vector<double> const& got, std::vector<double> const& want,
                   std::vector<double> const& bound, std::string const& what) {
  ASSERT_EQ(got.size(), want.size());
  int reported = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= bound[i]) && reported++ < 5) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i]
                    << " ± " << bound[i];
    }
  }
}

double gamma(std::int64_t k) {
  double const u = std::ldexp(1.0, -24);
  return static_cast<double>(k) * u / (1.0 - static_cast<double>(k) * u);
}

// One matmul call with its descriptors, column-major: D[m,n] = epilogue(alpha·op(A)·op(B) +
// beta·C).
struct matmul_case {
  element type = fp32;
  element out_type = fp32;  // C and D
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool ta = false, tb = false;
  std::int64_t m = 24, n = 16, k = 40;
  std::int64_t extra_ld = 0;  // ld = rows + extra_ld for A, B, C, D
  float alpha = 1.0F, beta = 0.0F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};

// Host values and the fp64 results of a case.
struct expected {
  std::vector<double> a, b, c, bias, aux_in;
  std::vector<double> x;        // alpha·AB + beta·C (+ bias): the GELU input
  std::vector<double> x_bound;  // its error bound
  std::vector<double> d, d_bound;
  std::vector<double> bias_gradient, bias_gradient_bound;
};

class cublaslt_conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_device()) GTEST_SKIP() << "no CUDA device visible";
    ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&workspace_, workspace_bytes_), cudaSuccess);
  }
  void TearDown() override {
    if (workspace_ != nullptr) {
      EXPECT_EQ(cudaFree(workspace_), cudaSuccess);
    }
    if (handle_ != nullptr) {
      EXPECT_EQ(cublasLtDestroy(handle_), CUBLAS_STATUS_SUCCESS);
    }
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
  }

  // Descriptors of a case (released by the fixture).
  struct descriptors {
    cublasLtMatmulDesc_t op{};
    cublasLtMatrixLayout_t a{}, b{}, c{}, d{};
  };
  descriptors describe(matmul_case const& c) {
    descriptors d;
    EXPECT_EQ(cublasLtMatmulDescCreate(&d.op, c.compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    cublasOperation_t const ta = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t const tb = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epilogue,
                                             sizeof c.epilogue),
              CUBLAS_STATUS_SUCCESS);
    auto layout = [&](element t, std::int64_t rows, std::int64_t cols) {
      cublasLtMatrixLayout_t l = nullptr;
      EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, t.type, static_cast<std::uint64_t>(rows),
                                           static_cast<std::uint64_t>(cols), rows + c.extra_ld),
                CUBLAS_STATUS_SUCCESS);
      return l;
    };
    d.a = c.ta ? layout(c.type, c.k, c.m) : layout(c.type, c.m, c.k);
    d.b = c.tb ? layout(c.type, c.n, c.k) : layout(c.type, c.k, c.n);
    d.c = layout(c.out_type, c.m, c.n);
    d.d = layout(c.out_type, c.m, c.n);
    made_.push_back(d);
    return d;
  }
  ~cublaslt_conformance() override {
    for (auto const& d : made_) {
      static_cast<void>(cublasLtMatmulDescDestroy(d.op));
      for (auto* l : {d.a, d.b, d.c, d.d}) static_cast<void>(cublasLtMatrixLayoutDestroy(l));
    }
  }
  cublaslt_conformance() = default;
  cublaslt_conformance(cublaslt_conformance const&) = delete;
  cublaslt_conformance& operator=(cublaslt_conformance const&) = delete;
  cublaslt_conformance(cublaslt_conformance&&) = delete;
  cublaslt_conformance& operator=(cublaslt_conformance&&) = delete;

  // With a workspace, as a caller passes what the heuristic asks: DGELU_BGRAD needs one.
  cublasStatus_t matmul(descriptors const& d, matmul_case const& c, void const* a, void const* b,
                        void const* cm, void* dm, std::size_t workspace_bytes = workspace_bytes_) {
    return cublasLtMatmul(handle_, d.op, &c.alpha, a, d.a, b, d.b, &c.beta, cm, d.c, dm, d.d,
                          nullptr, workspace_bytes == 0 ? nullptr : workspace_, workspace_bytes,
                          stream_);
  }

  // Runs a case end to end and checks D (and aux, bias gradient) against the fp64 reference.
  void run_and_check(matmul_case const& c, std::string const& what) {
    std::mt19937 rng{7};
    std::int64_t const lda = (c.ta ? c.k : c.m) + c.extra_ld;
    std::int64_t const ldb = (c.tb ? c.n : c.k) + c.extra_ld;
    std::int64_t const ldc = c.m + c.extra_ld;
    auto const a_count = static_cast<std::size_t>(lda * (c.ta ? c.m : c.k));
    auto const b_count = static_cast<std::size_t>(ldb * (c.tb ? c.k : c.n));
    auto const c_count = static_cast<std::size_t>(ldc * c.n);
    auto const mm = static_cast<std::size_t>(c.m), nn = static_cast<std::size_t>(c.n);
    expected e;
    e.a = random_values(a_count, rng);
    e.b = random_values(b_count, rng);
    e.c = random_values(c_count, rng);
    e.bias = random_values(mm, rng);
    std::uint32_t const ep = c.epilogue;
    bool const bias = ep == CUBLASLT_EPILOGUE_BIAS || ep == CUBLASLT_EPILOGUE_GELU_BIAS ||
                      ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bool const gelu = ep == CUBLASLT_EPILOGUE_GELU || ep == CUBLASLT_EPILOGUE_GELU_BIAS ||
                      ep == CUBLASLT_EPILOGUE_GELU_AUX || ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bool const aux_out = ep == CUBLASLT_EPILOGUE_GELU_AUX || ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bool const dgelu = ep == CUBLASLT_EPILOGUE_DGELU || ep == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    bool const bgrad_d = ep == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    bool const bgrad_a = ep == CUBLASLT_EPILOGUE_BGRADA;
    bool const bgrad_b = ep == CUBLASLT_EPILOGUE_BGRADB;
    std::int64_t const aux_ld = (c.m + 7) / 8 * 8 + 8;  // divisible by 8, more than m rows
    auto const aux_count = static_cast<std::size_t>(aux_ld) * nn;
    e.aux_in.assign(aux_count, 0.0);
    for (auto& v : e.aux_in) v = random_values(1, rng)[0] * 3.0;  // GELU inputs in [-3, 3]

    auto const a_at = [&](std::size_t i, std::size_t kk) {
      return c.ta ? e.a[i * static_cast<std::size_t>(lda) + kk]
                  : e.a[kk * static_cast<std::size_t>(lda) + i];
    };
    auto const b_at = [&](std::size_t kk, std::size_t j) {
      return c.tb ? e.b[kk * static_cast<std::size_t>(ldb) + j]
                  : e.b[j * static_cast<std::size_t>(ldb) + kk];
    };
    bool const tf32 = c.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    double const product_error =
        gamma(c.k) + (tf32 ? 2.0 * std::ldexp(1.0, -10) + std::ldexp(1.0, -20) : 0.0);
    double const fp32_epilogue = 8.0 * std::ldexp(1.0, -24);  // a few fp32 ulps (tanh, products)
    double const out_u = c.out_type.unit_roundoff;
    std::size_t const kk_n = static_cast<std::size_t>(c.k);
    e.x.assign(mm * nn, 0.0);
    e.x_bound.assign(mm * nn, 0.0);
    e.d.assign(mm * nn, 0.0);
    e.d_bound.assign(mm * nn, 0.0);
    std::vector<double> d_sum(mm, 0.0), d_sum_bound(mm, 0.0);
    for (std::size_t j = 0; j < nn; ++j) {
      for (std::size_t i = 0; i < mm; ++i) {
        double dot = 0.0, magnitude = 0.0;
        for (std::size_t kk = 0; kk < kk_n; ++kk) {
          dot += a_at(i, kk) * b_at(kk, j);
          magnitude += std::abs(a_at(i, kk) * b_at(kk, j));
        }
        double const cij = e.c[j * static_cast<std::size_t>(ldc) + i];
        double x = c.alpha * dot + c.beta * cij + (bias ? e.bias[i] : 0.0);
        double xb = std::abs(c.alpha) * magnitude * product_error +
                    fp32_epilogue * (std::abs(c.alpha * dot) + std::abs(c.beta * cij) + 1.0);
        std::size_t const at = j * mm + i;
        e.x[at] = x;
        e.x_bound[at] = xb + out_u * std::abs(x);  // aux is rounded to D's type
        double d = x, db = xb;
        if (gelu) {
          d = ref::gelu(x, gelu_form::tanh);
          db = 1.13 * xb + fp32_epilogue * (std::abs(x) + 1.0);
        }
        if (dgelu) {
          double const a = e.aux_in[j * static_cast<std::size_t>(aux_ld) + i];
          double const g = ref::gelu_derivative(a, gelu_form::tanh);
          d = x * g;
          // cuBLASLt's derivative on an H100 is off by up to 4e-5 relative (docs/validation.md):
          // a hardware tanh, whose relative error 2^-11 (PTX ISA, tanh.approx.f32) moves
          // g = 0.5(1 + t) + 0.5 a (1 - t^2) u'(a) by at most (0.5 + |a| u'(a)) 2^-11.
          double const u_prime = std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * a * a);
          double const approximate_tanh = (0.5 + std::abs(a) * u_prime) * std::ldexp(1.0, -11);
          db = xb * std::abs(g) + std::abs(x) * approximate_tanh +
               fp32_epilogue * 4.0 * (std::abs(x) + 1.0);
        }
        e.d[at] = d;
        e.d_bound[at] = db + out_u * std::abs(d);
        d_sum[i] += d;
        d_sum_bound[i] += db + gamma(c.n) * std::abs(d);
      }
    }
    if (bgrad_d) {
      e.bias_gradient = d_sum;
      e.bias_gradient_bound = d_sum_bound;
    } else if (bgrad_a || bgrad_b) {
      std::size_t const len = bgrad_a ? mm : nn;
      e.bias_gradient.assign(len, 0.0);
      e.bias_gradient_bound.assign(len, 0.0);
      for (std::size_t r = 0; r < len; ++r) {
        double sum = 0.0, magnitude = 0.0;
        for (std::size_t kk = 0; kk < kk_n; ++kk) {
          double const v = bgrad_a ? a_at(r, kk) : b_at(kk, r);
          sum += v;
          magnitude += std::abs(v);
        }
        e.bias_gradient[r] = sum;
        e.bias_gradient_bound[r] = gamma(c.k) * magnitude;
      }
    }
    for (auto& v : e.bias_gradient_bound) v += out_u * 4.0 * (1.0 + v);  // rounded to D's type

    device_buffer da{c.type, a_count}, db{c.type, b_count}, dc{c.out_type, c_count};
    device_buffer dd{c.out_type, static_cast<std::size_t>(ldc) * nn};
    device_buffer dbias{c.out_type, std::max(mm, nn)}, daux{c.out_type, aux_count};
    da.upload(e.a);
    db.upload(e.b);
    dc.upload(e.c);
    if (bias) dbias.upload(e.bias);
    if (dgelu) daux.upload(e.aux_in);
    descriptors const d = describe(c);
    void* bias_pointer = dbias.get();
    if (bias || bgrad_a || bgrad_b || bgrad_d) {
      LT_OK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer,
                                           sizeof bias_pointer));
    }
    if (aux_out || dgelu) {
      void* aux_pointer = daux.get();
      LT_OK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                           &aux_pointer, sizeof aux_pointer));
      LT_OK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                           sizeof aux_ld));
    }
    LT_OK(matmul(d, c, da.get(), db.get(), dc.get(), dd.get()));
    CUDA_OK(cudaStreamSynchronize(stream_));
    // D (only the m rows of each column; the rows beyond m up to ld stay untouched: NaN).
    auto const raw_d = dd.download();
    std::vector<double> got(mm * nn);
    for (std::size_t j = 0; j < nn; ++j) {
      for (std::size_t i = 0; i < mm; ++i)
        got[j * mm + i] = raw_d[j * static_cast<std::size_t>(ldc) + i];
      for (std::size_t i = mm; i < static_cast<std::size_t>(ldc); ++i) {
        EXPECT_TRUE(std::isnan(raw_d[j * static_cast<std::size_t>(ldc) + i]))
            << what << ": D was written beyond its rows";
      }
    }
    expect_within(got, e.d, e.d_bound, what + " D");
    EXPECT_EQ(dc.download(),
              [&] {  // C is an input only
                std::vector<double> same = e.c;
                for (auto& v : same) v = static_cast<double>(static_cast<float>(v));
                return same;
              }())
        << what << ": C changed";
    if (aux_out) {
      auto const raw_aux = daux.download();
      std::vector<double> aux(mm * nn);
      for (std::size_t j = 0; j < nn; ++j)
        for (std::size_t i = 0; i < mm; ++i)
          aux[j * mm + i] = raw_aux[j * static_cast<std::size_t>(aux_ld) + i];
      expect_within(aux, e.x, e.x_bound, what + " aux (the GELU input)");
    }
    if (!e.bias_gradient.empty()) {
      auto raw = dbias.download();
      raw.resize(e.bias_gradient.size());
      expect_within(raw, e.bias_gradient, e.bias_gradient_bound, what + " bias gradient");
    }
  }

  static constexpr std::size_t workspace_bytes_ = std::size_t{4} << 20;
  cublasLtHandle_t handle_{};
  cudaStream_t stream_{};
  void* workspace_{};
  std::vector<descriptors> made_;
};

}  // namespace

// --- the product ------------------------------------------------------------------------------

TEST_F(cublaslt_conformance, column_major_product_matches_fp64) {
  run_and_check({}, "NN");
}

TEST_F(cublaslt_conformance, transposes_with_leading_dimensions_beyond_rows) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      matmul_case c;
      c.ta = ta;
      c.tb = tb;
      c.m = 13;
      c.n = 7;
      c.k = 29;
      c.extra_ld = 5;
      run_and_check(c, std::string{ta ? "T" : "N"} + (tb ? "T" : "N") + " ld+5");
    }
  }
}

TEST_F(cublaslt_conformance, alpha_and_beta_with_c_distinct_from_d) {
  matmul_case c;
  c.alpha = -0.75F;
  c.beta = 1.5F;
  run_and_check(c, "alpha -0.75 beta 1.5");
}

// "if beta == 0, C does not have to be a valid input" (cuBLAS documentation, cublas<t>gemm): a C
// of NaN does not reach D.
TEST_F(cublaslt_conformance, beta_zero_does_not_read_c) {
  matmul_case c;
  device_buffer a{fp32, 24 * 40}, b{fp32, 40 * 16}, nan_c{fp32, 24 * 16}, d{fp32, 24 * 16};
  a.upload(std::vector<double>(24 * 40, 0.5));
  b.upload(std::vector<double>(40 * 16, 0.25));
  descriptors const desc = describe(c);
  LT_OK(matmul(desc, c, a.get(), b.get(), nan_c.get(), d.get()));
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(d.download(), std::vector<double>(24 * 16, 40 * 0.125));
}

// --- epilogues (cublasLt.h, cublasLtEpilogue_t) ----------------------------------------------

TEST_F(cublaslt_conformance, epilogue_bias_adds_a_vector_over_rows) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_BIAS;
  run_and_check(c, "BIAS");
}
TEST_F(cublaslt_conformance, epilogue_gelu_is_the_tanh_form) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_GELU;
  run_and_check(c, "GELU");
}
TEST_F(cublaslt_conformance, epilogue_gelu_bias_adds_the_bias_before_gelu) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  c.beta = 0.5F;
  run_and_check(c, "GELU_BIAS");
}
TEST_F(cublaslt_conformance, epilogue_gelu_aux_saves_the_gelu_input) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
  run_and_check(c, "GELU_AUX");
}
TEST_F(cublaslt_conformance, epilogue_gelu_aux_bias_saves_the_biased_input) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  run_and_check(c, "GELU_AUX_BIAS");
}
TEST_F(cublaslt_conformance, epilogue_dgelu_multiplies_by_the_derivative_at_aux) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_DGELU;
  run_and_check(c, "DGELU");
}
TEST_F(cublaslt_conformance, epilogue_dgelu_bgrad_sums_the_gradient_over_columns) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
  run_and_check(c, "DGELU_BGRAD");
}
TEST_F(cublaslt_conformance, epilogue_bgrada_sums_op_a_over_k) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_BGRADA;
  run_and_check(c, "BGRADA");
  c.tb = true;
  run_and_check(c, "BGRADA, B transposed");
}
TEST_F(cublaslt_conformance, epilogue_bgradb_sums_op_b_over_k) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_BGRADB;
  c.tb = true;
  run_and_check(c, "BGRADB");
}

// --- precisions -------------------------------------------------------------------------------

TEST_F(cublaslt_conformance, fp16_and_bf16_inputs_and_outputs_with_fp32_accumulation) {
  for (element t : {fp16, bf16}) {
    matmul_case c;
    c.type = c.out_type = t;
    c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    run_and_check(c, std::string{t.name} + " GELU_AUX_BIAS");
    c.out_type = fp32;  // 16-bit inputs, fp32 output
    c.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    run_and_check(c, std::string{t.name} + " in, fp32 out");
  }
}

TEST_F(cublaslt_conformance, tf32_rounds_the_inputs) {
  matmul_case c;
  c.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  c.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  run_and_check(c, "TF32 GELU_BIAS");
  // 1 + 2^-12 has bits below TF32's 10: plain fp32 keeps them, TF32 does not (rounded or
  // truncated alike, it reads 1).
  std::vector<double> const ones(8 * 8, 1.0 + std::ldexp(1.0, -12));
  matmul_case small;
  small.m = small.n = small.k = 8;
  for (auto compute : {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32}) {
    small.compute = compute;
    device_buffer a{fp32, 64}, b{fp32, 64}, d{fp32, 64};
    a.upload(ones);
    b.upload(std::vector<double>(64, 1.0));
    descriptors const desc = describe(small);
    LT_OK(matmul(desc, small, a.get(), b.get(), nullptr, d.get()));
    CUDA_OK(cudaStreamSynchronize(stream_));
    double const want = compute == CUBLAS_COMPUTE_32F ? 8.0 * (1.0 + std::ldexp(1.0, -12)) : 8.0;
    EXPECT_EQ(d.download(), std::vector<double>(64, want)) << compute;
  }
}

// --- the heuristic ----------------------------------------------------------------------------

TEST_F(cublaslt_conformance, heuristic_returns_a_runnable_algorithm_within_the_workspace) {
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_BIAS;
  descriptors const d = describe(c);
  device_buffer bias{fp32, 24};
  void* bias_pointer = bias.get();
  LT_OK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer,
                                       sizeof bias_pointer));
  cublasLtMatmulPreference_t pref = nullptr;
  LT_OK(cublasLtMatmulPreferenceCreate(&pref));
  std::uint64_t const workspace = 1 << 20;
  LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace, sizeof workspace));
  std::vector<cublasLtMatmulHeuristicResult_t> results(4);
  int found = -1;
  // "CUBLAS_STATUS_INVALID_VALUE if requestedAlgoCount is less or equal to zero".
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle_, d.op, d.a, d.b, d.c, d.d, pref, 0,
                                           results.data(), &found),
            CUBLAS_STATUS_INVALID_VALUE);
  LT_OK(cublasLtMatmulAlgoGetHeuristic(handle_, d.op, d.a, d.b, d.c, d.d, pref, 4, results.data(),
                                       &found));
  ASSERT_GE(found, 1);
  ASSERT_LE(found, 4);
  for (int i = 0; i < found; ++i) {
    EXPECT_EQ(results[static_cast<std::size_t>(i)].state, CUBLAS_STATUS_SUCCESS);
    EXPECT_LE(results[static_cast<std::size_t>(i)].workspaceSize, workspace);
  }
  LT_OK(cublasLtMatmulAlgoGetHeuristic(handle_, d.op, d.a, d.b, d.c, d.d, pref, 1, results.data(),
                                       &found));
  EXPECT_EQ(found, 1);
  device_buffer a{fp32, 24 * 40}, b{fp32, 40 * 16}, out{fp32, 24 * 16};
  a.upload(std::vector<double>(24 * 40, 1.0));
  b.upload(std::vector<double>(40 * 16, 1.0));
  bias.upload(std::vector<double>(24, 2.0));
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, workspace));
  EXPECT_EQ(cublasLtMatmul(handle_, d.op, &c.alpha, a.get(), d.a, b.get(), d.b, &c.beta, nullptr,
                           d.c, out.get(), d.d, &results[0].algo, ws, workspace, stream_),
            CUBLAS_STATUS_SUCCESS);
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(out.download(), std::vector<double>(24 * 16, 42.0));
  CUDA_OK(cudaFree(ws));
  LT_OK(cublasLtMatmulPreferenceDestroy(pref));
}

// --- refusals ---------------------------------------------------------------------------------

// "sizeInBytes doesn't match size of internal storage" and "buf is NULL": INVALID_VALUE.
TEST_F(cublaslt_conformance, attribute_of_the_wrong_size_is_invalid) {
  descriptors const d = describe({});
  std::int64_t const wide_epilogue = CUBLASLT_EPILOGUE_BIAS;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &wide_epilogue,
                                           sizeof wide_epilogue),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4),
            CUBLAS_STATUS_INVALID_VALUE);
}

// EPILOGUE_AUX_LD "must be divisible by 8 and be no less than the number of rows in the output
// matrix" (cublasLt.h). The header names no status; the simulator answers INVALID_VALUE ("if
// parameters are in conflict or in an impossible configuration") to both. An H100 with cuBLASLt
// 13.0 refuses an ld below the rows but accepts 28 (docs/validation.md): the simulator keeps
// the header's stricter rule.
TEST_F(cublaslt_conformance, aux_ld_not_divisible_by_8_or_below_rows_is_refused) {
  matmul_case c;
  c.m = 24;
  c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
  device_buffer a{fp32, 24 * 40}, b{fp32, 40 * 16}, d{fp32, 24 * 16}, aux{fp32, 64 * 16};
  for (std::int64_t aux_ld : {std::int64_t{28}, std::int64_t{16}}) {
    descriptors const desc = describe(c);
    void* aux_pointer = aux.get();
    LT_OK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                         &aux_pointer, sizeof aux_pointer));
    LT_OK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                         sizeof aux_ld));
    cublasStatus_t const s = matmul(desc, c, a.get(), b.get(), nullptr, d.get());
    if (simulated) {
      EXPECT_EQ(s, CUBLAS_STATUS_INVALID_VALUE) << "aux ld " << aux_ld;
    } else {
      EXPECT_EQ(s == CUBLAS_STATUS_SUCCESS, aux_ld >= c.m) << "aux ld " << aux_ld;
    }
  }
  CUDA_OK(cudaStreamSynchronize(stream_));
}

// What an H100 with cuBLASLt 13.0 refuses beyond cublasLt.h (docs/validation.md), alike on the
// simulator: BGRADA with op(A) = T and BGRADB with op(B) = N, DGELU_BGRAD without a workspace
// (NOT_SUPPORTED); a bias pointer for an epilogue that uses no bias (INVALID_VALUE).
TEST_F(cublaslt_conformance, epilogue_restrictions_a_gpu_enforces) {
  device_buffer a{fp32, 64 * 64}, b{fp32, 64 * 64}, d{fp32, 64 * 64}, aux{fp32, 64 * 64};
  device_buffer bias{fp32, 64};
  auto run = [&](matmul_case const& c, bool with_bias, std::size_t workspace) {
    descriptors const desc = describe(c);
    void* aux_pointer = aux.get();
    std::int64_t const aux_ld = c.m;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                             &aux_pointer, sizeof aux_pointer),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                             sizeof aux_ld),
              CUBLAS_STATUS_SUCCESS);
    if (with_bias) {
      void* bias_pointer = bias.get();
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                               &bias_pointer, sizeof bias_pointer),
                CUBLAS_STATUS_SUCCESS);
    }
    return matmul(desc, c, a.get(), b.get(), nullptr, d.get(), workspace);
  };
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_BGRADA;
  c.ta = true;
  EXPECT_EQ(run(c, true, workspace_bytes_), CUBLAS_STATUS_NOT_SUPPORTED) << "BGRADA, A transposed";
  c.ta = false;
  c.epilogue = CUBLASLT_EPILOGUE_BGRADB;
  EXPECT_EQ(run(c, true, workspace_bytes_), CUBLAS_STATUS_NOT_SUPPORTED) << "BGRADB, B as is";
  c.tb = true;
  EXPECT_EQ(run(c, true, workspace_bytes_), CUBLAS_STATUS_SUCCESS) << "BGRADB, B transposed";
  c.tb = false;
  c.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
  EXPECT_EQ(run(c, true, 0), CUBLAS_STATUS_NOT_SUPPORTED) << "DGELU_BGRAD without a workspace";
  EXPECT_EQ(run(c, true, workspace_bytes_), CUBLAS_STATUS_SUCCESS) << "DGELU_BGRAD";
  for (auto epilogue : {CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_GELU_AUX}) {
    c.epilogue = epilogue;
    EXPECT_EQ(run(c, true, workspace_bytes_), CUBLAS_STATUS_INVALID_VALUE) << "a bias unused";
    EXPECT_EQ(run(c, false, workspace_bytes_), CUBLAS_STATUS_SUCCESS) << "no bias";
  }
  CUDA_OK(cudaStreamSynchronize(stream_));
}

// The simulator's stricter readings where the documentation names no behaviour: an epilogue
// without the pointer it needs, and a bias not aligned to its element, are INVALID_VALUE.
TEST_F(cublaslt_conformance, missing_or_misaligned_epilogue_pointers_are_refused_on_the_simulator) {
  if (!simulated) GTEST_SKIP() << "the simulator's own reading; a GPU may fault instead";
  device_buffer a{fp32, 24 * 40}, b{fp32, 40 * 16}, d{fp32, 24 * 16}, bias{fp32, 32};
  for (auto ep : {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_DGELU,
                  CUBLASLT_EPILOGUE_BGRADB}) {
    matmul_case c;
    c.epilogue = ep;
    c.tb = ep == CUBLASLT_EPILOGUE_BGRADB;  // BGRADB runs only with op(B) = T
    descriptors const desc = describe(c);
    std::int64_t const aux_ld = 24;
    LT_OK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                         sizeof aux_ld));
    EXPECT_EQ(matmul(desc, c, a.get(), b.get(), nullptr, d.get()), CUBLAS_STATUS_INVALID_VALUE)
        << ep;
  }
  matmul_case c;
  c.epilogue = CUBLASLT_EPILOGUE_BIAS;
  descriptors const desc = describe(c);
  void* misaligned = static_cast<char*>(bias.get()) + 2;
  LT_OK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &misaligned,
                                       sizeof misaligned));
  EXPECT_EQ(matmul(desc, c, a.get(), b.get(), nullptr, d.get()), CUBLAS_STATUS_INVALID_VALUE);
  // Layouts that do not fit together: op(A) has k columns, op(B) another count of rows.
  matmul_case mismatched;
  descriptors const wrong = describe(mismatched);
  cublasLtMatrixLayout_t other_b = nullptr;
  LT_OK(cublasLtMatrixLayoutCreate(&other_b, CUDA_R_32F, 41, 16, 41));
  float const one = 1.0F, zero = 0.0F;
  EXPECT_EQ(cublasLtMatmul(handle_, wrong.op, &one, a.get(), wrong.a, b.get(), other_b, &zero,
                           nullptr, wrong.c, d.get(), wrong.d, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  LT_OK(cublasLtMatrixLayoutDestroy(other_b));
  // An ld below the rows: "greater or equal to CUBLASLT_MATRIX_LAYOUT_ROWS".
  cublasLtMatrixLayout_t short_ld = nullptr;
  LT_OK(cublasLtMatrixLayoutCreate(&short_ld, CUDA_R_32F, 24, 40, 20));
  EXPECT_EQ(cublasLtMatmul(handle_, wrong.op, &one, a.get(), short_ld, b.get(), wrong.b, &zero,
                           nullptr, wrong.c, d.get(), wrong.d, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  LT_OK(cublasLtMatrixLayoutDestroy(short_ld));
  // An uninitialized handle: "CUBLAS_STATUS_NOT_INITIALIZED if cuBLASLt handle has not been
  // initialized".
  EXPECT_EQ(cublasLtMatmul(nullptr, wrong.op, &one, a.get(), wrong.a, b.get(), wrong.b, &zero,
                           nullptr, wrong.c, d.get(), wrong.d, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_NOT_INITIALIZED);
}

// --- stream capture ---------------------------------------------------------------------------

// A captured matmul reads its operands when the graph runs, with the descriptor values of the
// call: changing A after the capture changes the replay's D; changing the descriptor does not.
TEST_F(cublaslt_conformance, capture_and_replay_read_inputs_at_replay) {
  matmul_case c;
  c.m = c.n = c.k = 16;
  c.epilogue = CUBLASLT_EPILOGUE_BIAS;
  device_buffer a{fp32, 256}, b{fp32, 256}, bias{fp32, 16}, d{fp32, 256};
  a.upload(std::vector<double>(256, 1.0));
  b.upload(std::vector<double>(256, 1.0));
  bias.upload(std::vector<double>(16, 1.0));
  descriptors const desc = describe(c);
  void* bias_pointer = bias.get();
  LT_OK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer,
                                       sizeof bias_pointer));
  CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  cublasStatus_t const captured = matmul(desc, c, a.get(), b.get(), nullptr, d.get());
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  ASSERT_EQ(captured, CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(std::isnan(d.download()[0])) << "a captured matmul ran at capture";
  std::size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  // One kernel node here; a GPU's algorithm may take more (split-K adds a reduction).
  if (simulated) {
    EXPECT_EQ(nodes, 1U);
  }
  EXPECT_GE(nodes, 1U);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  cublasLtEpilogue_t const plain = CUBLASLT_EPILOGUE_DEFAULT;  // after the capture: no effect
  LT_OK(
      cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof plain));
  CUDA_OK(cudaGraphLaunch(exec, stream_));
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(d.download(), std::vector<double>(256, 17.0));
  a.upload(std::vector<double>(256, 2.0));
  d.fill_nan();
  CUDA_OK(cudaGraphLaunch(exec, stream_));
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(d.download(), std::vector<double>(256, 33.0));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

// --- cuBLAS -----------------------------------------------------------------------------------

TEST_F(cublaslt_conformance, cublas_sgemm_on_its_stream) {
  cublasHandle_t blas = nullptr;
  ASSERT_EQ(cublasCreate(&blas), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(blas, stream_), CUBLAS_STATUS_SUCCESS);
  device_buffer a{fp32, 6}, b{fp32, 6}, c{fp32, 4};
  a.upload({1, 2, 3, 4, 5, 6});  // A 2x3 column-major: [[1,3,5],[2,4,6]]
  b.upload({1, 0, 1, 0, 1, 1});  // B 3x2: [[1,0],[0,1],[1,1]]
  c.upload({1, 1, 1, 1});
  float const alpha = 1.0F, beta = 2.0F;
  ASSERT_EQ(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha,
                        static_cast<float const*>(a.get()), 2, static_cast<float const*>(b.get()),
                        3, &beta, static_cast<float*>(c.get()), 2),
            CUBLAS_STATUS_SUCCESS);
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(c.download(), (std::vector<double>{8, 10, 10, 12}));
  // "lda < max(1, m)": INVALID_VALUE (cuBLAS documentation, cublas<t>gemm).
  EXPECT_EQ(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha,
                        static_cast<float const*>(a.get()), 1, static_cast<float const*>(b.get()),
                        3, &beta, static_cast<float*>(c.get()), 2),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasDestroy(blas), CUBLAS_STATUS_SUCCESS);
}
