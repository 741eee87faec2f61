// The fused layer against the fp64 reference, for every precision and many shapes; the
// unfused path; capture and replay; one kernel node for the fused forward.

#include "common/gpu_test.hpp"

#include <graphstep/graphstep.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/ops/reference.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace ref = graphstep::ops::reference;

namespace {

double tolerance(go::precision p) {
  switch (p) {
    case go::precision::fp32: return 1e-5;
    case go::precision::tf32: return 5e-4;
    default: return 1e-2;
  }
}

// Device storage of a host matrix in a precision; values are rounded to it on upload so the
// reference sees exactly what the GPU sees.
class device_matrix {
 public:
  device_matrix(gs::memory_pool& pool, gs::stream_view stream, go::precision p, std::size_t n)
      : pool_{&pool}, stream_{stream}, type_{p}, n_{n} {
    data_ = pool.allocate(std::max<std::size_t>(n, 1) * go::element_bytes(p), stream);
    poison();
  }
  ~device_matrix() { pool_->deallocate(data_, stream_); }
  device_matrix(device_matrix const&) = delete;
  device_matrix& operator=(device_matrix const&) = delete;

  void* get() const { return data_; }
  // NaN everywhere, so an output the GPU never wrote shows up.
  void poison() {
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(data_, 0xFF, n_ * go::element_bytes(type_),
                                       stream_.value()));
  }
  std::vector<double> upload(std::vector<double> values) {
    std::vector<unsigned char> bytes(n_ * go::element_bytes(type_));
    for (std::size_t i = 0; i < n_; ++i) {
      float const f = static_cast<float>(values[i]);
      if (type_ == go::precision::fp16) {
        __half const h = __float2half(f);
        values[i] = __half2float(h);
        std::memcpy(&bytes[i * 2], &h, 2);
      } else if (type_ == go::precision::bf16) {
        __nv_bfloat16 const h = __float2bfloat16(f);
        values[i] = __bfloat162float(h);
        std::memcpy(&bytes[i * 2], &h, 2);
      } else {
        values[i] = f;
        std::memcpy(&bytes[i * 4], &f, 4);
      }
    }
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice,
                                       stream_.value()));
    stream_.synchronize();
    return values;
  }
  std::vector<double> download() const {
    std::vector<unsigned char> bytes(n_ * go::element_bytes(type_));
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost,
                                       stream_.value()));
    stream_.synchronize();
    std::vector<double> values(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      if (type_ == go::precision::fp16) {
        __half h;
        std::memcpy(&h, &bytes[i * 2], 2);
        values[i] = __half2float(h);
      } else if (type_ == go::precision::bf16) {
        __nv_bfloat16 h;
        std::memcpy(&h, &bytes[i * 2], 2);
        values[i] = __bfloat162float(h);
      } else {
        float f;
        std::memcpy(&f, &bytes[i * 4], 4);
        values[i] = f;
      }
    }
    return values;
  }

 private:
  gs::memory_pool* pool_;
  gs::stream_view stream_;
  go::precision type_;
  std::size_t n_;
  void* data_;
};

std::vector<double> random(std::size_t n, std::mt19937& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> dist{-scale, scale};
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

class gemm_gelu_test : public gs::testing::gpu_test,
                       public ::testing::WithParamInterface<go::precision> {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
    pool_.emplace();
    handle_.emplace();
    workspace_bytes_ = go::gemm_plan::workspace_size();
    workspace_ = pool_->allocate(workspace_bytes_, *stream_);
  }
  go::gemm_plan plan(go::gemm_problem const& p, go::gemm_operands const& o,
                     go::gemm_options const& options = {}) {
    return go::gemm_plan{*handle_, p, o, workspace_, workspace_bytes_, options, *stream_};
  }
  std::optional<gs::stream> stream_;
  std::optional<gs::memory_pool> pool_;
  std::optional<go::cublaslt_handle> handle_;
  void* workspace_{};
  std::size_t workspace_bytes_{};
};

}  // namespace

TEST_P(gemm_gelu_test, forward_matches_the_reference_on_many_shapes) {
  go::precision const type = GetParam();
  std::mt19937 rng{21};
  for (auto [m, n, k] : {std::tuple{64, 128, 256}, std::tuple{640, 2048, 512},
                         std::tuple{33, 64, 72}, std::tuple{17, 40, 24},
                         std::tuple{31, 13, 19}}) {
    std::size_t const M = m, N = n, K = k;
    device_matrix x{*pool_, *stream_, type, M * K}, w{*pool_, *stream_, type, N * K};
    device_matrix b{*pool_, *stream_, type, N}, y{*pool_, *stream_, type, M * N};
    device_matrix z{*pool_, *stream_, type, M * N};
    auto const hx = x.upload(random(M * K, rng));
    auto const hw = w.upload(random(N * K, rng, 1.0 / std::sqrt(double(K))));
    auto const hb = b.upload(random(N, rng));
    go::gemm_problem const problem{go::gemm_kind::forward_bias_gelu, m, n, k, type};
    go::gemm_operands const operands{x.get(), w.get(), y.get(), b.get(), z.get(), nullptr};
    bool const fusable = go::gemm_plan::can_implement(problem, operands).fused;
    if (!fusable) {
      EXPECT_THROW(plan(problem, operands), gs::usage_error) << m << "x" << n << "x" << k;
    }
    go::gemm_options options;
    options.allow_unfused = true;
    auto const p = plan(problem, operands, options);
    EXPECT_EQ(p.fused(), fusable);
    stream_->synchronize();
    auto pre = ref::matmul_abt(hx, hw, M, N, K);
    for (std::size_t i = 0; i < M * N; ++i) pre[i] += hb[i % N];
    std::vector<double> want(M * N);
    for (std::size_t i = 0; i < M * N; ++i) want[i] = ref::gelu(pre[i], go::gelu_form::tanh);
    EXPECT_LT(ref::relative_error(y.download(), want), tolerance(type))
        << go::name(type) << " " << m << "x" << n << "x" << k;
    EXPECT_LT(ref::relative_error(z.download(), pre), tolerance(type));
  }
}

TEST_P(gemm_gelu_test, backward_through_two_layers_matches_the_reference) {
  go::precision const type = GetParam();
  std::mt19937 rng{22};
  std::size_t const M = 96, K = 64, N1 = 128, N2 = 32;  // X[M,K] -> fc1 N1 -> GELU -> fc2 N2
  device_matrix z1{*pool_, *stream_, type, M * N1}, w2{*pool_, *stream_, type, N2 * N1};
  device_matrix dy2{*pool_, *stream_, type, M * N2}, y1{*pool_, *stream_, type, M * N1};
  device_matrix x{*pool_, *stream_, type, M * K}, w1{*pool_, *stream_, type, N1 * K};
  device_matrix dz1{*pool_, *stream_, type, M * N1}, db1{*pool_, *stream_, type, N1};
  device_matrix dw2{*pool_, *stream_, type, N2 * N1}, db2{*pool_, *stream_, type, N2};
  device_matrix dw1{*pool_, *stream_, type, N1 * K}, dx{*pool_, *stream_, type, M * K};
  auto const hz1 = z1.upload(random(M * N1, rng, 2.0));
  auto const hw2 = w2.upload(random(N2 * N1, rng, 0.2));
  auto const hdy2 = dy2.upload(random(M * N2, rng));
  std::vector<double> gelu_z1(M * N1);
  for (std::size_t i = 0; i < M * N1; ++i) gelu_z1[i] = ref::gelu(hz1[i], go::gelu_form::tanh);
  auto const hy1 = y1.upload(gelu_z1);
  auto const hx = x.upload(random(M * K, rng));
  auto const hw1 = w1.upload(random(N1 * K, rng, 0.2));
  go::gemm_options options;
  options.allow_unfused = true;
  // fc2: dW2 and db2 in one GEMM.
  int const m = static_cast<int>(M);
  auto const wgrad2 = plan({go::gemm_kind::backward_weight_bias, m, int(N2), int(N1), type},
                           {dy2.get(), y1.get(), dw2.get(), nullptr, nullptr, db2.get()}, options);
  // Into fc1 through GELU: dZ1 and db1 in one GEMM.
  auto const dgrad = plan({go::gemm_kind::backward_data_gelu, m, int(N2), int(N1), type},
                          {dy2.get(), w2.get(), dz1.get(), nullptr, z1.get(), db1.get()}, options);
  // fc1: dW1 and dX.
  auto const wgrad1 = plan({go::gemm_kind::backward_weight, m, int(N1), int(K), type},
                           {dz1.get(), x.get(), dw1.get(), nullptr, nullptr, nullptr}, options);
  auto const dgrad1 = plan({go::gemm_kind::backward_data, m, int(N1), int(K), type},
                           {dz1.get(), w1.get(), dx.get(), nullptr, nullptr, nullptr}, options);
  stream_->synchronize();
  auto const want_dw2 = ref::matmul_atb(hdy2, hy1, M, N2, N1);
  auto const want_db2 = ref::column_sums(hdy2, M, N2);
  auto want_dz1 = ref::matmul_ab(hdy2, hw2, M, N1, N2);
  for (std::size_t i = 0; i < M * N1; ++i) {
    want_dz1[i] *= ref::gelu_derivative(hz1[i], go::gelu_form::tanh);
  }
  auto const want_db1 = ref::column_sums(want_dz1, M, N1);
  double const tol = tolerance(type);
  EXPECT_LT(ref::relative_error(dw2.download(), want_dw2), tol);
  EXPECT_LT(ref::relative_error(db2.download(), want_db2), tol);
  EXPECT_LT(ref::relative_error(dz1.download(), want_dz1), tol);
  EXPECT_LT(ref::relative_error(db1.download(), want_db1), tol);
  auto const got_dz1 = dz1.download();  // what the GPU fed into fc1's gradients
  EXPECT_LT(ref::relative_error(dw1.download(), ref::matmul_atb(got_dz1, hx, M, N1, K)), tol);
  EXPECT_LT(ref::relative_error(dx.download(), ref::matmul_ab(got_dz1, hw1, M, K, N1)), tol);

  // The whole backward captured and replayed gives the eager results.
  std::vector<std::vector<double>> eager;
  for (device_matrix* out : {&dw2, &db2, &dz1, &db1, &dw1, &dx}) eager.push_back(out->download());
  gs::graph g;
  gs::capture(g, *stream_, [&] {
    wgrad2.run(*stream_);
    dgrad.run(*stream_);
    wgrad1.run(*stream_);
    dgrad1.run(*stream_);
  });
  for (device_matrix* out : {&dw2, &db2, &dz1, &db1, &dw1, &dx}) out->poison();
  g.replay(*stream_);
  std::size_t i = 0;
  for (device_matrix* out : {&dw2, &db2, &dz1, &db1, &dw1, &dx}) {
    EXPECT_EQ(out->download(), eager[i++]) << "output " << i;
  }
}

TEST_P(gemm_gelu_test, fused_equals_unfused_and_erf_runs_unfused) {
  go::precision const type = GetParam();
  std::mt19937 rng{23};
  int const m = 128, n = 256, k = 192;
  device_matrix x{*pool_, *stream_, type, size_t(m) * k}, w{*pool_, *stream_, type, size_t(n) * k};
  device_matrix b{*pool_, *stream_, type, size_t(n)};
  device_matrix y1{*pool_, *stream_, type, size_t(m) * n}, z1{*pool_, *stream_, type, size_t(m) * n};
  device_matrix y2{*pool_, *stream_, type, size_t(m) * n}, z2{*pool_, *stream_, type, size_t(m) * n};
  static_cast<void>(x.upload(random(size_t(m) * k, rng)));
  static_cast<void>(w.upload(random(size_t(n) * k, rng, 0.1)));
  static_cast<void>(b.upload(random(size_t(n), rng)));
  go::gemm_problem const problem{go::gemm_kind::forward_bias_gelu, m, n, k, type};
  auto const fused = plan(problem, {x.get(), w.get(), y1.get(), b.get(), z1.get(), nullptr});
  go::gemm_options unfused_options;
  unfused_options.force_unfused = true;
  auto const unfused =
      plan(problem, {x.get(), w.get(), y2.get(), b.get(), z2.get(), nullptr}, unfused_options);
  EXPECT_TRUE(fused.fused());
  EXPECT_FALSE(unfused.fused());
  EXPECT_LT(ref::relative_error(y2.download(), y1.download()), tolerance(type));
  go::gemm_options erf;
  erf.form = go::gelu_form::erf;
  auto const exact = plan(problem, {x.get(), w.get(), y2.get(), b.get(), z2.get(), nullptr}, erf);
  EXPECT_FALSE(exact.fused());
  EXPECT_NE(exact.unfused_reason().find("tanh form"), std::string::npos);
}

TEST_P(gemm_gelu_test, captured_forward_is_one_kernel_and_replay_equals_eager) {
  go::precision const type = GetParam();
  std::mt19937 rng{24};
  int const m = 64, n = 128, k = 128;
  device_matrix x{*pool_, *stream_, type, size_t(m) * k}, w{*pool_, *stream_, type, size_t(n) * k};
  device_matrix b{*pool_, *stream_, type, size_t(n)};
  device_matrix y{*pool_, *stream_, type, size_t(m) * n}, z{*pool_, *stream_, type, size_t(m) * n};
  static_cast<void>(x.upload(random(size_t(m) * k, rng)));
  static_cast<void>(w.upload(random(size_t(n) * k, rng, 0.1)));
  static_cast<void>(b.upload(random(size_t(n), rng)));
  auto const p = plan({go::gemm_kind::forward_bias_gelu, m, n, k, type},
                      {x.get(), w.get(), y.get(), b.get(), z.get(), nullptr});
  auto const eager = y.download();
  gs::graph g;
  gs::capture(g, *stream_, [&] { p.run(*stream_); });
  auto const counts = g.node_counts();
  EXPECT_EQ(counts.kernel, 1U) << "the fused forward should be a single kernel";
  y.poison();
  g.replay(*stream_);
  EXPECT_EQ(y.download(), eager);
  EXPECT_THROW(gs::capture(g, *stream_, [] {}), gs::usage_error);
  gs::graph planning;
  EXPECT_THROW(gs::capture(planning, *stream_, [&] {
                 static_cast<void>(plan({go::gemm_kind::forward, m, n, k, type},
                                        {x.get(), w.get(), y.get(), nullptr, nullptr, nullptr}));
               }),
               gs::usage_error);
}

TEST_P(gemm_gelu_test, missing_operands_are_usage_errors) {
  go::precision const type = GetParam();
  device_matrix x{*pool_, *stream_, type, 64 * 64};
  EXPECT_THROW(plan({go::gemm_kind::forward_bias_gelu, 64, 64, 64, type},
                    {x.get(), x.get(), x.get(), nullptr, x.get(), nullptr}),
               gs::usage_error);
  EXPECT_THROW(plan({go::gemm_kind::backward_weight_bias, 64, 64, 64, type},
                    {x.get(), x.get(), x.get(), nullptr, nullptr, nullptr}),
               gs::usage_error);
}

INSTANTIATE_TEST_SUITE_P(precisions, gemm_gelu_test,
                         ::testing::Values(go::precision::fp32, go::precision::tf32,
                                           go::precision::fp16, go::precision::bf16),
                         [](auto const& info) { return std::string{go::name(info.param)}; });
