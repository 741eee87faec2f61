// The token + position embedding on the GPU against the fp64 reference of ops/reference.hpp,
// for fp32, fp16 and bf16 storage: widths that are and are not multiples of the 16-byte pack
// (40, 8, 13, 300; 300 bf16 takes two channel tiles), position counts that are not multiples of
// a thread's 8 ids, misaligned operands and ids (the scalar paths), an id repeated thousands of
// times (more than the block's position list holds at once), ids outside the vocabulary; outputs
// poisoned with NaN before each run; the token gradient written and accumulated; the same bytes on
// a second run and from a captured graph.
//
// Bounds, per element: the forward adds two stored values in fp32 and rounds once to the
// storage type, so |got − want| ≤ (u + 2^-24)·|want| with u = 2^-24, 2^-11, 2^-8 for fp32, fp16,
// bf16. A gradient adds n terms in fp32 (each add off by at most 2^-24 of a partial sum, so in
// all by n·2^-24·Σ|terms|) and rounds once to the storage type (u·|result|, or half the
// subnormal spacing near zero, which matters for fp16); the tests allow twice that, with n the
// number of positions plus one (the accumulated value). Where nothing is added, exactly zero.

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
#include <graphstep/ops/embedding.hpp>
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
using gs::testing::random_values;
using gs::testing::underflow;
using gs::testing::unit_roundoff;

namespace {

std::vector<double> absolute(std::vector<double> v) {
  for (auto& x : v) x = std::fabs(x);
  return v;
}

// Every element within u·|want| + terms·2^-24·magnitude (twice that, for slack; see the top of
// the file); a NaN where a number is wanted fails.
void expect_close(std::vector<double> const& got, std::vector<double> const& want,
                  std::vector<double> const& magnitude, gs::dtype type, double terms,
                  std::string const& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < want.size() && failures < 5; ++i) {
    // Exactly zero where nothing was added (rows of ids that do not occur).
    double const allowed = magnitude[i] == 0.0
                               ? 0.0
                               : 2.0 * (unit_roundoff(type) * std::fabs(want[i]) + underflow(type) +
                                        terms * 0x1p-24 * magnitude[i]);
    if (!(std::fabs(got[i] - want[i]) <= allowed)) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i]
                    << " ± " << allowed;
    }
  }
}

// Random ids in [0, vocab), with some ids outside it at `bad` positions.
std::vector<std::int32_t> random_ids(
    std::size_t count, std::int32_t vocab, std::mt19937& rng,
    std::vector<std::pair<std::size_t, std::int32_t>> const& bad = {}) {
  std::uniform_int_distribution<std::int32_t> dist{0, vocab - 1};
  std::vector<std::int32_t> ids(count);
  for (auto& id : ids) id = dist(rng);
  for (auto [at, id] : bad) ids[at] = id;
  return ids;
}

struct problem {
  std::int64_t batch, sequence, vocab, channels;
  std::size_t offset_bytes;  ///< of every operand: 4 takes the scalar paths
  [[nodiscard]] std::string name(gs::dtype type) const {
    return std::string{gs::name(type)} + " B=" + std::to_string(batch) +
           " T=" + std::to_string(sequence) + " V=" + std::to_string(vocab) +
           " C=" + std::to_string(channels) + " offset=" + std::to_string(offset_bytes);
  }
  [[nodiscard]] std::size_t positions() const { return static_cast<std::size_t>(batch * sequence); }
  [[nodiscard]] go::embedding_shape shape() const { return {batch, sequence, vocab, channels}; }
};

constexpr std::array<problem, 5> problems{{
    {2, 5, 11, 40, 0},  // whole packs (4 of fp32, 8 of fp16/bf16)
    {5, 7, 13, 13, 0},  // no whole packs: the scalar path; 35 positions, a partial id step
    {1, 3, 4, 8, 0},    // one batch row
    {2, 4, 6, 300, 0},  // bf16 and fp16 without whole packs: 300 channels in two tiles
    {3, 5, 5, 16, 4},   // misaligned by 4 bytes: the scalar paths, ids included
}};

constexpr std::array<gs::dtype, 3> types{gs::dtype::float32, gs::dtype::float16,
                                         gs::dtype::bfloat16};

using embedding_gpu = gs::testing::stream_test;

}  // namespace

TEST_F(embedding_gpu, forward_matches_the_reference) {
  std::mt19937 rng{31};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (gs::dtype type : types) {
    for (problem const& p : problems) {
      std::string const what = p.name(type);
      std::size_t const n = p.positions();
      auto const C = static_cast<std::size_t>(p.channels);
      auto const V = static_cast<std::size_t>(p.vocab);
      auto const T = static_cast<std::size_t>(p.sequence);
      auto const ids = random_ids(n, static_cast<std::int32_t>(V), rng);
      device_array<std::int32_t> tokens{ids, p.offset_bytes};
      device_values table{type, V * C, p.offset_bytes};
      device_values positions{type, T * C, p.offset_bytes};
      device_values out{type, n * C, p.offset_bytes};
      auto const h_table = table.upload(random_values(V * C, rng));
      auto const h_positions = positions.upload(random_values(T * C, rng));
      go::launch_embedding_forward(out.span(), tokens.span(), table.span(), positions.span(),
                                   p.shape(), *stream_);
      sync();
      auto const want =
          ref::embedding(ids, h_table, h_positions, static_cast<std::size_t>(p.batch), T, V, C);
      // One fp32 add (2^-24·|sum|) and one rounding to the storage type.
      expect_close(out.download(), want, absolute(want), type, 1.0, what);
    }
  }
}

TEST_F(embedding_gpu, forward_writes_nan_rows_for_ids_outside_the_vocabulary) {
  std::mt19937 rng{32};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (gs::dtype type : types) {
    problem const p{2, 6, 9, 24, 0};
    std::string const what = p.name(type);
    std::size_t const n = p.positions();
    std::size_t const C = 24;
    auto const ids = random_ids(n, 9, rng, {{1, -1}, {4, 9}, {7, 0x7FFFFFFF}, {11, -77}});
    device_array<std::int32_t> tokens{ids};
    device_values table{type, 9 * C};
    device_values positions{type, 6 * C};
    device_values out{type, n * C};
    auto const h_table = table.upload(random_values(9 * C, rng));
    auto const h_positions = positions.upload(random_values(6 * C, rng));
    go::launch_embedding_forward(out.span(), tokens.span(), table.span(), positions.span(),
                                 p.shape(), *stream_);
    auto const got = out.download();
    auto const want = ref::embedding(ids, h_table, h_positions, 2, 6, 9, C);
    for (std::size_t row = 0; row < n; ++row) {
      bool const bad = ids[row] < 0 || ids[row] >= 9;
      for (std::size_t c = 0; c < C; ++c) {
        std::size_t const i = row * C + c;
        EXPECT_EQ(std::isnan(got[i]), bad) << what << " row " << row << " column " << c;
        EXPECT_EQ(std::isnan(want[i]), bad);
        if (!bad) {
          EXPECT_NEAR(got[i], want[i],
                      2.0 * (unit_roundoff(type) * std::fabs(want[i]) + underflow(type)))
              << what << " row " << row;
        }
      }
    }
  }
}

TEST_F(embedding_gpu, backward_matches_the_reference_written_and_accumulated) {
  std::mt19937 rng{33};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (gs::dtype type : types) {
    for (problem const& p : problems) {
      for (bool accumulate : {false, true}) {
        std::string const what = p.name(type) + (accumulate ? " accumulated" : " written");
        std::size_t const n = p.positions();
        auto const C = static_cast<std::size_t>(p.channels);
        auto const V = static_cast<std::size_t>(p.vocab);
        auto const T = static_cast<std::size_t>(p.sequence);
        auto const B = static_cast<std::size_t>(p.batch);
        // Ids outside the vocabulary are ignored: one below, one at vocab.
        auto const ids = random_ids(n, static_cast<std::int32_t>(V), rng,
                                    {{0, static_cast<std::int32_t>(V)}, {n - 1, -1}});
        device_array<std::int32_t> tokens{ids, p.offset_bytes};
        device_values dout{type, n * C, p.offset_bytes};
        device_values token_gradient{type, V * C, p.offset_bytes};
        device_values position_gradient{type, T * C, p.offset_bytes};
        auto const h_dout = dout.upload(random_values(n * C, rng));
        std::vector<double> old(V * C, 0.0);
        if (accumulate) old = token_gradient.upload(random_values(V * C, rng));
        go::launch_embedding_backward(token_gradient.span(), position_gradient.span(), dout.span(),
                                      tokens.span(), p.shape(), accumulate, *stream_);
        sync();
        auto want = ref::embedding_backward(h_dout, ids, B, T, V, C);
        auto magnitude = ref::embedding_backward(absolute(h_dout), ids, B, T, V, C);
        for (std::size_t i = 0; i < V * C; ++i) {
          want.token[i] += old[i];
          magnitude.token[i] += std::fabs(old[i]);
        }
        auto const terms = static_cast<double>(n + 1);
        expect_close(token_gradient.download(), want.token, magnitude.token, type, terms,
                     what + " tokens");
        expect_close(position_gradient.download(), want.position, magnitude.position, type, terms,
                     what + " positions");
      }
    }
  }
}

// One id at most positions: its block collects more positions than its list holds and adds
// them in several rounds; the rest of the ids are rare.
TEST_F(embedding_gpu, backward_of_an_id_repeated_thousands_of_times) {
  std::mt19937 rng{34};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  std::size_t const B = 4;
  std::size_t const T = 600;
  std::size_t const V = 7;
  std::size_t const C = 8;
  std::size_t const n = B * T;
  std::uniform_int_distribution<int> percent{0, 99};
  std::uniform_int_distribution<std::int32_t> other{1, static_cast<std::int32_t>(V) - 1};
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = percent(rng) < 95 ? 0 : other(rng);
  ids[0] = 3;  // the frequent id starts later than the first position
  for (gs::dtype type : {gs::dtype::float32, gs::dtype::bfloat16}) {
    std::string const what = std::string{gs::name(type)} + " repeated id";
    device_array<std::int32_t> tokens{ids};
    device_values dout{type, n * C};
    device_values token_gradient{type, V * C};
    device_values position_gradient{type, T * C};
    auto const h_dout = dout.upload(random_values(n * C, rng));
    go::launch_embedding_backward(token_gradient.span(), position_gradient.span(), dout.span(),
                                  tokens.span(), {4, 600, 7, 8}, false, *stream_);
    auto const want = ref::embedding_backward(h_dout, ids, B, T, V, C);
    auto const magnitude = ref::embedding_backward(absolute(h_dout), ids, B, T, V, C);
    auto const terms = static_cast<double>(n + 1);
    expect_close(token_gradient.download(), want.token, magnitude.token, type, terms,
                 what + " tokens");
    expect_close(position_gradient.download(), want.position, magnitude.position, type, terms,
                 what + " positions");
  }
}

// Run twice, and captured into a graph and replayed: the same bytes each time. The accumulated
// token gradient starts from the same values before each run.
TEST_F(embedding_gpu, same_bytes_on_every_run_and_from_a_captured_graph) {
  std::mt19937 rng{35};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  for (gs::dtype type : types) {
    for (bool accumulate : {false, true}) {
      std::size_t const B = 3;
      std::size_t const T = 6;
      std::size_t const V = 5;
      std::size_t const C = 40;
      std::size_t const n = B * T;
      std::string const what = std::string{gs::name(type)} + (accumulate ? " accumulated" : "");
      go::embedding_shape const shape{3, 6, 5, 40};
      auto const ids = random_ids(n, static_cast<std::int32_t>(V), rng, {{5, -3}});
      device_array<std::int32_t> tokens{ids};
      device_values table{type, V * C};
      device_values positions{type, T * C};
      device_values out{type, n * C};
      device_values dout{type, n * C};
      device_values token_gradient{type, V * C};
      device_values position_gradient{type, T * C};
      auto const h_table = table.upload(random_values(V * C, rng));
      positions.upload(random_values(T * C, rng));
      dout.upload(random_values(n * C, rng));
      auto const step = [&] {
        go::launch_embedding_forward(out.span(), tokens.span(), table.span(), positions.span(),
                                     shape, *stream_);
        go::launch_embedding_backward(token_gradient.span(), position_gradient.span(), dout.span(),
                                      tokens.span(), shape, accumulate, *stream_);
      };
      auto const reset = [&] {
        out.poison();
        position_gradient.poison();
        if (accumulate) {
          token_gradient.upload(h_table);  // any start; the same before every run
        } else {
          token_gradient.poison();
        }
      };
      auto const bytes = [&] {
        sync();
        return std::vector<std::vector<unsigned char>>{out.raw(), token_gradient.raw(),
                                                       position_gradient.raw()};
      };
      reset();
      step();
      auto const first = bytes();
      reset();
      step();
      EXPECT_EQ(bytes(), first) << what << ": a second run";
      gs::graphs::graph_exec graph;
      gs::graphs::capture(graph, *stream_, step);
      reset();
      graph.replay(*stream_);
      EXPECT_EQ(bytes(), first) << what << ": the captured graph";
      reset();
      graph.replay(*stream_);
      EXPECT_EQ(bytes(), first) << what << ": the captured graph again";
    }
  }
}
