// Layer norm forward and backward and the residual add on the GPU against the fp64 reference of
// ops/reference.hpp, for fp32, fp16 and bf16 storage: widths that are not multiples of the warp
// or the 16-byte vector (40, 77, 300, 517), GPT-2's 768 with few rows, rows too wide for
// registers (1100), a misaligned operand (the scalar path), many row slices; outputs poisoned
// with NaN before each run; dx accumulated onto a residual gradient; the same bytes on a second
// run, with more workspace, and from a captured graph.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/layer_norm.hpp>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/captured_graph.hpp"
#include "common/error_message.hpp"
#include "common/gpu_test.hpp"
#include "common/stream_test.hpp"
#include "common/typed_device_values.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace ref = graphstep::ops::reference;
using gs::testing::captured_graph;
using gs::testing::device_values;
using gs::testing::error_of;
using gs::testing::random_values;
using gs::testing::unit_roundoff;

namespace {

// Rows spread over [−2.5, 2.5] around means up to ±10, so the mean matters.
std::vector<double> random_rows(std::size_t m, std::size_t n, std::mt19937& rng) {
  auto v = random_values(m * n, rng, -2.5, 2.5);
  auto const offsets = random_values(m, rng, -10.0, 10.0);
  for (std::size_t i = 0; i < m * n; ++i) v[i] += offsets[i / n];
  return v;
}

// Each stored result is rounded once, off by at most u = unit_roundoff(type) relative to itself,
// so rounding alone gives a relative Frobenius error of at most u (measured: about 0.4·u for fp16
// and bf16). Plus the fp32 arithmetic before that rounding: the row sums (up to 35 terms per
// lane, then 5 shuffle levels) and the column sums of dγ and dβ (up to 9 rows per warp, 8 warps,
// 9 slices), each addition off by up to 2^-24 of its running magnitude: at most about 1e-6
// relative here (measured: below 6e-7 in fp32). 1e-5 leaves room for that without hiding a wrong
// or missing term, which is off by 1e-2 or more.
double bound(gs::dtype type) {
  return unit_roundoff(type) + 1e-5;
}

float const epsilon = 1e-5F;

struct shape {
  std::size_t m;
  std::size_t n;
};
std::string name_of(gs::dtype type, shape s, char const* what = "") {
  return std::string{gs::name(type)} + " " + std::to_string(s.m) + "x" + std::to_string(s.n) + what;
}

// One problem's buffers on the device, inputs uploaded (rounded to the storage type).
struct layer_norm_problem {
  layer_norm_problem(gs::dtype t, shape s, std::mt19937& rng, std::size_t x_offset = 0)
      : type{t},
        size{s},
        x{t, s.m * s.n, x_offset},
        gamma{t, s.n},
        beta{t, s.n},
        y{t, s.m * s.n},
        mean{gs::dtype::float32, s.m},
        rstd{gs::dtype::float32, s.m},
        dy{t, s.m * s.n},
        dx{t, s.m * s.n},
        dgamma{t, s.n},
        dbeta{t, s.n},
        workspace_bytes{go::layer_norm_backward_workspace_size(m(), n())},
        workspace{gs::dtype::float32, workspace_bytes / sizeof(float)} {
    hx = x.upload(random_rows(s.m, s.n, rng));
    hgamma = gamma.upload(random_values(s.n, rng, 0.5, 1.5));
    hbeta = beta.upload(random_values(s.n, rng, -0.5, 0.5));
    hdy = dy.upload(random_values(s.m * s.n, rng));
  }
  [[nodiscard]] std::int64_t m() const { return static_cast<std::int64_t>(size.m); }
  [[nodiscard]] std::int64_t n() const { return static_cast<std::int64_t>(size.n); }

  void forward(gs::cuda::stream_view stream) const {
    go::launch_layer_norm_forward(y.span(), mean.span(), rstd.span(), x.span(), gamma.span(),
                                  beta.span(), m(), n(), epsilon, stream);
  }
  void backward(bool accumulate, gs::cuda::stream_view stream) const {
    backward_with(workspace.get(), workspace_bytes, accumulate, stream);
  }
  void backward_with(void* space, std::size_t bytes, bool accumulate,
                     gs::cuda::stream_view stream) const {
    go::launch_layer_norm_backward(dx.span(), dgamma.span(), dbeta.span(), dy.span(), x.span(),
                                   gamma.span(), mean.span(), rstd.span(), m(), n(), accumulate,
                                   space, bytes, stream);
  }

  gs::dtype type;
  shape size;
  device_values x, gamma, beta, y, mean, rstd, dy, dx, dgamma, dbeta;
  std::size_t workspace_bytes;
  device_values workspace;
  std::vector<double> hx, hgamma, hbeta, hdy;
};

class layer_norm_gpu : public gs::testing::stream_test,
                       public ::testing::WithParamInterface<gs::dtype> {
 protected:
  [[nodiscard]] gs::cuda::stream_view stream() const { return stream_->view(); }
};

using layer_norm_gpu_fp32 = gs::testing::stream_test;

// Widths not a multiple of 32 or of the vector (40, 77), GPT-2's 768 with few rows, a single
// column, rows beyond the registers (1100: re-read from memory), 70 rows (9 row slices).
constexpr std::array<shape, 6> forward_shapes{
    {{5, 40}, {3, 77}, {4, 768}, {3, 1}, {3, 1100}, {70, 40}}};
// As above, plus 300 (vectorized in fp32, scalar and too wide for registers in fp16/bf16) and
// 517 over 37 rows (scalar, wide, 5 slices).
constexpr std::array<shape, 7> backward_shapes{
    {{5, 40}, {3, 77}, {4, 768}, {3, 1100}, {70, 40}, {20, 300}, {37, 517}}};

}  // namespace

TEST_P(layer_norm_gpu, forward_matches_the_reference) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{31};
  for (shape const s : forward_shapes) {
    for (std::size_t offset : {std::size_t{0}, gs::size_in_bytes(type)}) {
      if (offset != 0 && s.n != 768) continue;  // one misaligned x: the scalar path at 768
      std::string const what = name_of(type, s, offset != 0 ? " misaligned" : "");
      layer_norm_problem p{type, s, rng, offset};
      p.forward(stream());
      sync();
      auto const want = ref::layer_norm(p.hx, p.hgamma, p.hbeta, s.m, s.n, epsilon);
      EXPECT_LT(error_of(p.y.download(), want.y), bound(type)) << what;
      // Saved in fp32 whatever the storage type: only the fp32 arithmetic.
      EXPECT_LT(error_of(p.mean.download(), want.mean), bound(gs::dtype::float32)) << what;
      EXPECT_LT(error_of(p.rstd.download(), want.rstd), bound(gs::dtype::float32)) << what;
    }
  }
}

// Rows around 1000 spread over ±1, in fp32: E[x²] ≈ 1e6 has an ulp of 0.0625, so a one-pass
// E[x²] − E[x]² would lose the variance (1/3) entirely (checked below on the host in fp32). Two
// passes lose only the fp32 error of the mean: ≈ 1000·2^-24 per addition, a few 1e-5 relative to
// the spread over the 29 additions of a lane's share of 768 and the shuffles; bound 1e-3.
TEST_F(layer_norm_gpu_fp32, forward_keeps_the_variance_of_rows_far_from_zero) {
  std::mt19937 rng{37};
  for (shape const s : {shape{4, 768}, shape{5, 77}}) {
    std::string const what = name_of(gs::dtype::float32, s);
    device_values x{gs::dtype::float32, s.m * s.n};
    device_values gamma{gs::dtype::float32, s.n};
    device_values beta{gs::dtype::float32, s.n};
    device_values y{gs::dtype::float32, s.m * s.n};
    device_values mean{gs::dtype::float32, s.m};
    device_values rstd{gs::dtype::float32, s.m};
    auto values = random_values(s.m * s.n, rng);
    for (auto& v : values) v += 1000.0;
    auto const hx = x.upload(values);
    auto const hgamma = gamma.upload(std::vector<double>(s.n, 1.0));
    auto const hbeta = beta.upload(std::vector<double>(s.n, 0.0));
    go::launch_layer_norm_forward(y.span(), mean.span(), rstd.span(), x.span(), gamma.span(),
                                  beta.span(), static_cast<std::int64_t>(s.m),
                                  static_cast<std::int64_t>(s.n), epsilon, stream_->view());
    stream_->synchronize();
    auto const want = ref::layer_norm(hx, hgamma, hbeta, s.m, s.n, epsilon);
    EXPECT_LT(error_of(y.download(), want.y), 1e-3) << what;
    EXPECT_LT(error_of(rstd.download(), want.rstd), 1e-3) << what;
    // The one-pass formula in fp32 on the same row misses the variance by far more.
    float sum = 0.0F;
    float squares = 0.0F;
    for (std::size_t j = 0; j < s.n; ++j) {
      auto const v = static_cast<float>(hx[j]);
      sum += v;
      squares += v * v;
    }
    float const m1 = sum / static_cast<float>(s.n);
    double const one_pass = squares / static_cast<float>(s.n) - m1 * m1;
    double const variance = 1.0 / (want.rstd[0] * want.rstd[0]) - epsilon;
    EXPECT_GT(std::fabs(one_pass - variance) / variance, 0.1) << what;
  }
}

TEST_P(layer_norm_gpu, backward_matches_the_reference_and_accumulates_into_dx) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{32};
  for (shape const s : backward_shapes) {
    std::string const what = name_of(type, s);
    layer_norm_problem p{type, s, rng};
    p.forward(stream());
    p.backward(false, stream());
    sync();
    auto const want = ref::layer_norm_backward(p.hdy, p.hx, p.hgamma, s.m, s.n, epsilon);
    EXPECT_LT(error_of(p.dx.download(), want.dx), bound(type)) << what << " dx";
    EXPECT_LT(error_of(p.dgamma.download(), want.dgamma), bound(type)) << what << " dgamma";
    EXPECT_LT(error_of(p.dbeta.download(), want.dbeta), bound(type)) << what << " dbeta";

    // Onto a residual gradient already in dx: dx = residual + the gradient, rounded once.
    auto const residual = p.dx.upload(random_values(s.m * s.n, rng));
    p.dgamma.poison();
    p.dbeta.poison();
    p.backward(true, stream());
    sync();
    auto sum = want.dx;
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += residual[i];
    EXPECT_LT(error_of(p.dx.download(), sum), bound(type)) << what << " accumulated dx";
    // Far from the gradient alone: the residual was really added.
    EXPECT_GT(error_of(p.dx.download(), want.dx), 0.1) << what << " accumulated dx";
    EXPECT_LT(error_of(p.dgamma.download(), want.dgamma), bound(type)) << what << " dgamma";
    EXPECT_LT(error_of(p.dbeta.download(), want.dbeta), bound(type)) << what << " dbeta";
  }
}

// The same bits on a second run, and with more workspace than needed (the row slices depend on
// M and the device only).
TEST_P(layer_norm_gpu, results_are_bitwise_reproducible) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{33};
  for (shape const s : {shape{70, 40}, shape{4, 768}, shape{37, 517}}) {
    std::string const what = name_of(type, s);
    layer_norm_problem p{type, s, rng};
    p.forward(stream());
    p.backward(false, stream());
    sync();
    auto const y = p.y.raw();
    auto const mean = p.mean.raw();
    auto const rstd = p.rstd.raw();
    auto const dx = p.dx.raw();
    auto const dgamma = p.dgamma.raw();
    auto const dbeta = p.dbeta.raw();
    for (device_values* out : {&p.y, &p.mean, &p.rstd, &p.dx, &p.dgamma, &p.dbeta}) out->poison();
    device_values larger{gs::dtype::float32, p.workspace_bytes / sizeof(float) * 2 + 64};
    larger.poison();
    p.forward(stream());
    p.backward_with(larger.get(), larger.bytes(), false, stream());
    sync();
    EXPECT_EQ(p.y.raw(), y) << what;
    EXPECT_EQ(p.mean.raw(), mean) << what;
    EXPECT_EQ(p.rstd.raw(), rstd) << what;
    EXPECT_EQ(p.dx.raw(), dx) << what;
    EXPECT_EQ(p.dgamma.raw(), dgamma) << what;
    EXPECT_EQ(p.dbeta.raw(), dbeta) << what;
  }
}

// A pre-norm block's pieces captured on a non-blocking stream: forward, the residual add in
// place, the backward accumulating into dx. Replays give the bytes of the eager run.
TEST_P(layer_norm_gpu, launchers_are_capturable_and_replay_the_eager_bytes) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{34};
  shape const s{20, 77};
  layer_norm_problem p{type, s, rng};
  device_values residual{type, s.m * s.n};
  auto const h_residual = random_values(s.m * s.n, rng);
  auto const h_dx = random_values(s.m * s.n, rng);
  auto const run = [&] {
    p.forward(stream());
    go::launch_add(residual.span(), residual.span(), p.y.span(), stream());
    p.backward(true, stream());
  };
  auto const reset = [&] {
    for (device_values* out : {&p.y, &p.mean, &p.rstd, &p.dgamma, &p.dbeta}) out->poison();
    static_cast<void>(residual.upload(h_residual));
    static_cast<void>(p.dx.upload(h_dx));
  };
  reset();
  run();
  sync();
  std::vector<std::vector<unsigned char>> eager;
  for (device_values const* out : {&residual, &p.y, &p.mean, &p.rstd, &p.dx, &p.dgamma, &p.dbeta}) {
    eager.push_back(out->raw());
  }
  captured_graph const graph{stream_->get(), run};
  for (int replay = 0; replay < 2; ++replay) {
    reset();
    graph.replay(stream_->get());
    std::size_t k = 0;
    for (device_values const* out :
         {&residual, &p.y, &p.mean, &p.rstd, &p.dx, &p.dgamma, &p.dbeta}) {
      EXPECT_EQ(out->raw(), eager[k]) << "output " << k << ", replay " << replay;
      ++k;
    }
  }
}

// out = a + b in fp32 rounded once: the host computes the same float sum and rounding, so the
// result is exact. Odd counts (the scalar tail), out = a, out = b, a misaligned operand.
TEST_P(layer_norm_gpu, add_is_the_rounded_fp32_sum_in_place_or_not) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{35};
  for (std::size_t count : {std::size_t{1}, std::size_t{13}, std::size_t{1001}}) {
    for (std::size_t offset : {std::size_t{0}, gs::size_in_bytes(type)}) {
      std::string const what = std::string{gs::name(type)} + " count " + std::to_string(count) +
                               (offset != 0 ? " misaligned" : "");
      device_values a{type, count, offset};
      device_values b{type, count};
      device_values out{type, count};
      auto const ha = a.upload(random_values(count, rng, -4.0, 4.0));
      auto const hb = b.upload(random_values(count, rng, -4.0, 4.0));
      std::vector<double> sums(count);
      for (std::size_t i = 0; i < count; ++i) {
        sums[i] = static_cast<float>(ha[i]) + static_cast<float>(hb[i]);
      }
      device_values expected{type, count};
      auto const want = expected.upload(sums);  // rounded to the storage type as the GPU does
      go::launch_add(out.span(), a.span(), b.span(), stream());
      sync();
      EXPECT_EQ(out.download(), want) << what;
      go::launch_add(a.span(), a.span(), b.span(), stream());  // out = a
      sync();
      EXPECT_EQ(a.download(), want) << what << " in place of a";
      static_cast<void>(a.upload(ha));
      go::launch_add(b.span(), a.span(), b.span(), stream());  // out = b
      sync();
      EXPECT_EQ(b.download(), want) << what << " in place of b";
    }
  }
}

TEST_P(layer_norm_gpu, backward_refuses_too_little_workspace) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{36};
  shape const s{70, 40};
  layer_norm_problem p{type, s, rng};
  p.forward(stream());
  std::string const message = gs::testing::message_of([&] {
    p.backward_with(p.workspace.get(), p.workspace_bytes - sizeof(float), false, stream());
  });
  EXPECT_TRUE(gs::testing::contains(message, "too little workspace")) << message;
  EXPECT_TRUE(gs::testing::contains(message, "layer_norm_backward_workspace_size")) << message;
  EXPECT_TRUE(gs::testing::contains(message, std::to_string(p.workspace_bytes))) << message;
}

INSTANTIATE_TEST_SUITE_P(types, layer_norm_gpu,
                         ::testing::Values(gs::dtype::float32, gs::dtype::float16,
                                           gs::dtype::bfloat16),
                         [](auto const& info) { return std::string{gs::name(info.param)}; });

// The workspace holds fp32 sums of dγ and dβ for each row slice: a whole number of 2·N floats,
// one slice for a single row, more slices (up to about two per SM) as rows are added, never
// more than one per 8 rows.
using layer_norm_workspace = gs::testing::gpu_test;

TEST_F(layer_norm_workspace, counts_whole_row_slices) {
  for (std::int64_t n : {1, 40, 768}) {
    std::size_t const slice = 2 * static_cast<std::size_t>(n) * sizeof(float);
    EXPECT_EQ(go::layer_norm_backward_workspace_size(1, n), slice);
    EXPECT_EQ(go::layer_norm_backward_workspace_size(8, n), slice);
    EXPECT_EQ(go::layer_norm_backward_workspace_size(9, n), 2 * slice);
    std::size_t previous = 0;
    for (std::int64_t m : {1, 7, 70, 700, 7000, 70000}) {
      std::size_t const bytes = go::layer_norm_backward_workspace_size(m, n);
      EXPECT_EQ(bytes % slice, 0U) << m;
      EXPECT_LE(bytes / slice, static_cast<std::size_t>((m + 7) / 8)) << m;
      EXPECT_GE(bytes, previous) << m;
      previous = bytes;
    }
  }
}
