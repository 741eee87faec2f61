// Softmax cross-entropy on the GPU against the fp64 reference of ops/reference.hpp, for fp32,
// fp16 and bf16 logits: vocabularies that are no multiple of anything (1000 padded to 1024, 77
// padded to 128 and unpadded, 3000 padded to 3008, several packs a thread), few rows, a
// misaligned operand (the scalar path), rows far from zero; gradients poisoned with NaN before
// each run; in place against apart; targets outside the vocabulary; the same bytes on a second
// run and from a captured graph.
//
// Bounds. The loss is fp32 whatever the storage: each row adds up to 3000 exponentials (expf
// within 2 ulp), in runs of a few per thread and a 9-level tree, and takes one log: a relative
// error of a few 1e-6 in the sum, so the row's loss is off by a few 1e-6 plus rounding of its
// terms; the tests allow 1e-5 · (1 + |loss|). A gradient element is (p − onehot) · scale / M
// with p computed to a few 1e-6 relative, then rounded once to the storage type (u = 2^-24,
// 2^-11, 2^-8; near zero the subnormal spacing / 2, which matters for fp16): the tests allow
// 2 · (u · |want| + that spacing + 1e-5 · (p + onehot) · |scale / M|). Padded columns must be
// exactly zero.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/ops/cross_entropy.hpp>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/stream_test.hpp"
#include "common/typed_device_values.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace ref = graphstep::ops::reference;
using gs::testing::device_array;
using gs::testing::device_values;
using gs::testing::underflow;
using gs::testing::unit_roundoff;

namespace {

struct problem {
  std::int64_t rows, vocab, padded_vocab;
  std::size_t offset_bytes;  ///< not a multiple of 16: the scalar path
  [[nodiscard]] std::string name(gs::dtype type) const {
    return std::string{gs::name(type)} + " M=" + std::to_string(rows) +
           " V=" + std::to_string(vocab) + " padded=" + std::to_string(padded_vocab) +
           " offset=" + std::to_string(offset_bytes);
  }
  [[nodiscard]] go::cross_entropy_shape shape() const { return {rows, vocab, padded_vocab}; }
  [[nodiscard]] std::size_t elements() const {
    return static_cast<std::size_t>(rows * padded_vocab);
  }
};

constexpr std::array<problem, 5> problems{{
    {3, 1000, 1024, 0},  // GPT-2-like padding, packs straddling the last class
    {5, 77, 128, 0},     // fewer classes than threads
    {2, 77, 77, 0},      // unpadded, odd: the scalar path
    {1, 3000, 3008, 0},  // several packs a thread
    {4, 130, 136, 4},    // misaligned by 4 bytes: the scalar path
}};

constexpr std::array<gs::dtype, 3> types{gs::dtype::float32, gs::dtype::float16,
                                         gs::dtype::bfloat16};

// Logits around 0 with a spread of 3, and a row far from zero (softmax does not care).
std::vector<double> random_logits(problem const& p, std::mt19937& rng) {
  std::normal_distribution<double> dist{0.0, 3.0};
  std::vector<double> v(p.elements());
  for (auto& x : v) x = dist(rng);
  for (std::int64_t c = 0; c < p.padded_vocab; ++c) v[static_cast<std::size_t>(c)] += 40.0;
  return v;
}

std::vector<std::int32_t> random_targets(problem const& p, std::mt19937& rng) {
  std::uniform_int_distribution<std::int32_t> dist{0, static_cast<std::int32_t>(p.vocab) - 1};
  std::vector<std::int32_t> t(static_cast<std::size_t>(p.rows));
  for (auto& x : t) x = dist(rng);
  t.back() = static_cast<std::int32_t>(p.vocab) - 1;  // the last class
  return t;
}

// The gradient of rows `rows_to_check` within the bounds at the top of the file.
void expect_gradient_close(std::vector<double> const& got, std::vector<double> const& want,
                           std::vector<std::int32_t> const& targets, problem const& p,
                           double factor, gs::dtype type, std::string const& what,
                           std::vector<bool> const& rows_to_check) {
  int failures = 0;
  auto const V = static_cast<std::size_t>(p.padded_vocab);
  for (std::size_t i = 0; i < want.size() && failures < 5; ++i) {
    std::size_t const row = i / V;
    if (!rows_to_check[row]) continue;
    double const onehot = static_cast<std::int64_t>(i % V) == targets[row] ? 1.0 : 0.0;
    double const probability = want[i] / factor + onehot;
    // Exactly zero in the padded columns (want = 0 there, and only there).
    double const allowed = want[i] == 0.0
                               ? 0.0
                               : 2.0 * (unit_roundoff(type) * std::fabs(want[i]) + underflow(type) +
                                        1e-5 * (probability + onehot) * std::fabs(factor));
    if (!(std::fabs(got[i] - want[i]) <= allowed)) {
      ++failures;
      ADD_FAILURE() << what << ": row " << row << " column " << i % V << " is " << got[i]
                    << ", want " << want[i] << " ± " << allowed;
    }
  }
}

using cross_entropy_gpu = gs::testing::stream_test;

}  // namespace

TEST_F(cross_entropy_gpu, loss_and_gradient_match_the_reference) {
  std::mt19937 rng{41};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (gs::dtype type : types) {
    for (problem const& p : problems) {
      for (float scale : {1.0F, 2.5F}) {
        std::string const what = p.name(type) + " scale=" + std::to_string(scale);
        auto const targets = random_targets(p, rng);
        device_array<std::int32_t> d_targets{targets};
        device_values logits{type, p.elements(), p.offset_bytes};
        device_values dlogits{type, p.elements(), p.offset_bytes};
        device_array<float> loss{1};
        std::size_t const workspace_bytes = go::cross_entropy_workspace_size(p.shape());
        device_array<float> workspace{workspace_bytes / sizeof(float)};
        auto const h_logits = logits.upload(random_logits(p, rng));
        go::launch_cross_entropy_forward_backward(loss.span(), dlogits.span(), logits.span(),
                                                  d_targets.span(), p.shape(), scale,
                                                  workspace.get(), workspace_bytes, *stream_);
        sync();
        auto const want = ref::cross_entropy(h_logits, targets, static_cast<std::size_t>(p.rows),
                                             static_cast<std::size_t>(p.vocab),
                                             static_cast<std::size_t>(p.padded_vocab), scale);
        double const got_loss = loss.download()[0];
        EXPECT_NEAR(got_loss, want.loss, 1e-5 * (1.0 + std::fabs(want.loss))) << what;
        double const factor = scale / static_cast<double>(p.rows);
        expect_gradient_close(dlogits.download(), want.dlogits, targets, p, factor, type, what,
                              std::vector<bool>(static_cast<std::size_t>(p.rows), true));
        // The logits are only read.
        EXPECT_EQ(logits.download(), h_logits) << what;
      }
    }
  }
}

TEST_F(cross_entropy_gpu, in_place_gives_the_same_bytes_as_apart) {
  std::mt19937 rng{42};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (gs::dtype type : types) {
    for (problem const& p : problems) {
      std::string const what = p.name(type);
      auto const targets = random_targets(p, rng);
      device_array<std::int32_t> d_targets{targets};
      device_values logits{type, p.elements(), p.offset_bytes};
      device_values apart{type, p.elements(), p.offset_bytes};
      device_array<float> loss_apart{1};
      device_array<float> loss_in_place{1};
      std::size_t const workspace_bytes = go::cross_entropy_workspace_size(p.shape());
      device_array<float> workspace{workspace_bytes / sizeof(float)};
      auto const h_logits = logits.upload(random_logits(p, rng));
      go::launch_cross_entropy_forward_backward(loss_apart.span(), apart.span(), logits.span(),
                                                d_targets.span(), p.shape(), 1.0F, workspace.get(),
                                                workspace_bytes, *stream_);
      go::launch_cross_entropy_forward_backward(loss_in_place.span(), logits.span(), logits.span(),
                                                d_targets.span(), p.shape(), 1.0F, workspace.get(),
                                                workspace_bytes, *stream_);
      sync();
      EXPECT_EQ(logits.raw(), apart.raw()) << what;
      EXPECT_EQ(loss_in_place.download(), loss_apart.download()) << what;
      EXPECT_FALSE(std::isnan(loss_apart.download()[0])) << what;
    }
  }
}

TEST_F(cross_entropy_gpu, a_target_outside_the_vocabulary_makes_the_loss_and_its_row_nan) {
  std::mt19937 rng{43};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  problem const p{4, 77, 128, 0};
  for (gs::dtype type : types) {
    for (std::int32_t bad : {-1, 77, 100, 0x7FFFFFFF}) {
      std::string const what = p.name(type) + " target=" + std::to_string(bad);
      auto targets = random_targets(p, rng);
      targets[2] = bad;
      device_array<std::int32_t> d_targets{targets};
      device_values logits{type, p.elements()};
      device_values dlogits{type, p.elements()};
      device_array<float> loss{1};
      std::size_t const workspace_bytes = go::cross_entropy_workspace_size(p.shape());
      device_array<float> workspace{workspace_bytes / sizeof(float)};
      auto const h_logits = logits.upload(random_logits(p, rng));
      go::launch_cross_entropy_forward_backward(loss.span(), dlogits.span(), logits.span(),
                                                d_targets.span(), p.shape(), 1.0F, workspace.get(),
                                                workspace_bytes, *stream_);
      sync();
      EXPECT_TRUE(std::isnan(loss.download()[0])) << what;
      auto const got = dlogits.download();
      auto const want = ref::cross_entropy(h_logits, targets, 4, 77, 128, 1.0);
      EXPECT_TRUE(std::isnan(want.loss));
      for (std::size_t c = 0; c < 128; ++c) {
        EXPECT_TRUE(std::isnan(got[std::size_t{2} * 128 + c])) << what << " column " << c;
      }
      // The other rows are untouched by it.
      expect_gradient_close(got, want.dlogits, targets, p, 0.25, type, what,
                            {true, true, false, true});
    }
  }
}

// Run twice, and captured into a graph and replayed (in place, so the logits are uploaded again
// before each run): the same bytes each time.
TEST_F(cross_entropy_gpu, same_bytes_on_every_run_and_from_a_captured_graph) {
  std::mt19937 rng{44};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (gs::dtype type : types) {
    problem const p{6, 1000, 1024, 0};
    std::string const what = p.name(type);
    auto const targets = random_targets(p, rng);
    device_array<std::int32_t> d_targets{targets};
    device_values logits{type, p.elements()};
    device_array<float> loss{1};
    std::size_t const workspace_bytes = go::cross_entropy_workspace_size(p.shape());
    device_array<float> workspace{workspace_bytes / sizeof(float)};
    auto const h_logits = random_logits(p, rng);
    auto const step = [&] {
      go::launch_cross_entropy_forward_backward(loss.span(), logits.span(), logits.span(),
                                                d_targets.span(), p.shape(), 1.0F, workspace.get(),
                                                workspace_bytes, *stream_);
    };
    auto const run = [&](auto&& launch) {
      logits.upload(h_logits);
      loss.poison();
      launch();
      sync();
      return std::pair{logits.raw(), loss.download()};
    };
    auto const first = run(step);
    EXPECT_FALSE(std::isnan(first.second[0])) << what;
    EXPECT_EQ(run(step), first) << what << ": a second run";
    gs::graphs::graph_exec graph;
    logits.upload(h_logits);
    gs::graphs::capture(graph, *stream_, step);
    EXPECT_EQ(run([&] { graph.replay(*stream_); }), first) << what << ": the captured graph";
    EXPECT_EQ(run([&] { graph.replay(*stream_); }), first) << what << ": the graph again";
  }
}
