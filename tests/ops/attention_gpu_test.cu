// Causal attention on the GPU (ops/attention.hpp) against the fp64 reference of
// ops/reference.hpp, for fp32, fp16 and bf16 storage: shapes whose sequence is not a multiple of
// any tile (T = 1, 7, 33, 70), 1 to 4 heads, head dimensions 8 to 256 (8, 24 and 48 padded
// inside the kernels), outputs and workspace poisoned with NaN before each run; scores large
// enough to overflow exp without the running maximum; the same bits on every run; capture and
// replay against eager. Capture uses the plain CUDA calls so that this test depends only on the
// op itself.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/attention.hpp>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/captured_graph.hpp"
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

// Bounds on the relative Frobenius error, from the arithmetic and the storage type.
//
// fp32 arithmetic: the kernels form dot products over D, sums over at most T keys or queries,
// exp2f (2 ulp) and one division or log per row; a sum of n terms errs by at most about n·2^-24
// relative to its terms, so (D + T + 16)·2^-24 bounds it (the 16 for exp2f, the scaling and the
// final division). Where scores reach a magnitude S, the exponent carries an absolute error of
// about S·2^-24, which is the relative error of exp: 2·S·2^-24 more. That is the whole error in
// fp32 and in logsumexp (fp32, from the rounded inputs the reference also sees).
//
// 16-bit outputs add their own rounding: at most u per element, so at most u in the norm.
//
// The backward subtracts nearly equal terms (dP − delta, and Σ dS·k over a row of dS that sums
// to zero), which can lift the arithmetic's relative error about tenfold. In 16 bits delta =
// Σ dout·out also uses the rounded out of the forward (u·Σ|dout·out|), which reaches dq and dk
// through dS: about u more beside the gradient's own rounding, 2u in all.
struct bounds {
  double out, logsumexp, gradient;
};

bounds bounds_for(gs::dtype type, std::int64_t sequence, std::int64_t head_dim,
                  double largest_score = 0.0) {
  double const arithmetic =
      (static_cast<double>(head_dim + sequence) + 16.0 + 2.0 * largest_score) *
      std::ldexp(1.0, -24);
  double const storage = type == gs::dtype::float32 ? 0.0 : unit_roundoff(type);
  return {arithmetic + storage, arithmetic, 10 * arithmetic + 2 * storage};
}

struct shape_case {
  std::int64_t batch, sequence, heads, head_dim;
};

std::string describe(gs::dtype type, shape_case const& s) {
  return std::string{gs::name(type)} + " B=" + std::to_string(s.batch) +
         " T=" + std::to_string(s.sequence) + " H=" + std::to_string(s.heads) +
         " D=" + std::to_string(s.head_dim);
}

// T = 1 and T not a multiple of any tile (the tiles are 8 to 64 rows); every padded head
// dimension (8 → 16, 24 → 32, 48 → 64) and every instantiation (16, 32, 64, 128, 256).
// B·H·T²·D stays under 1e6 for the simulated device.
std::array<shape_case, 9> constexpr shapes{{{1, 1, 1, 8},
                                            {2, 7, 3, 8},
                                            {1, 33, 2, 16},
                                            {3, 5, 4, 24},
                                            {1, 70, 1, 32},
                                            {2, 33, 1, 64},
                                            {1, 13, 2, 48},
                                            {1, 17, 1, 128},
                                            {1, 9, 2, 256}}};

// Everything one shape needs on the device, with the reference's view of the inputs.
struct attention_buffers {
  attention_buffers(gs::dtype type, shape_case const& s)
      : shape{s.batch, s.sequence, s.heads, s.head_dim},
        rows{static_cast<std::size_t>(s.batch * s.sequence)},
        width{static_cast<std::size_t>(s.heads * s.head_dim)},
        qkv{type, rows * 3 * width},
        out{type, rows * width},
        dout{type, rows * width},
        dqkv{type, rows * 3 * width},
        logsumexp{gs::dtype::float32, static_cast<std::size_t>(s.batch * s.heads * s.sequence)},
        workspace_bytes{go::attention_backward_workspace_size(shape)},
        workspace{gs::dtype::float32, workspace_bytes / sizeof(float)} {}

  void forward(gs::cuda::stream_view stream) const {
    go::launch_causal_attention_forward(out.span(), logsumexp.span(), qkv.span(), shape, stream);
  }
  void backward(gs::cuda::stream_view stream) const {
    go::launch_causal_attention_backward(dqkv.span(), dout.span(), qkv.span(), out.span(),
                                         logsumexp.span(), shape, workspace.get(), workspace_bytes,
                                         stream);
  }
  void poison_outputs() const {
    out.poison();
    logsumexp.poison();
    dqkv.poison();
    workspace.poison();
  }

  go::attention_shape shape;
  std::size_t rows, width;
  device_values qkv, out, dout, dqkv, logsumexp;
  std::size_t workspace_bytes;
  device_values workspace;
};

// max |q_t·k_t'|/√D over t' ≤ t, every batch row and head.
double largest_score(std::vector<double> const& qkv, shape_case const& s) {
  auto const T = static_cast<std::size_t>(s.sequence);
  auto const H = static_cast<std::size_t>(s.heads);
  auto const D = static_cast<std::size_t>(s.head_dim);
  std::size_t const row = 3 * H * D;
  double largest = 0.0;
  for (std::size_t b = 0; b < static_cast<std::size_t>(s.batch); ++b) {
    for (std::size_t h = 0; h < H; ++h) {
      for (std::size_t t = 0; t < T; ++t) {
        for (std::size_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (std::size_t d = 0; d < D; ++d) {
            dot += qkv[(b * T + t) * row + h * D + d] * qkv[(b * T + j) * row + (H + h) * D + d];
          }
          largest = std::max(largest, std::fabs(dot) / std::sqrt(static_cast<double>(D)));
        }
      }
    }
  }
  return largest;
}

// The dq, dk or dv columns (part 0, 1, 2) of a [rows, 3·width] gradient.
std::vector<double> part_of(std::vector<double> const& g, std::size_t rows, std::size_t width,
                            std::size_t part) {
  std::vector<double> p;
  p.reserve(rows * width);
  for (std::size_t r = 0; r < rows; ++r) {
    auto const first = g.begin() + static_cast<std::ptrdiff_t>(r * 3 * width + part * width);
    p.insert(p.end(), first, first + static_cast<std::ptrdiff_t>(width));
  }
  return p;
}

class attention_gpu : public gs::testing::stream_test,
                      public ::testing::WithParamInterface<gs::dtype> {
 protected:
  // Runs forward and backward on `qkv_values` and compares out, logsumexp, dq, dk and dv with
  // the reference.
  void check_against_reference(shape_case const& s, std::vector<double> const& qkv_values,
                               std::vector<double> const& dout_values, bounds const& bound) {
    gs::dtype const type = GetParam();
    std::string const what = describe(type, s);
    attention_buffers buffers{type, s};
    auto const x = buffers.qkv.upload(qkv_values);
    auto const g = buffers.dout.upload(dout_values);
    auto const B = static_cast<std::size_t>(s.batch);
    auto const T = static_cast<std::size_t>(s.sequence);
    auto const H = static_cast<std::size_t>(s.heads);
    auto const D = static_cast<std::size_t>(s.head_dim);
    auto const want = ref::causal_attention(x, B, T, H, D);

    buffers.forward(*stream_);
    stream_->synchronize();
    EXPECT_LT(error_of(buffers.out.download(), want.out), bound.out) << what << " out";
    EXPECT_LT(error_of(buffers.logsumexp.download(), want.logsumexp), bound.logsumexp)
        << what << " logsumexp";

    buffers.backward(*stream_);
    stream_->synchronize();
    auto const got = buffers.dqkv.download();
    auto const want_grad = ref::causal_attention_backward(g, x, B, T, H, D);
    std::array<char const*, 3> const names{"dq", "dk", "dv"};
    for (std::size_t part = 0; part < 3; ++part) {
      EXPECT_LT(error_of(part_of(got, buffers.rows, buffers.width, part),
                         part_of(want_grad, buffers.rows, buffers.width, part)),
                bound.gradient)
          << what << " " << names[part];
    }
  }
};

}  // namespace

TEST_P(attention_gpu, forward_and_backward_match_the_reference) {
  std::mt19937 rng{41};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (auto const& s : shapes) {
    auto const rows = static_cast<std::size_t>(s.batch * s.sequence);
    auto const width = static_cast<std::size_t>(s.heads * s.head_dim);
    // Inputs in ±1.5 give scores with a standard deviation of 0.75 (D·0.75²/D): softmaxes
    // neither flat nor one-hot.
    auto const qkv = random_values(rows * 3 * width, rng, -1.5, 1.5);
    auto const dout = random_values(rows * width, rng);
    check_against_reference(s, qkv, dout, bounds_for(GetParam(), s.sequence, s.head_dim));
  }
}

// Queries and keys in ±25 give scores of several hundred: exp would overflow fp32 (beyond 88.7)
// without the running maximum, and the softmax rows are close to one-hot. Then P ≈ 1 for one
// key, where dP − delta cancels almost completely, so the rounding of out in delta (16 bits) is
// no longer small beside it: the gradient bound allows 16u instead of 2u (3.6u and 6u were seen
// in bf16 and fp16).
TEST_P(attention_gpu, large_scores_stay_finite_and_accurate) {
  std::mt19937 rng{42};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (auto const& s : {shape_case{1, 33, 2, 16}, shape_case{1, 40, 1, 64}}) {
    auto const rows = static_cast<std::size_t>(s.batch * s.sequence);
    auto const width = static_cast<std::size_t>(s.heads * s.head_dim);
    auto qkv = random_values(rows * 3 * width, rng);
    for (std::size_t r = 0; r < rows; ++r) {  // queries and keys ×25
      for (std::size_t c = 0; c < 2 * width; ++c) qkv[r * 3 * width + c] *= 25.0;
    }
    bounds bound = bounds_for(GetParam(), s.sequence, s.head_dim, largest_score(qkv, s));
    if (GetParam() != gs::dtype::float32) bound.gradient += 14 * unit_roundoff(GetParam());
    check_against_reference(s, qkv, random_values(rows * width, rng), bound);
  }
}

// Every output is written again from scratch (poisoned in between, the workspace too) and
// comes out with the same bits: no atomics, no dependence on what the memory held.
TEST_P(attention_gpu, results_are_bitwise_reproducible) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{43};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (auto const& s : {shape_case{2, 33, 3, 64}, shape_case{1, 70, 2, 32}}) {
    attention_buffers buffers{type, s};
    static_cast<void>(buffers.qkv.upload(random_values(buffers.rows * 3 * buffers.width, rng)));
    static_cast<void>(buffers.dout.upload(random_values(buffers.rows * buffers.width, rng)));
    buffers.forward(*stream_);
    buffers.backward(*stream_);
    stream_->synchronize();
    auto const out = buffers.out.raw();
    auto const lse = buffers.logsumexp.raw();
    auto const dqkv = buffers.dqkv.raw();
    for (int run = 0; run < 2; ++run) {
      buffers.poison_outputs();
      buffers.forward(*stream_);
      buffers.backward(*stream_);
      stream_->synchronize();
      EXPECT_EQ(buffers.out.raw(), out) << describe(type, s) << " run " << run;
      EXPECT_EQ(buffers.logsumexp.raw(), lse) << describe(type, s) << " run " << run;
      EXPECT_EQ(buffers.dqkv.raw(), dqkv) << describe(type, s) << " run " << run;
    }
  }
}

// Forward and backward captured into one graph on a non-blocking stream: four kernel nodes
// (forward; delta, dq, dk/dv), and each replay gives the eager bits.
TEST_P(attention_gpu, launchers_are_capturable) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{44};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  shape_case const s{2, 17, 2, 32};
  attention_buffers buffers{type, s};
  static_cast<void>(buffers.qkv.upload(random_values(buffers.rows * 3 * buffers.width, rng)));
  static_cast<void>(buffers.dout.upload(random_values(buffers.rows * buffers.width, rng)));
  buffers.forward(*stream_);
  buffers.backward(*stream_);
  stream_->synchronize();
  auto const out = buffers.out.raw();
  auto const lse = buffers.logsumexp.raw();
  auto const dqkv = buffers.dqkv.raw();

  buffers.poison_outputs();
  captured_graph const graph{stream_->get(), [&] {
                               buffers.forward(*stream_);
                               buffers.backward(*stream_);
                             }};
  EXPECT_EQ(graph.kernel_nodes(), 4U);
  EXPECT_TRUE(std::isnan(buffers.out.download()[0])) << "capture ran the kernels";
  for (int replay = 0; replay < 2; ++replay) {
    buffers.poison_outputs();
    graph.replay(stream_->get());
    EXPECT_EQ(buffers.out.raw(), out) << "replay " << replay;
    EXPECT_EQ(buffers.logsumexp.raw(), lse) << "replay " << replay;
    EXPECT_EQ(buffers.dqkv.raw(), dqkv) << "replay " << replay;
  }
}

// A workspace larger than attention_backward_workspace_size changes nothing.
TEST_P(attention_gpu, a_larger_workspace_gives_the_same_result) {
  gs::dtype const type = GetParam();
  std::mt19937 rng{45};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  shape_case const s{1, 20, 2, 16};
  attention_buffers buffers{type, s};
  static_cast<void>(buffers.qkv.upload(random_values(buffers.rows * 3 * buffers.width, rng)));
  static_cast<void>(buffers.dout.upload(random_values(buffers.rows * buffers.width, rng)));
  buffers.forward(*stream_);
  buffers.backward(*stream_);
  stream_->synchronize();
  auto const dqkv = buffers.dqkv.raw();
  device_values large{gs::dtype::float32, 4 * buffers.workspace_bytes / sizeof(float)};
  buffers.dqkv.poison();
  go::launch_causal_attention_backward(buffers.dqkv.span(), buffers.dout.span(), buffers.qkv.span(),
                                       buffers.out.span(), buffers.logsumexp.span(), buffers.shape,
                                       large.get(), large.bytes(), *stream_);
  stream_->synchronize();
  EXPECT_EQ(buffers.dqkv.raw(), dqkv);
}

INSTANTIATE_TEST_SUITE_P(types, attention_gpu,
                         ::testing::Values(gs::dtype::float32, gs::dtype::float16,
                                           gs::dtype::bfloat16),
                         [](auto const& info) { return std::string{gs::name(info.param)}; });
