// The capture-safe generator's fills and set_seed on a device: each fill equals the host
// reference, replays draw new values equal to the eager draws with the same seed, the device's
// draws have the right moments, and a seed may be set inside a capture only if it is the one
// in use. fp16 and bf16 fills equal the fp32 fills of the same state rounded to nearest even,
// with a uniform value that rounds to `high` given as `low`.
//
// Uniform and Bernoulli values are compared with the host reference bitwise everywhere. Normal
// values are bitwise equal on the simulated device (its kernels call the host's logf, sinf and
// cosf); on a GPU, CUDA's logf (1 ulp), sinf and cosf (2 ulp) differ from the host's in the last
// bits, so there they are compared within 16 ulp of |std·z| plus one ulp of the value (see
// train/random_fill.hpp). The fp16 and bf16 fills are compared with the device's own fp32 fills,
// so bitwise everywhere.

#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/dtype_conversion.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/random_fill.hpp>
#include <graphstep/train/reference.hpp>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;
namespace gr = graphstep::train;

namespace {

// The device's normal value against the host's, as the file comment states.
::testing::AssertionResult normal_matches(float device, float host, float mean) {
  if (gs::testing::simulated_device) {
    if (device == host) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << device << " != " << host << " (bitwise)";
  }
  double const magnitude = std::abs(double{host} - mean);  // |std·z|
  double const ulp_of_value =
      std::nextafter(std::abs(host), INFINITY) - static_cast<double>(std::abs(host));
  double const bound = 16.0 * magnitude * std::ldexp(1.0, -23) + ulp_of_value;
  if (std::abs(double{device} - host) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << device << " vs " << host << ": beyond " << bound;
}

// The bits of x rounded to nearest even in `type` (float16 or bfloat16): CUDA's host conversion
// for fp16, the library's for bf16 (the kernels use CUDA's device conversions for both).
std::uint16_t rounded_bits(gs::dtype type, float x) {
  if (type == gs::dtype::bfloat16) return graphstep::bfloat16_nearest_even(x);
  __half_raw const raw = __float2half_rn(x);
  return raw.x;
}

float widened(gs::dtype type, std::uint16_t bits) {
  if (type == gs::dtype::bfloat16) return graphstep::bfloat16_to_float(bits);
  __half_raw raw{};
  raw.x = bits;
  return __half2float(__half{raw});
}

// What a 16-bit uniform fill stores where the fp32 fill of the same state drew `value`: the value
// rounded, and `low` rounded where that is `high` rounded (PyTorch's uniform_kernel).
std::uint16_t expected_uniform(gs::dtype type, float value, float low, float high) {
  std::uint16_t const rounded = rounded_bits(type, value);
  return widened(type, rounded) == widened(type, rounded_bits(type, high)) ? rounded_bits(type, low)
                                                                           : rounded;
}

class rng_fill_test : public gs::testing::stream_pool_test {
 protected:
  // Element counts that leave a partial Philox block at the end of every fill but one.
  static constexpr std::size_t n_uniform = 10001;
  static constexpr std::size_t n_normal = 10003;
  static constexpr std::size_t n_bernoulli = 10002;
  static constexpr std::size_t n_mask = 10000;
  static constexpr float low = -1.5F, high = 2.5F, mean = 0.5F, stddev = 3.0F, p = 0.3F;

  struct draws {
    std::vector<float> uniform, normal, bernoulli;
    std::vector<std::uint8_t> mask;
  };

  void SetUp() override {
    gs::testing::stream_pool_test::SetUp();
    if (IsSkipped()) return;
    uniform_ = allocate<float>(n_uniform);
    normal_ = allocate<float>(n_normal);
    bernoulli_ = allocate<float>(n_bernoulli);
    mask_ = allocate<std::uint8_t>(n_mask);
  }

  void TearDown() override {
    if (stream_) stream_->synchronize();
    for (void* pointer : allocated_) pool_->deallocate(pointer, *stream_);
  }

  template <typename T>
  T* allocate(std::size_t n) {
    allocated_.push_back(pool_->allocate(n * sizeof(T), *stream_));
    return static_cast<T*>(allocated_.back());
  }

  template <typename T>
  std::vector<T> read(T const* device, std::size_t n) {
    std::vector<T> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost,
                                       stream_->get()));
    stream_->synchronize();
    return host;
  }

  // One step: the four fills, then the offset advance.
  void step(gr::capture_safe_rng& rng) {
    rng.uniform({uniform_, gs::dtype::float32, n_uniform}, low, high, *stream_);
    rng.normal({normal_, gs::dtype::float32, n_normal}, mean, stddev, *stream_);
    rng.bernoulli({bernoulli_, gs::dtype::float32, n_bernoulli}, p, *stream_);
    rng.bernoulli({mask_, gs::dtype::uint8, n_mask}, p, *stream_);
    rng.end_step(*stream_);
  }

  draws read_step() {
    return {read(uniform_, n_uniform), read(normal_, n_normal), read(bernoulli_, n_bernoulli),
            read(mask_, n_mask)};
  }

  // Counters one step reserves, and the host's recomputation of the step at `offset`.
  static std::uint64_t step_counters() {
    return gr::fill_counters(n_uniform) + gr::fill_counters(n_normal) +
           gr::fill_counters(n_bernoulli) + gr::fill_counters(n_mask);
  }
  static draws reference_step(std::uint64_t seed, std::uint64_t offset) {
    std::uint64_t base = offset;
    draws expected;
    expected.uniform = gr::reference::uniform_fill(seed, base, n_uniform, low, high);
    base += gr::fill_counters(n_uniform);
    expected.normal = gr::reference::normal_fill(seed, base, n_normal, mean, stddev);
    base += gr::fill_counters(n_normal);
    for (std::uint8_t bit : gr::reference::bernoulli_fill(seed, base, n_bernoulli, p)) {
      expected.bernoulli.push_back(bit);
    }
    base += gr::fill_counters(n_bernoulli);
    expected.mask = gr::reference::bernoulli_fill(seed, base, n_mask, p);
    return expected;
  }

  static void expect_equal(draws const& got, draws const& expected, std::string const& where) {
    EXPECT_EQ(got.uniform, expected.uniform) << where;
    EXPECT_EQ(got.bernoulli, expected.bernoulli) << where;
    EXPECT_EQ(got.mask, expected.mask) << where;
    ASSERT_EQ(got.normal.size(), expected.normal.size());
    for (std::size_t i = 0; i < got.normal.size(); ++i) {
      ASSERT_TRUE(normal_matches(got.normal[i], expected.normal[i], mean))
          << where << ", normal element " << i;
    }
  }

  float* uniform_{};
  float* normal_{};
  float* bernoulli_{};
  std::uint8_t* mask_{};
  std::vector<void*> allocated_;
};

}  // namespace

TEST_F(rng_fill_test, each_fill_equals_the_host_reference) {
  gr::capture_safe_rng rng{2024, *stream_};
  step(rng);
  expect_equal(read_step(), reference_step(2024, 0), "eager step 0");
}

TEST_F(rng_fill_test, replays_draw_new_values_equal_to_the_eager_draws_of_the_same_seed) {
  constexpr int steps = 3;
  std::vector<draws> eager;
  {
    gr::capture_safe_rng rng{77, *stream_};
    for (int i = 0; i < steps; ++i) {
      step(rng);
      eager.push_back(read_step());
    }
  }
  EXPECT_NE(eager[0].uniform, eager[1].uniform) << "each step must draw new values";
  EXPECT_NE(eager[0].normal, eager[1].normal);
  EXPECT_NE(eager[0].mask, eager[1].mask);
  gr::capture_safe_rng rng{77, *stream_};
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] { step(rng); });
  for (int i = 0; i < steps; ++i) {
    g.replay(*stream_);
    auto const got = read_step();
    std::string const where = "replay " + std::to_string(i);
    // Bitwise: the same kernels at the same Philox positions, on GPUs too.
    EXPECT_EQ(got.uniform, eager[static_cast<std::size_t>(i)].uniform) << where;
    EXPECT_EQ(got.normal, eager[static_cast<std::size_t>(i)].normal) << where;
    EXPECT_EQ(got.bernoulli, eager[static_cast<std::size_t>(i)].bernoulli) << where;
    EXPECT_EQ(got.mask, eager[static_cast<std::size_t>(i)].mask) << where;
    expect_equal(got, reference_step(77, static_cast<std::uint64_t>(i) * step_counters()), where);
  }
}

TEST_F(rng_fill_test, device_draws_have_the_right_moments) {
  // Tolerances of five standard errors over n draws.
  constexpr std::size_t n = std::size_t{1} << 18;
  float* out = allocate<float>(n);
  gr::capture_safe_rng rng{5, *stream_};
  auto mean_and_variance = [](std::vector<float> const& v) {
    double sum = 0.0, squares = 0.0;
    for (float x : v) sum += x;
    double const m = sum / static_cast<double>(v.size());
    for (float x : v) squares += (x - m) * (x - m);
    return std::pair<double, double>{m, squares / static_cast<double>(v.size())};
  };
  double const root_n = std::sqrt(static_cast<double>(n));

  rng.uniform({out, gs::dtype::float32, n}, low, high, *stream_);
  auto const uniform = read(out, n);
  EXPECT_TRUE(
      std::all_of(uniform.begin(), uniform.end(), [](float x) { return x >= low && x < high; }));
  auto const [uniform_mean, uniform_variance] = mean_and_variance(uniform);
  double const width = high - low;
  EXPECT_NEAR(uniform_mean, (low + high) / 2.0, 5 * width / std::sqrt(12.0) / root_n);
  // Standard error of the variance: width² · sqrt(1/80 − 1/144) / √n.
  EXPECT_NEAR(uniform_variance, width * width / 12.0,
              5 * width * width * std::sqrt(1.0 / 80 - 1.0 / 144) / root_n);

  rng.normal({out, gs::dtype::float32, n}, mean, stddev, *stream_);
  auto const normal = read(out, n);
  auto const [normal_mean, normal_variance] = mean_and_variance(normal);
  EXPECT_NEAR(normal_mean, mean, 5 * stddev / root_n);
  EXPECT_NEAR(normal_variance, stddev * stddev, 5 * stddev * stddev * std::sqrt(2.0) / root_n);

  rng.bernoulli({out, gs::dtype::float32, n}, p, *stream_);
  auto const bits = read(out, n);
  std::size_t ones = 0;
  for (float x : bits) {
    ASSERT_TRUE(x == 0.0F || x == 1.0F) << x;
    ones += x == 1.0F;
  }
  EXPECT_NEAR(static_cast<double>(ones) / n, p, 5 * std::sqrt(p * (1.0 - p)) / root_n);

  rng.bernoulli({out, gs::dtype::float32, n}, 0.0F, *stream_);
  for (float x : read(out, n)) ASSERT_EQ(x, 0.0F);
  rng.bernoulli({out, gs::dtype::float32, n}, 1.0F, *stream_);
  for (float x : read(out, n)) ASSERT_EQ(x, 1.0F);
  rng.end_step(*stream_);
}

TEST_F(rng_fill_test, refused_arguments_reserve_nothing) {
  gr::capture_safe_rng rng{31, *stream_};
  using gs::testing::message_of;
  EXPECT_NE(message_of([&] {
              rng.uniform({nullptr, gs::dtype::float32, 4}, 0.0F, 1.0F, *stream_);
            }).find("null"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              rng.uniform({uniform_, gs::dtype::float32, 4}, 1.0F, 0.0F, *stream_);
            }).find("capture_safe_rng::uniform: low must not exceed high"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              rng.normal({normal_, gs::dtype::float32, 4}, 0.0F, -1.0F, *stream_);
            }).find("capture_safe_rng::normal: std must be finite and >= 0"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              rng.bernoulli({bernoulli_, gs::dtype::float32, 4}, 1.5F, *stream_);
            }).find("capture_safe_rng::bernoulli: p must lie in [0, 1]"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              rng.bernoulli({mask_, gs::dtype::uint8, 4}, -0.5F, *stream_);
            }).find("capture_safe_rng::bernoulli: p must lie in [0, 1]"),
            std::string::npos);
  // Nothing was reserved: the step draws from position 0 still.
  step(rng);
  expect_equal(read_step(), reference_step(31, 0), "after the refused calls");
}

TEST_F(rng_fill_test, set_seed_outside_a_capture_starts_over_as_a_new_generator) {
  gr::capture_safe_rng rng{1, *stream_};
  EXPECT_EQ(rng.seed(), 1U);
  step(rng);
  step(rng);
  rng.set_seed(2, *stream_);
  EXPECT_EQ(rng.seed(), 2U);
  step(rng);
  expect_equal(read_step(), reference_step(2, 0), "after set_seed(2)");
  // restore brings back the saved seed, and the host's copy of it.
  gr::checkpoint saved;
  rng.save_to(saved, "rng", *stream_);
  rng.set_seed(3, *stream_);
  rng.restore_from(saved, "rng", *stream_);
  EXPECT_EQ(rng.seed(), 2U);
  step(rng);
  expect_equal(read_step(), reference_step(2, step_counters()), "after restore");
  // Mid-step, outside a capture: refused.
  rng.uniform({uniform_, gs::dtype::float32, n_uniform}, low, high, *stream_);
  EXPECT_NE(gs::testing::message_of([&] { rng.set_seed(4, *stream_); }).find("between steps"),
            std::string::npos);
  rng.end_step(*stream_);
}

TEST_F(rng_fill_test, set_seed_with_the_seed_in_use_inside_a_capture_records_nothing) {
  std::vector<draws> eager;
  {
    gr::capture_safe_rng rng{9, *stream_};
    for (int i = 0; i < 2; ++i) {
      step(rng);
      eager.push_back(read_step());
    }
  }
  gr::capture_safe_rng rng{8, *stream_};
  rng.set_seed(9, *stream_);  // outside: takes effect
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] {
    rng.set_seed(9, *stream_);  // the seed in use: accepted, the offset is not reset
    step(rng);
  });
  for (int i = 0; i < 2; ++i) {
    g.replay(*stream_);
    auto const got = read_step();
    EXPECT_EQ(got.uniform, eager[static_cast<std::size_t>(i)].uniform) << "replay " << i;
    EXPECT_EQ(got.normal, eager[static_cast<std::size_t>(i)].normal) << "replay " << i;
    EXPECT_EQ(got.mask, eager[static_cast<std::size_t>(i)].mask) << "replay " << i;
  }
}

TEST_F(rng_fill_test, another_seed_inside_a_capture_is_refused_and_the_capture_stays_usable) {
  std::vector<draws> eager;
  {
    gr::capture_safe_rng rng{12, *stream_};
    step(rng);
    eager.push_back(read_step());
  }
  gr::capture_safe_rng rng{12, *stream_};
  gs::graphs::graph_exec g;
  std::string what;
  gs::graphs::capture(g, *stream_, [&] {
    rng.uniform({uniform_, gs::dtype::float32, n_uniform}, low, high, *stream_);
    what = gs::testing::message_of([&] { rng.set_seed(13, *stream_); });
    rng.normal({normal_, gs::dtype::float32, n_normal}, mean, stddev, *stream_);
    rng.bernoulli({bernoulli_, gs::dtype::float32, n_bernoulli}, p, *stream_);
    rng.bernoulli({mask_, gs::dtype::uint8, n_mask}, p, *stream_);
    rng.end_step(*stream_);
  });
  EXPECT_NE(what.find("seed 13 differs from the seed in use, 12"), std::string::npos) << what;
  EXPECT_NE(what.find("set it before the capture"), std::string::npos) << what;
  EXPECT_EQ(rng.seed(), 12U);
  g.replay(*stream_);
  auto const got = read_step();
  EXPECT_EQ(got.uniform, eager[0].uniform);
  EXPECT_EQ(got.normal, eager[0].normal);
  EXPECT_EQ(got.mask, eager[0].mask);
}

TEST_F(rng_fill_test, another_seed_thrown_out_of_a_capture_discards_it_cleanly) {
  gr::capture_safe_rng rng{21, *stream_};
  gs::graphs::graph_exec g;
  EXPECT_THROW(gs::graphs::capture(g, *stream_,
                                   [&] {
                                     rng.set_seed(22, *stream_);
                                     step(rng);
                                   }),
               gs::usage_error);
  EXPECT_TRUE(g.empty());
  EXPECT_FALSE(stream_->view().is_capturing());
  // The generator and the stream go on: set the seed before the capture, then capture.
  rng.set_seed(22, *stream_);
  gs::graphs::capture(g, *stream_, [&] { step(rng); });
  g.replay(*stream_);
  expect_equal(read_step(), reference_step(22, 0), "the capture after the refused one");
}

// --- fp16 and bf16 fills ------------------------------------------------------------------------

namespace {
constexpr std::size_t n_16 = 1001;  // a partial Philox block at the end
constexpr std::array<gs::dtype, 2> sixteen_bit_types{gs::dtype::float16, gs::dtype::bfloat16};
}  // namespace

TEST_F(rng_fill_test, half_and_bfloat16_fills_are_the_fp32_fills_rounded_to_nearest_even) {
  constexpr std::size_t n_after = 8;
  float* wide = allocate<float>(3 * n_16);
  float* wide_after = allocate<float>(n_after);
  auto* narrow = allocate<std::uint16_t>(3 * n_16);
  float* narrow_after = allocate<float>(n_after);
  for (gs::dtype const type : sixteen_bit_types) {
    SCOPED_TRACE(gs::name(type));
    gr::capture_safe_rng fp32{41, *stream_};
    fp32.uniform({wide, gs::dtype::float32, n_16}, low, high, *stream_);
    fp32.normal({wide + n_16, gs::dtype::float32, n_16}, mean, stddev, *stream_);
    fp32.bernoulli({wide + 2 * n_16, gs::dtype::float32, n_16}, p, *stream_);
    fp32.uniform({wide_after, gs::dtype::float32, n_after}, 0.0F, 1.0F, *stream_);
    fp32.end_step(*stream_);
    gr::capture_safe_rng rounded{41, *stream_};
    rounded.uniform({narrow, type, n_16}, low, high, *stream_);
    rounded.normal({narrow + n_16, type, n_16}, mean, stddev, *stream_);
    rounded.bernoulli({narrow + 2 * n_16, type, n_16}, p, *stream_);
    // The same counters were reserved: the next fill (here fp32 through the dtype overload)
    // draws what the fp32 generator's next fill drew.
    rounded.uniform({narrow_after, gs::dtype::float32, n_after}, 0.0F, 1.0F, *stream_);
    rounded.end_step(*stream_);

    auto const expected = read(wide, 3 * n_16);
    auto const got = read(narrow, 3 * n_16);
    std::uint16_t const one = rounded_bits(type, 1.0F);
    for (std::size_t i = 0; i < n_16; ++i) {
      ASSERT_EQ(got[i], expected_uniform(type, expected[i], low, high)) << "uniform " << i;
      ASSERT_EQ(got[n_16 + i], rounded_bits(type, expected[n_16 + i])) << "normal " << i;
      ASSERT_TRUE(got[2 * n_16 + i] == 0 || got[2 * n_16 + i] == one) << "bernoulli " << i;
      ASSERT_EQ(got[2 * n_16 + i], expected[2 * n_16 + i] == 1.0F ? one : 0) << "bernoulli " << i;
    }
    EXPECT_EQ(read(narrow_after, n_after), read(wide_after, n_after));
  }
}

TEST_F(rng_fill_test, a_half_or_bfloat16_uniform_value_that_rounds_to_high_is_low) {
  // Four ulps of the type above 1: an eighth of the fp32 values round up to `high`.
  constexpr std::size_t n = 256;
  float* wide = allocate<float>(n);
  auto* narrow = allocate<std::uint16_t>(n);
  for (gs::dtype const type : sixteen_bit_types) {
    SCOPED_TRACE(gs::name(type));
    float const ulp = type == gs::dtype::float16 ? 0x1p-10F : 0x1p-7F;
    float const bound_low = 1.0F;
    float const bound_high = 1.0F + 4 * ulp;
    gr::capture_safe_rng fp32{17, *stream_};
    fp32.uniform({wide, gs::dtype::float32, n}, bound_low, bound_high, *stream_);
    gr::capture_safe_rng rounded{17, *stream_};
    rounded.uniform({narrow, type, n}, bound_low, bound_high, *stream_);
    auto const values = read(wide, n);
    auto const got = read(narrow, n);
    std::size_t reached_high = 0;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_LT(values[i], bound_high);
      float const value = widened(type, got[i]);
      ASSERT_TRUE(value >= bound_low && value < bound_high) << value << " at " << i;
      if (rounded_bits(type, values[i]) == rounded_bits(type, bound_high)) {
        ++reached_high;
        ASSERT_EQ(got[i], rounded_bits(type, bound_low)) << i;
      } else {
        ASSERT_EQ(got[i], rounded_bits(type, values[i])) << i;
      }
    }
    EXPECT_GE(reached_high, 1U) << "no value rounded to high: the rule was not exercised";
    fp32.end_step(*stream_);
    rounded.end_step(*stream_);
  }
}

TEST_F(rng_fill_test, half_and_bfloat16_replays_draw_new_values_equal_to_the_eager_fills) {
  constexpr int steps = 3;
  auto* out = allocate<std::uint16_t>(6 * n_16);
  auto fills = [&](gr::capture_safe_rng& rng) {
    std::uint16_t* next = out;
    for (gs::dtype const type : sixteen_bit_types) {
      rng.uniform({next, type, n_16}, low, high, *stream_);
      rng.normal({next + n_16, type, n_16}, mean, stddev, *stream_);
      rng.bernoulli({next + 2 * n_16, type, n_16}, p, *stream_);
      next += 3 * n_16;
    }
    rng.end_step(*stream_);
  };
  std::vector<std::vector<std::uint16_t>> eager;
  {
    gr::capture_safe_rng rng{63, *stream_};
    for (int i = 0; i < steps; ++i) {
      fills(rng);
      eager.push_back(read(out, 6 * n_16));
    }
  }
  EXPECT_NE(eager[0], eager[1]) << "each step must draw new values";
  gr::capture_safe_rng rng{63, *stream_};
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] { fills(rng); });
  for (int i = 0; i < steps; ++i) {
    g.replay(*stream_);
    EXPECT_EQ(read(out, 6 * n_16), eager[static_cast<std::size_t>(i)]) << "replay " << i;
  }
}

TEST_F(rng_fill_test, refused_half_and_bfloat16_arguments_say_why_and_reserve_nothing) {
  gr::capture_safe_rng rng{29, *stream_};
  auto* out = allocate<std::uint16_t>(8);
  using gs::testing::message_of;
  auto const refusal = [](auto&& call, char const* says) {
    std::string const what = message_of(call);
    EXPECT_NE(what.find(says), std::string::npos) << what;
  };
  auto const fp16 = gs::dtype::float16;
  auto const bf16 = gs::dtype::bfloat16;
  auto const not_a_dtype = static_cast<gs::dtype>(7);
  void* const odd = reinterpret_cast<char*>(out) + 1;
  refusal(
      [&] {
        rng.uniform({nullptr, fp16, 4}, 0.0F, 1.0F, *stream_);
      },
      "capture_safe_rng::uniform: out is a null pointer");
  refusal(
      [&] {
        rng.normal({nullptr, bf16, 4}, 0.0F, 1.0F, *stream_);
      },
      "capture_safe_rng::normal: out is a null pointer");
  refusal(
      [&] {
        rng.bernoulli({nullptr, fp16, 4}, 0.5F, *stream_);
      },
      "capture_safe_rng::bernoulli: out is a null pointer");
  refusal(
      [&] {
        rng.uniform({out, not_a_dtype, 4}, 0.0F, 1.0F, *stream_);
      },
      "capture_safe_rng::uniform: out has an unknown dtype (7)");
  refusal(
      [&] {
        rng.normal({out, not_a_dtype, 4}, 0.0F, 1.0F, *stream_);
      },
      "capture_safe_rng::normal: out has an unknown dtype (7)");
  refusal(
      [&] {
        rng.bernoulli({out, not_a_dtype, 4}, 0.5F, *stream_);
      },
      "capture_safe_rng::bernoulli: out has an unknown dtype (7)");
  // Integers hold no uniform or normal value; a byte mask (uint8) takes bernoulli draws only.
  refusal(
      [&] {
        rng.uniform({out, gs::dtype::int32, 4}, 0.0F, 1.0F, *stream_);
      },
      "capture_safe_rng::uniform: out is int32; it takes float32, float16 or bfloat16");
  refusal(
      [&] {
        rng.normal({out, gs::dtype::uint8, 4}, 0.0F, 1.0F, *stream_);
      },
      "capture_safe_rng::normal: out is uint8; it takes float32, float16 or bfloat16");
  refusal(
      [&] {
        rng.bernoulli({out, gs::dtype::int32, 4}, 0.5F, *stream_);
      },
      "capture_safe_rng::bernoulli: out is int32; it takes float32, float16 or bfloat16");
  refusal(
      [&] {
        rng.uniform({odd, bf16, 4}, 0.0F, 1.0F, *stream_);
      },
      "capture_safe_rng::uniform: out is not aligned to the 2 bytes of its dtype bfloat16");
  refusal(
      [&] {
        rng.uniform({out, fp16, 4}, 1.0F, 0.0F, *stream_);
      },
      "capture_safe_rng::uniform: low must not exceed high");
  refusal(
      [&] {
        rng.uniform({out, fp16, 4}, 0.0F, 70000.0F, *stream_);
      },
      "capture_safe_rng::uniform: low and high must lie within the finite range of float16");
  refusal(
      [&] {
        rng.uniform({out, bf16, 4}, -3.4e38F, 0.0F, *stream_);
      },
      "capture_safe_rng::uniform: low and high must lie within the finite range of bfloat16");
  refusal(
      [&] {
        rng.normal({out, bf16, 4}, 0.0F, -1.0F, *stream_);
      },
      "capture_safe_rng::normal: std must be finite and >= 0");
  refusal(
      [&] {
        rng.bernoulli({out, fp16, 4}, 1.5F, *stream_);
      },
      "capture_safe_rng::bernoulli: p must lie in [0, 1]");
  // Nothing was reserved: a fill draws from position 0 still.
  rng.uniform({out, fp16, 8}, 0.0F, 1.0F, *stream_);
  rng.end_step(*stream_);
  auto const expected = gr::reference::uniform_fill(29, 0, 8, 0.0F, 1.0F);
  auto const got = read(out, 8);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i], expected_uniform(fp16, expected[i], 0.0F, 1.0F)) << i;
  }
}
