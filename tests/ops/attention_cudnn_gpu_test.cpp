// cuDNN's fused causal attention (ops/attention_cudnn.hpp) on the GPU: forward (out and
// logsumexp) and backward (dqkv) against the fp64 reference of ops/reference.hpp and against the
// plain kernels of ops/attention.hpp (whose backward runs on cuDNN's forward outputs), in bfloat16
// and float16, over shapes whose sequence length is no multiple of cuDNN's tiles; two backward runs
// byte for byte; capture and replay against eager; and the refusals (misaligned pointers, fp32
// data, head_dim 12, a missing or small workspace, a moved-from layer, a forward-only layer's
// backward, outputs sharing memory with other operands) with usage_error. Capture uses the plain
// CUDA calls.
//
// The simulated device does not model cuDNN: the tests that run cuDNN are skipped there, and
// where no GPU is visible. The tests of the arguments alone are in attention_cudnn_problem_test.cpp
// (attention_problem::check_cudnn, on any machine); those of can_implement's use of it and of
// what the build provides need no device and run everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/attention.hpp>
#include <graphstep/ops/attention_cudnn.hpp>
#include <graphstep/ops/reference.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/captured_graph.hpp"
#include "common/error_message.hpp"
#include "common/gpu_test.hpp"
#include "common/handle_traits.hpp"
#include "common/typed_device_values.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace ref = graphstep::ops::reference;
using gs::testing::captured_graph;
using gs::testing::contains;
using gs::testing::message_of;
using gs::testing::unit_roundoff;

static_assert(gs::testing::is_move_only_v<go::cudnn_handle>);
static_assert(gs::testing::is_move_only_v<go::cudnn_attention>);

namespace {

// --- the arguments alone: no device, no cuDNN ------------------------------------------------

// `span` moved to `address`: the same type and count somewhere else.
gs::device_span at_address(gs::device_span span, void* address) {
  return {address, span.type(), span.count()};
}

// More elements than any shape below needs: these operands are never read.
constexpr std::size_t plenty = std::size_t{1} << 24;

// can_implement() checks the arguments through attention_problem::check_cudnn (whose cases
// attention_cudnn_problem_test.cpp covers) before it looks for cuDNN: a float32 layer is
// refused, with the plain path named, on every build.
TEST(cudnn_attention_arguments, can_implement_checks_the_arguments_first) {
  alignas(256) static std::array<unsigned char, 1024> storage{};
  auto const fp32 = gs::dtype::float32;
  go::cudnn_attention_operands o;
  o.qkv = {storage.data(), fp32, plenty};
  o.out = {storage.data() + 256, fp32, plenty};
  o.logsumexp = {storage.data() + 512, fp32, plenty};
  go::support const s = go::cudnn_attention::can_implement({2, 16, 2, 64}, o);
  EXPECT_FALSE(s.fused);
  EXPECT_TRUE(contains(s.reason, "cuDNN attention (float32, B=2 T=16 H=2 D=64)")) << s.reason;
  EXPECT_TRUE(contains(s.reason, "bfloat16 or float16")) << s.reason;
  EXPECT_TRUE(contains(s.reason, "ops/attention.hpp")) << s.reason;
  o.out = {};
  EXPECT_TRUE(contains(message_of([&] {
                         static_cast<void>(go::cudnn_attention::can_implement({2, 16, 2, 64}, o));
                       }),
                       "out holds no element"));
}

// What the build provides, and that a handle is refused, with the reason, where it is missing.
TEST(cudnn_attention_build, availability_follows_the_build) {
  go::support const available = go::cudnn_attention_available();
  if (gs::testing::simulated_device) {
    EXPECT_FALSE(available.fused);
    EXPECT_TRUE(contains(available.reason, "simulated")) << available.reason;
  } else {
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
    // Built with the path: cuDNN was found at configure time and must load (no device needed).
    EXPECT_TRUE(available.fused) << available.reason;
#else
    EXPECT_FALSE(available.fused);
    EXPECT_TRUE(contains(available.reason, "scripts/install-cudnn-frontend.sh"))
        << available.reason;
#endif
  }
  if (!available.fused) {
    std::string const what = message_of([] { go::cudnn_handle const handle; });
    EXPECT_TRUE(contains(what, available.reason)) << what;
  }
}

// --- on the GPU ---------------------------------------------------------------------------------

// Host conversions to the 16-bit storage types, rounding to nearest even.
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
  return static_cast<std::uint16_t>((u + 0x7FFFU + ((u >> 16) & 1U)) >> 16);
}
float from_bf16(std::uint16_t h) {
  return float_of(std::uint32_t{h} << 16);
}
// Normal halves only: every value these tests store is 0 or at least 2^-14 in magnitude, or
// flushed to zero on the way (which the reference then sees too).
std::uint16_t to_fp16(float f) {
  std::uint32_t const x = bits_of(f);
  auto const sign = static_cast<std::uint16_t>((x >> 16) & 0x8000U);
  int const exponent = static_cast<int>((x >> 23) & 0xFFU) - 127 + 15;
  if (exponent <= 0) return sign;
  std::uint32_t half = (static_cast<std::uint32_t>(exponent) << 10) | ((x & 0x7FFFFFU) >> 13);
  std::uint32_t const rest = x & 0x1FFFU;
  if (rest > 0x1000U || (rest == 0x1000U && (half & 1U) != 0U)) ++half;
  return static_cast<std::uint16_t>(sign | half);
}
float from_fp16(std::uint16_t h) {
  std::uint32_t const sign = (std::uint32_t{h} & 0x8000U) << 16;
  std::uint32_t const exponent = (h >> 10) & 0x1FU;
  std::uint32_t const mantissa = h & 0x3FFU;
  if (exponent == 0) return float_of(sign);
  return float_of(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

std::uint16_t to_storage(double value, gs::dtype type) {
  auto const f = static_cast<float>(value);
  return type == gs::dtype::bfloat16 ? to_bf16(f) : to_fp16(f);
}
double from_storage(std::uint16_t bits, gs::dtype type) {
  return type == gs::dtype::bfloat16 ? from_bf16(bits) : from_fp16(bits);
}

// cudaMalloc'd bytes (256-byte aligned), poisoned with all bits set: NaN in bf16, fp16 and fp32,
// so an element cuDNN never wrote shows up.
class device_bytes {
 public:
  explicit device_bytes(std::size_t bytes) : bytes_{bytes} {
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&data_, std::max<std::size_t>(bytes, 1)));
    poison();
  }
  ~device_bytes() { GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(data_)); }
  device_bytes(device_bytes const&) = delete;
  device_bytes& operator=(device_bytes const&) = delete;
  device_bytes(device_bytes&&) = delete;
  device_bytes& operator=(device_bytes&&) = delete;

  [[nodiscard]] void* get() const { return data_; }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  /// @brief The bytes as elements of `type`.
  [[nodiscard]] gs::device_span span(gs::dtype type) const {
    return {data_, type, bytes_ / gs::size_in_bytes(type)};
  }
  void poison() {
    GRAPHSTEP_CUDA_TRY(cudaMemset(data_, 0xFF, bytes_));
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  }
  void upload(void const* host) { gs::testing::copy_to_device(data_, host, bytes_); }
  [[nodiscard]] std::vector<unsigned char> download(gs::cuda::stream_view stream) const {
    return gs::testing::copy_to_host(static_cast<unsigned char const*>(data_), bytes_, stream);
  }

 private:
  void* data_{};
  std::size_t bytes_;
};

// The fp32 values of a device buffer.
std::vector<double> floats_of(device_bytes const& buffer, gs::cuda::stream_view stream) {
  std::vector<unsigned char> const raw = buffer.download(stream);
  std::vector<double> values(raw.size() / sizeof(float));
  for (std::size_t i = 0; i < values.size(); ++i) {
    float f = 0.0F;
    std::memcpy(&f, raw.data() + sizeof f * i, sizeof f);
    values[i] = f;
  }
  return values;
}

// One attention layer's buffers, its inputs drawn at random and rounded to the storage type (the
// reference sees exactly the values the GPU sees).
struct layer {
  go::attention_shape shape;
  gs::dtype type;
  std::size_t rows, qkv_elements, out_elements, stats_elements;
  device_bytes qkv, out, logsumexp, dout, dqkv;
  std::vector<double> qkv_values, dout_values;

  layer(go::attention_shape const& s, gs::dtype t, unsigned seed)
      : shape{s},
        type{t},
        rows{static_cast<std::size_t>(s.batch * s.sequence)},
        qkv_elements{rows * static_cast<std::size_t>(3 * s.heads * s.head_dim)},
        out_elements{rows * static_cast<std::size_t>(s.heads * s.head_dim)},
        stats_elements{static_cast<std::size_t>(s.batch * s.heads * s.sequence)},
        qkv{qkv_elements * 2},
        out{out_elements * 2},
        logsumexp{stats_elements * sizeof(float)},
        dout{out_elements * 2},
        dqkv{qkv_elements * 2} {
    std::mt19937 random{seed};
    // q and k in ±2 spread the scores q·k/√D over several units, so that the softmax is far from
    // uniform; v and dout in ±1.
    std::uniform_real_distribution<double> wide{-2.0, 2.0};
    std::uniform_real_distribution<double> unit{-1.0, 1.0};
    auto const hd = static_cast<std::size_t>(s.heads * s.head_dim);
    qkv_values = round_and_upload(qkv, qkv_elements, [&](std::size_t i) {
      return i % (3 * hd) < 2 * hd ? wide(random) : unit(random);
    });
    dout_values = round_and_upload(dout, out_elements, [&](std::size_t) { return unit(random); });
  }

  template <typename Draw>
  std::vector<double> round_and_upload(device_bytes& buffer, std::size_t count, Draw&& draw) {
    std::vector<std::uint16_t> bits(count);
    std::vector<double> values(count);
    for (std::size_t i = 0; i < count; ++i) {
      bits[i] = to_storage(draw(i), type);
      values[i] = from_storage(bits[i], type);
    }
    buffer.upload(bits.data());
    return values;
  }

  [[nodiscard]] go::cudnn_attention_operands operands(bool with_backward = true) const {
    go::cudnn_attention_operands o;
    o.qkv = qkv.span(type);
    o.out = out.span(type);
    o.logsumexp = logsumexp.span(gs::dtype::float32);
    if (with_backward) {
      o.dout = dout.span(type);
      o.dqkv = dqkv.span(type);
    }
    return o;
  }

  [[nodiscard]] std::vector<double> values_of(device_bytes const& buffer,
                                              gs::cuda::stream_view stream) const {
    std::vector<unsigned char> const raw = buffer.download(stream);
    std::vector<double> values(raw.size() / 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::uint16_t bits = 0;
      std::memcpy(&bits, raw.data() + 2 * i, sizeof bits);
      values[i] = from_storage(bits, type);
    }
    return values;
  }
  [[nodiscard]] std::vector<double> logsumexp_values(gs::cuda::stream_view stream) const {
    return floats_of(logsumexp, stream);
  }
};

std::string describe(go::attention_shape const& s, gs::dtype type) {
  return std::string{gs::name(type)} + " B=" + std::to_string(s.batch) +
         " T=" + std::to_string(s.sequence) + " H=" + std::to_string(s.heads) +
         " D=" + std::to_string(s.head_dim);
}

// The largest |got − want| and where; NaN anywhere counts as infinitely far.
struct deviation {
  double largest{};
  std::size_t at{};
};
deviation largest_deviation(std::vector<double> const& got, std::vector<double> const& want) {
  deviation d;
  for (std::size_t i = 0; i < want.size(); ++i) {
    double const e = std::isnan(got[i]) ? INFINITY : std::abs(got[i] - want[i]);
    if (e > d.largest) d = {e, i};
  }
  return d;
}
double largest_magnitude(std::vector<double> const& values) {
  double m = 0.0;
  for (double const v : values) m = std::max(m, std::abs(v));
  return m;
}
// ‖got − want‖₂ / ‖want‖₂.
double relative_error(std::vector<double> const& got, std::vector<double> const& want) {
  double error = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    error += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(error / norm);
}

// The forward's error on a real GPU: flash attention rounds the probabilities to the storage
// type before P·V (≤ u/2 of each, against an fp32 row sum) and rounds the output (≤ u/2); with
// |v| ≤ 1 that is ≤ u in all. 2u leaves a factor 2 for fp32 accumulation and exp2 approximations.
double out_bound(gs::dtype type) {
  return 2.0 * unit_roundoff(type);
}
// logsumexp stays fp32 from the exact 16-bit products: fp32 sums over ≤ 128 terms and the
// approximate exp2/log2 of the GPU (relative errors near 2^-22) stay below 1e-5 for values of a
// few units; 1e-3 is far above that and far below what a wrong base (log2: a factor 1.44) or a
// missing 1/√D would give.
constexpr double logsumexp_bound = 1e-3;
// The backward's matmuls take 16-bit operands (P and dS rounded, ≤ u/2 each), and its delta =
// rowsum(dout ⊙ out) reads the rounded out; each of dq, dk, dv then carries ≈ u of its norm.
// Allowed: 4u normwise, and 16u of the tensor's largest magnitude on any one element.
double gradient_norm_bound(gs::dtype type) {
  return 4.0 * unit_roundoff(type);
}
double gradient_element_bound(gs::dtype type) {
  return 16.0 * unit_roundoff(type);
}

// q, k or v (part 0, 1, 2) of every head of every row of a [B·T, 3·H·D] tensor.
std::vector<double> part_of(std::vector<double> const& qkv, go::attention_shape const& s,
                            std::size_t part) {
  auto const hd = static_cast<std::size_t>(s.heads * s.head_dim);
  std::vector<double> values;
  for (std::size_t i = 0; i < qkv.size(); ++i) {
    if (i % (3 * hd) / hd == part) values.push_back(qkv[i]);
  }
  return values;
}

// Skipped on the simulated device (no cuDNN there), without a GPU, and on GPUs older than
// sm_80; a build with the cuDNN path must find cuDNN.
class cudnn_attention_gpu : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    GRAPHSTEP_SKIP_ON_SIMULATED_DEVICE(
        "cuDNN",
        "its kernels are NVIDIA's machine code, and the simulator runs kernels from "
        "their source");
    gpu_test::SetUp();
    if (IsSkipped()) return;
    go::support const available = go::cudnn_attention_available();
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
    ASSERT_TRUE(available.fused) << available.reason;
#else
    GTEST_SKIP() << available.reason;
#endif
    int device = 0;
    int major = 0;
    GRAPHSTEP_CUDA_TRY(cudaGetDevice(&device));
    GRAPHSTEP_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 8) GTEST_SKIP() << "cuDNN's fused attention needs compute capability 8.0";
    handle_.emplace();
    stream_.emplace();
  }

  // An attention layer for `l`, and a workspace of its size (from cudaMalloc, owned by the test)
  // that forward() and backward() below hand it.
  go::cudnn_attention attention_for(layer const& l, bool with_backward = true) {
    go::cudnn_attention attention{*handle_, l.shape, l.operands(with_backward)};
    workspace_.emplace(attention.workspace_size());
    return attention;
  }
  void forward(go::cudnn_attention const& attention) const {
    attention.forward(attention.workspace_size() == 0 ? nullptr : workspace_->get(),
                      attention.workspace_size(), *stream_);
  }
  void backward(go::cudnn_attention const& attention) const {
    attention.backward(attention.workspace_size() == 0 ? nullptr : workspace_->get(),
                       attention.workspace_size(), *stream_);
  }

  std::optional<go::cudnn_handle> handle_;
  std::optional<gs::cuda::stream> stream_;
  std::optional<device_bytes> workspace_;
};

// Sequence lengths that are no multiple of cuDNN's 64- or 128-row tiles, head dimensions 32 to
// 128, one and several heads and batch rows.
constexpr std::array<go::attention_shape, 3> shapes{{
    {2, 37, 3, 64},
    {1, 100, 2, 128},
    {3, 19, 1, 32},
}};
constexpr std::array<gs::dtype, 2> types{gs::dtype::bfloat16, gs::dtype::float16};

TEST_F(cudnn_attention_gpu, forward_matches_the_fp64_reference) {
  unsigned seed = 1;
  for (gs::dtype const type : types) {
    for (go::attention_shape const& s : shapes) {
      SCOPED_TRACE(describe(s, type));
      layer l{s, type, seed++};
      go::cudnn_attention const attention = attention_for(l, /*with_backward=*/false);
      forward(attention);
      auto const want = ref::causal_attention(
          l.qkv_values, static_cast<std::size_t>(s.batch), static_cast<std::size_t>(s.sequence),
          static_cast<std::size_t>(s.heads), static_cast<std::size_t>(s.head_dim));
      deviation const out = largest_deviation(l.values_of(l.out, *stream_), want.out);
      EXPECT_LE(out.largest, out_bound(type)) << "out element " << out.at;
      deviation const lse = largest_deviation(l.logsumexp_values(*stream_), want.logsumexp);
      EXPECT_LE(lse.largest, logsumexp_bound) << "logsumexp element " << lse.at;
    }
  }
}

TEST_F(cudnn_attention_gpu, backward_matches_the_fp64_reference) {
  unsigned seed = 100;
  for (gs::dtype const type : types) {
    for (go::attention_shape const& s : shapes) {
      SCOPED_TRACE(describe(s, type));
      layer l{s, type, seed++};
      go::cudnn_attention const attention = attention_for(l);
      ASSERT_TRUE(attention.has_backward());
      forward(attention);
      backward(attention);
      std::vector<double> const want = ref::causal_attention_backward(
          l.dout_values, l.qkv_values, static_cast<std::size_t>(s.batch),
          static_cast<std::size_t>(s.sequence), static_cast<std::size_t>(s.heads),
          static_cast<std::size_t>(s.head_dim));
      std::vector<double> const got = l.values_of(l.dqkv, *stream_);
      for (std::size_t part = 0; part < 3; ++part) {
        SCOPED_TRACE((std::array<char const*, 3>{"dq", "dk", "dv"}.at(part)));
        std::vector<double> const g = part_of(got, s, part);
        std::vector<double> const w = part_of(want, s, part);
        deviation const d = largest_deviation(g, w);
        EXPECT_LE(d.largest, gradient_element_bound(type) * largest_magnitude(w))
            << "element " << d.at << " of " << w.size();
        EXPECT_LE(relative_error(g, w), gradient_norm_bound(type));
      }
    }
  }
}

// The plain kernels of ops/attention.hpp compute in fp32 and round once to the storage type
// (≤ u/2 of each element); against them each result carries both paths' errors, so the bounds
// are the cuDNN bounds above plus the plain path's, doubled: u on out, u normwise and 4u of the
// largest magnitude per element on the gradients, and logsumexp_bound again on logsumexp.
// The plain backward runs on cuDNN's out and logsumexp, as cuDNN's own backward does: the two
// paths exchange their outputs.
TEST_F(cudnn_attention_gpu, matches_the_plain_kernels_and_exchanges_outputs_with_them) {
  unsigned seed = 200;
  for (gs::dtype const type : types) {
    for (go::attention_shape const& s : shapes) {
      SCOPED_TRACE(describe(s, type));
      layer l{s, type, seed++};
      go::cudnn_attention const attention = attention_for(l);
      forward(attention);
      device_bytes plain_out{l.out.bytes()};
      device_bytes plain_logsumexp{l.logsumexp.bytes()};
      go::launch_causal_attention_forward(plain_out.span(type),
                                          plain_logsumexp.span(gs::dtype::float32),
                                          l.qkv.span(type), s, *stream_);
      double const u = unit_roundoff(type);
      deviation const out =
          largest_deviation(l.values_of(l.out, *stream_), l.values_of(plain_out, *stream_));
      EXPECT_LE(out.largest, out_bound(type) + u) << "out element " << out.at;
      std::vector<double> const plain_lse = floats_of(plain_logsumexp, *stream_);
      deviation const lse = largest_deviation(l.logsumexp_values(*stream_), plain_lse);
      EXPECT_LE(lse.largest, 2.0 * logsumexp_bound) << "logsumexp element " << lse.at;

      backward(attention);
      device_bytes plain_dqkv{l.dqkv.bytes()};
      device_bytes workspace{go::attention_backward_workspace_size(s)};
      go::launch_causal_attention_backward(
          plain_dqkv.span(type), l.dout.span(type), l.qkv.span(type), l.out.span(type),
          l.logsumexp.span(gs::dtype::float32), s, workspace.get(), workspace.bytes(), *stream_);
      std::vector<double> const got = l.values_of(l.dqkv, *stream_);
      std::vector<double> const plain = l.values_of(plain_dqkv, *stream_);
      for (std::size_t part = 0; part < 3; ++part) {
        SCOPED_TRACE((std::array<char const*, 3>{"dq", "dk", "dv"}.at(part)));
        std::vector<double> const g = part_of(got, s, part);
        std::vector<double> const p = part_of(plain, s, part);
        deviation const d = largest_deviation(g, p);
        EXPECT_LE(d.largest, (gradient_element_bound(type) + 4.0 * u) * largest_magnitude(p))
            << "element " << d.at << " of " << p.size();
        EXPECT_LE(relative_error(g, p), gradient_norm_bound(type) + u);
      }
    }
  }
}

TEST_F(cudnn_attention_gpu, deterministic_backward_gives_the_same_bytes_twice) {
  layer l{shapes[0], gs::dtype::bfloat16, 7};
  go::cudnn_attention const attention = attention_for(l);
  forward(attention);
  backward(attention);
  std::vector<unsigned char> const first = l.dqkv.download(*stream_);
  l.dqkv.poison();
  backward(attention);
  EXPECT_EQ(l.dqkv.download(*stream_), first);
}

TEST_F(cudnn_attention_gpu, captured_forward_and_backward_replay_the_eager_bytes) {
  for (cudaStreamCaptureMode const mode :
       {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal}) {
    SCOPED_TRACE(mode == cudaStreamCaptureModeGlobal ? "global capture" : "thread-local capture");
    layer l{shapes[1], gs::dtype::bfloat16, 11};
    go::cudnn_attention const attention = attention_for(l);
    // Eager first: cuDNN loads its kernels outside the capture.
    forward(attention);
    backward(attention);
    std::vector<unsigned char> const out = l.out.download(*stream_);
    std::vector<unsigned char> const lse = l.logsumexp.download(*stream_);
    std::vector<unsigned char> const dqkv = l.dqkv.download(*stream_);
    for (device_bytes* written : {&l.out, &l.logsumexp, &l.dqkv}) written->poison();
    captured_graph const graph{stream_->get(), mode, [&] {
                                 forward(attention);
                                 backward(attention);
                               }};
    // Captured, not run: the outputs are still poisoned.
    EXPECT_NE(l.out.download(*stream_), out);
    for (int replay = 0; replay < 2; ++replay) {
      graph.replay(stream_->get());
      EXPECT_EQ(l.out.download(*stream_), out) << "replay " << replay;
      EXPECT_EQ(l.logsumexp.download(*stream_), lse) << "replay " << replay;
      EXPECT_EQ(l.dqkv.download(*stream_), dqkv) << "replay " << replay;
    }
  }
}

TEST_F(cudnn_attention_gpu, bad_arguments_throw_usage_error_from_the_constructor) {
  layer l{shapes[0], gs::dtype::bfloat16, 3};
  auto const refusal = [&](go::attention_shape const& shape,
                           go::cudnn_attention_operands const& operands) {
    return message_of([&] { go::cudnn_attention const attention{*handle_, shape, operands}; });
  };
  go::cudnn_attention_operands misaligned = l.operands();
  misaligned.qkv = at_address(misaligned.qkv, static_cast<unsigned char*>(l.qkv.get()) + 2);
  std::string const what = refusal(l.shape, misaligned);
  EXPECT_TRUE(contains(what, "qkv at")) << what;
  EXPECT_TRUE(contains(what, "16-byte aligned")) << what;

  // The same spans as float32: refused for cuDNN's types, with the plain path named.
  go::cudnn_attention_operands as_fp32 = l.operands();
  for (gs::device_span* operand : {&as_fp32.qkv, &as_fp32.out, &as_fp32.dout, &as_fp32.dqkv}) {
    *operand = {operand->data(), gs::dtype::float32, operand->count()};
  }
  std::string const fp32 = refusal(l.shape, as_fp32);
  EXPECT_TRUE(contains(fp32, "bfloat16 or float16")) << fp32;

  go::attention_shape head_dim_12 = l.shape;
  head_dim_12.head_dim = 12;
  std::string const twelve = refusal(head_dim_12, l.operands());
  EXPECT_TRUE(contains(twelve, "head_dim 12")) << twelve;

  go::cudnn_handle source;
  go::cudnn_handle const taken = std::move(source);
  EXPECT_NE(taken.get(), nullptr);
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move): documented state
  EXPECT_EQ(source.get(), nullptr);
  std::string const moved = message_of([&] {
    go::cudnn_attention const attention{source, l.shape, l.operands()};
  });
  EXPECT_TRUE(contains(moved, "handle was moved from")) << moved;
}

TEST_F(cudnn_attention_gpu, workspace_and_layer_misuse_throw_usage_error) {
  layer l{shapes[2], gs::dtype::float16, 5};
  go::cudnn_attention attention{*handle_, l.shape, l.operands(/*with_backward=*/false)};
  EXPECT_FALSE(attention.has_backward());
  std::size_t const needed = attention.workspace_size();
  device_bytes workspace{needed + 512};
  if (needed > 0) {
    std::string const none = message_of([&] { attention.forward(nullptr, 0, *stream_); });
    EXPECT_TRUE(contains(none, "forward(): the workspace has 0 bytes; workspace_size() is"))
        << none;
    std::string const small =
        message_of([&] { attention.forward(workspace.get(), needed - 1, *stream_); });
    EXPECT_TRUE(contains(small, "workspace_size()")) << small;
  }
  std::string const misaligned = message_of([&] {
    attention.forward(static_cast<unsigned char*>(workspace.get()) + 16, needed + 256, *stream_);
  });
  EXPECT_TRUE(contains(misaligned, "256-byte aligned")) << misaligned;
  std::string const size_only =
      message_of([&] { attention.forward(nullptr, needed + 1, *stream_); });
  EXPECT_TRUE(contains(size_only, "without a workspace pointer")) << size_only;
  attention.forward(workspace.get(), workspace.bytes(), *stream_);
  std::string const no_backward =
      message_of([&] { attention.backward(workspace.get(), workspace.bytes(), *stream_); });
  EXPECT_TRUE(contains(no_backward, "without dout and dqkv")) << no_backward;

  go::cudnn_attention const moved_to = std::move(attention);
  EXPECT_EQ(moved_to.shape().sequence, l.shape.sequence);
  // The moved-from state is documented.
  // NOLINTBEGIN(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  EXPECT_FALSE(attention.has_backward());
  std::string const moved =
      message_of([&] { attention.forward(workspace.get(), workspace.bytes(), *stream_); });
  // NOLINTEND(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  EXPECT_TRUE(contains(moved, "moved from")) << moved;
  moved_to.forward(workspace.get(), workspace.bytes(), *stream_);
  stream_->synchronize();
}

}  // namespace
