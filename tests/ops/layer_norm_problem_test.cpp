// layer_norm_problem and check_add (ops/layer_norm_problem.hpp), which the layer norm and add
// launchers call before any CUDA call: null and misaligned pointers, non-positive sizes, a
// non-positive epsilon, aliases the kernels do not support, a missing, misaligned or too small
// workspace; and the backward's row slicing and workspace size for a given SM count. The
// pointers are fake addresses, never touched.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/layer_norm_problem.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/error_message.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;

namespace {

using gs::testing::contains;
using gs::testing::message_of;

// A fake device address `offset` bytes past a 256-byte boundary.
void* fake(std::uintptr_t slot, std::uintptr_t offset = 0) {
  return reinterpret_cast<void*>(0x100000 + slot * 0x1000 +
                                 offset);  // NOLINT(performance-no-int-to-ptr)
}

// An SM count for the workspace checks: an H100's.
constexpr int multiprocessors = 132;

// `span` moved to `address`: the same type and count somewhere else.
gs::device_span at(void* address, gs::device_span span) {
  return {address, span.type(), span.count()};
}

// The forward's arguments, valid until a test changes one: [M, N] data of `type`, fp32
// statistics.
struct forward_call {
  explicit forward_call(gs::dtype type = gs::dtype::bfloat16)
      : y{fake(1), type, 4 * 768},
        mean{fake(2), gs::dtype::float32, 4},
        rstd{fake(3), gs::dtype::float32, 4},
        x{fake(4), type, 4 * 768},
        gamma{fake(5), type, 768},
        beta{fake(6), type, 768} {}
  gs::device_span y;
  gs::device_span mean;
  gs::device_span rstd;
  gs::device_span x;
  gs::device_span gamma;
  gs::device_span beta;
  std::int64_t m{4};
  std::int64_t n{768};
  float epsilon{1e-5F};
  void operator()() const {
    static_cast<void>(
        go::layer_norm_problem{m, n}.check_forward(y, mean, rstd, x, gamma, beta, epsilon));
  }
};

struct backward_call {
  explicit backward_call(gs::dtype type = gs::dtype::bfloat16)
      : dx{fake(1), type, 4 * 768},
        dgamma{fake(2), type, 768},
        dbeta{fake(3), type, 768},
        dy{fake(4), type, 4 * 768},
        x{fake(5), type, 4 * 768},
        gamma{fake(6), type, 768},
        mean{fake(7), gs::dtype::float32, 4},
        rstd{fake(8), gs::dtype::float32, 4} {}
  gs::device_span dx;
  gs::device_span dgamma;
  gs::device_span dbeta;
  gs::device_span dy;
  gs::device_span x;
  gs::device_span gamma;
  gs::device_span mean;
  gs::device_span rstd;
  std::int64_t m{4};
  std::int64_t n{768};
  void* workspace{fake(9)};
  std::size_t workspace_bytes{1 << 20};
  void operator()() const {
    go::layer_norm_problem const problem{m, n};
    static_cast<void>(
        problem.check_backward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, workspace));
    problem.check_backward_workspace(workspace_bytes, multiprocessors);
  }
};

template <typename Call>
void expect_refused(Call const& call, std::vector<std::string> const& words,
                    std::string const& case_name) {
  std::string const message = message_of([&] { call(); });
  for (auto const& word : words) {
    EXPECT_TRUE(contains(message, word)) << case_name << ": \"" << word << "\" not in: " << message;
  }
}

}  // namespace

TEST(layer_norm_forward_arguments, null_pointers_are_named) {
  struct pointer_case {
    char const* name;
    void (*clear)(forward_call&);
  };
  for (auto const& c :
       std::vector<pointer_case>{{"y", [](forward_call& f) { f.y = at(nullptr, f.y); }},
                                 {"mean", [](forward_call& f) { f.mean = at(nullptr, f.mean); }},
                                 {"rstd", [](forward_call& f) { f.rstd = at(nullptr, f.rstd); }},
                                 {"x", [](forward_call& f) { f.x = at(nullptr, f.x); }},
                                 {"gamma", [](forward_call& f) { f.gamma = at(nullptr, f.gamma); }},
                                 {"beta", [](forward_call& f) { f.beta = at(nullptr, f.beta); }}}) {
    forward_call f;
    c.clear(f);
    expect_refused(f, {"layer_norm_forward", std::string{c.name} + " is a null pointer"}, c.name);
  }
}

TEST(layer_norm_forward_arguments, pointers_off_their_element_are_refused) {
  forward_call x_off;
  x_off.x = at(fake(4, 1), x_off.x);
  expect_refused(x_off, {"layer_norm_forward: x", "not aligned", "2 bytes", "bfloat16"}, "x");
  forward_call gamma_off{gs::dtype::float32};
  gamma_off.gamma = at(fake(5, 2), gamma_off.gamma);
  expect_refused(gamma_off, {"gamma", "not aligned", "4 bytes", "float32"}, "gamma");
  forward_call y_off;
  y_off.y = at(fake(1, 1), y_off.y);
  expect_refused(y_off, {"layer_norm_forward: y", "not aligned"}, "y");
  forward_call beta_off;
  beta_off.beta = at(fake(6, 1), beta_off.beta);
  expect_refused(beta_off, {"layer_norm_forward: beta", "not aligned"}, "beta");
  // The statistics are fp32 whatever the storage type.
  forward_call mean_off;
  mean_off.mean = at(fake(2, 2), mean_off.mean);
  expect_refused(mean_off, {"layer_norm_forward: mean", "not aligned", "4 bytes"}, "mean");
  forward_call rstd_off;
  rstd_off.rstd = at(fake(3, 2), rstd_off.rstd);
  expect_refused(rstd_off, {"layer_norm_forward: rstd", "not aligned", "4 bytes"}, "rstd");
}

TEST(layer_norm_forward_arguments, sizes_epsilon_alias_and_type_are_checked) {
  for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{0, 8}, {8, 0}, {-1, 8}, {8, -3}}) {
    forward_call f;
    f.m = m;
    f.n = n;
    expect_refused(f,
                   {"layer_norm_forward", "sizes must be positive",
                    "M=" + std::to_string(m) + ", N=" + std::to_string(n)},
                   "sizes");
  }
  forward_call too_tall;
  too_tall.m = std::int64_t{1} << 40;
  expect_refused(too_tall, {"layer_norm_forward", "too many rows"}, "rows");
  for (float e : {0.0F, -1e-5F, std::nanf("")}) {
    forward_call f;
    f.epsilon = e;
    expect_refused(f, {"layer_norm_forward", "epsilon must be positive"}, "epsilon");
  }
  forward_call in_place;
  in_place.y = in_place.x;
  expect_refused(in_place, {"layer_norm_forward", "y may not alias x"}, "alias");
  forward_call const unknown{static_cast<gs::dtype>(7)};
  expect_refused(unknown, {"layer_norm_forward", "unknown dtype"}, "type");
  forward_call const integers{gs::dtype::int32};
  expect_refused(integers, {"layer_norm_forward: x is int32; it takes float32"}, "int32");
}

// A span names its type and how many elements it holds: one of another type, or too short for
// the sizes, is refused before anything is enqueued, naming the operand and what the sizes need.
TEST(layer_norm_arguments, spans_of_another_type_or_too_few_elements_are_refused) {
  forward_call short_y;
  short_y.y = gs::device_span{fake(1), gs::dtype::bfloat16, 4 * 768 - 1};
  expect_refused(
      short_y, {"layer_norm_forward: y is 3071 bfloat16", "but the sizes need 3072 elements"}, "y");
  forward_call short_gamma;
  short_gamma.gamma = gs::device_span{fake(5), gs::dtype::bfloat16, 767};
  expect_refused(short_gamma, {"layer_norm_forward: gamma is 767 bfloat16", "need 768"}, "gamma");
  forward_call half_stats;
  half_stats.rstd = gs::device_span{fake(3), gs::dtype::bfloat16, 4};
  expect_refused(half_stats, {"layer_norm_forward: rstd is 4 bfloat16", "it must hold float32"},
                 "rstd");
  backward_call short_mean;
  short_mean.mean = gs::device_span{fake(7), gs::dtype::float32, 3};
  expect_refused(short_mean, {"layer_norm_backward: mean is 3 float32", "need 4"}, "mean");
  backward_call mixed;
  mixed.dy = gs::device_span{fake(4), gs::dtype::float16, 4 * 768};
  expect_refused(mixed, {"layer_norm_backward: dy is 3072 float16", "it must hold bfloat16"}, "dy");
}

TEST(layer_norm_backward_arguments, null_pointers_are_named) {
  struct pointer_case {
    char const* name;
    void (*clear)(backward_call&);
  };
  for (auto const& c : std::vector<pointer_case>{
           {"dx", [](backward_call& b) { b.dx = at(nullptr, b.dx); }},
           {"dgamma", [](backward_call& b) { b.dgamma = at(nullptr, b.dgamma); }},
           {"dbeta", [](backward_call& b) { b.dbeta = at(nullptr, b.dbeta); }},
           {"dy", [](backward_call& b) { b.dy = at(nullptr, b.dy); }},
           {"x", [](backward_call& b) { b.x = at(nullptr, b.x); }},
           {"gamma", [](backward_call& b) { b.gamma = at(nullptr, b.gamma); }},
           {"mean", [](backward_call& b) { b.mean = at(nullptr, b.mean); }},
           {"rstd", [](backward_call& b) { b.rstd = at(nullptr, b.rstd); }}}) {
    backward_call b;
    c.clear(b);
    expect_refused(b, {"layer_norm_backward", std::string{c.name} + " is a null pointer"}, c.name);
  }
  backward_call no_workspace;
  no_workspace.workspace = nullptr;
  expect_refused(
      no_workspace,
      {"layer_norm_backward", "workspace is required", "layer_norm_backward_workspace_size"},
      "workspace");
}

TEST(layer_norm_backward_arguments, misaligned_pointers_sizes_and_aliases_are_refused) {
  backward_call dx_off;
  dx_off.dx = at(fake(1, 1), dx_off.dx);
  expect_refused(dx_off, {"layer_norm_backward: dx", "not aligned", "2 bytes"}, "dx");
  backward_call dy_off{gs::dtype::float32};
  dy_off.dy = at(fake(4, 2), dy_off.dy);
  expect_refused(dy_off, {"layer_norm_backward: dy", "not aligned", "4 bytes"}, "dy");
  backward_call dgamma_off;
  dgamma_off.dgamma = at(fake(2, 1), dgamma_off.dgamma);
  expect_refused(dgamma_off, {"layer_norm_backward: dgamma", "not aligned"}, "dgamma");
  backward_call rstd_off;
  rstd_off.rstd = at(fake(8, 1), rstd_off.rstd);
  expect_refused(rstd_off, {"layer_norm_backward: rstd", "not aligned"}, "rstd");
  backward_call workspace_off;
  workspace_off.workspace = fake(9, 2);
  expect_refused(workspace_off, {"layer_norm_backward", "workspace must be 4-byte aligned"},
                 "workspace");
  for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{0, 8}, {8, 0}, {-5, 8}}) {
    backward_call b;
    b.m = m;
    b.n = n;
    expect_refused(b, {"layer_norm_backward", "sizes must be positive"}, "sizes");
  }
  backward_call onto_dy;
  onto_dy.dx = onto_dy.dy;
  expect_refused(onto_dy, {"layer_norm_backward", "dx may not alias dy or x"}, "dy alias");
  backward_call onto_x;
  onto_x.dx = onto_x.x;
  expect_refused(onto_x, {"layer_norm_backward", "dx may not alias dy or x"}, "x alias");
}

TEST(layer_norm_backward_arguments, workspace_size_refuses_non_positive_sizes) {
  for (auto const& size : {std::pair<std::int64_t, std::int64_t>{0, 768}, {16, 0}, {-1, -1}}) {
    std::string const message = message_of([&] {
      static_cast<void>(go::layer_norm_problem{size.first, size.second}.backward_workspace_bytes(
          multiprocessors));
    });
    EXPECT_TRUE(contains(message, "layer_norm_backward_workspace_size")) << message;
    EXPECT_TRUE(contains(message, "sizes must be positive")) << message;
  }
}

TEST(add_arguments, null_misaligned_empty_and_unlike_spans_are_refused) {
  auto const bf16 = gs::dtype::bfloat16;
  auto const span = [](void* data, gs::dtype type = gs::dtype::bfloat16, std::size_t count = 8) {
    return gs::device_span{data, type, count};
  };
  auto const add = [](gs::device_span out, gs::device_span a, gs::device_span b) {
    return [=] { static_cast<void>(go::check_add(out, a, b)); };
  };
  expect_refused(add(span(nullptr), span(fake(1)), span(fake(2))), {"add: out is a null pointer"},
                 "out");
  expect_refused(add(span(fake(0)), span(nullptr), span(fake(2))), {"add: a is a null pointer"},
                 "a");
  expect_refused(add(span(fake(0)), span(fake(1)), span(nullptr)), {"add: b is a null pointer"},
                 "b");
  expect_refused(add(span(fake(0, 1)), span(fake(1)), span(fake(2))), {"add: out", "not aligned"},
                 "out aligned");
  auto const fp32 = gs::dtype::float32;
  expect_refused(add(span(fake(0), fp32), span(fake(1, 2), fp32), span(fake(2), fp32)),
                 {"add: a", "not aligned", "4 bytes"}, "a aligned");
  auto const fp16 = gs::dtype::float16;
  expect_refused(add(span(fake(0), fp16), span(fake(1), fp16), span(fake(2, 1), fp16)),
                 {"add: b", "not aligned", "float16"}, "b aligned");
  expect_refused(add(span(fake(0), bf16, 0), span(fake(1), bf16, 0), span(fake(2), bf16, 0)),
                 {"add: out holds no element"}, "empty");
  expect_refused(add(span(fake(0)), span(fake(1), fp32), span(fake(2))),
                 {"add: a is 8 float32", "but out is 8 bfloat16", "one dtype and one count"},
                 "dtype");
  expect_refused(add(span(fake(0)), span(fake(1)), span(fake(2), bf16, 7)),
                 {"add: b is 7 bfloat16", "but out is 8 bfloat16"}, "count");
  auto const int32 = gs::dtype::int32;
  expect_refused(add(span(fake(0), int32), span(fake(1), int32), span(fake(2), int32)),
                 {"add: out is int32; it takes float32, float16 or bfloat16"}, "integers");
}

TEST(layer_norm_forward_arguments, valid_operands_pass_and_name_their_type) {
  for (auto type : {gs::dtype::float32, gs::dtype::float16, gs::dtype::bfloat16}) {
    forward_call const f{type};
    EXPECT_EQ((go::layer_norm_problem{f.m, f.n})
                  .check_forward(f.y, f.mean, f.rstd, f.x, f.gamma, f.beta, f.epsilon),
              type);
  }
  backward_call const b;
  EXPECT_EQ(
      (go::layer_norm_problem{b.m, b.n})
          .check_backward(b.dx, b.dgamma, b.dbeta, b.dy, b.x, b.gamma, b.mean, b.rstd, b.workspace),
      gs::dtype::bfloat16);
}

// The operands and the workspace's address need no SM count, so the launcher refuses a wrong
// call before it asks a device for one; the workspace's size is checked apart, for an SM count.
TEST(layer_norm_backward_arguments, operands_are_checked_apart_from_the_workspace_size) {
  backward_call b;
  b.m = 16384;
  b.dx = gs::device_span{fake(1), gs::dtype::bfloat16, 16384 * 768};
  b.dy = gs::device_span{fake(4), gs::dtype::bfloat16, 16384 * 768};
  b.x = gs::device_span{fake(5), gs::dtype::bfloat16, 16384 * 768};
  b.mean = gs::device_span{fake(7), gs::dtype::float32, 16384};
  b.rstd = gs::device_span{fake(8), gs::dtype::float32, 16384};
  go::layer_norm_problem const problem{b.m, b.n};
  EXPECT_EQ(problem.check_backward(b.dx, b.dgamma, b.dbeta, b.dy, b.x, b.gamma, b.mean, b.rstd,
                                   b.workspace),
            gs::dtype::bfloat16);
  std::size_t const on_one_sm = problem.backward_workspace_bytes(1);
  std::size_t const on_many = problem.backward_workspace_bytes(multiprocessors);
  ASSERT_LT(on_one_sm, on_many);  // the size depends on the SM count
  EXPECT_NO_THROW(problem.check_backward_workspace(on_one_sm, 1));
  std::string const message =
      message_of([&] { problem.check_backward_workspace(on_one_sm, multiprocessors); });
  EXPECT_TRUE(contains(message, "layer_norm_backward: too little workspace")) << message;
  EXPECT_TRUE(contains(message, std::to_string(on_many) + " needed")) << message;
}

// The workspace the backward needs depends on the SM count: too little is refused with what
// was given, what is needed and where to ask.
TEST(layer_norm_backward_arguments, too_little_workspace_is_refused_with_the_size_needed) {
  backward_call b;
  b.m = 16384;
  b.dx = gs::device_span{fake(1), gs::dtype::bfloat16, 16384 * 768};
  b.dy = gs::device_span{fake(4), gs::dtype::bfloat16, 16384 * 768};
  b.x = gs::device_span{fake(5), gs::dtype::bfloat16, 16384 * 768};
  b.mean = gs::device_span{fake(7), gs::dtype::float32, 16384};
  b.rstd = gs::device_span{fake(8), gs::dtype::float32, 16384};
  std::size_t const needed =
      go::layer_norm_problem{b.m, b.n}.backward_workspace_bytes(multiprocessors);
  b.workspace_bytes = needed;
  EXPECT_NO_THROW(b());
  b.workspace_bytes = needed - 1;
  expect_refused(
      b,
      {"layer_norm_backward: too little workspace", std::to_string(needed - 1) + " bytes given",
       std::to_string(needed) + " needed", "M=16384, N=768", "layer_norm_backward_workspace_size"},
      "workspace");
}

// Three slices per SM, each a whole number of rows, no slice empty or above 1024 rows, every
// row in exactly one slice; the workspace holds 2N fp32 sums per slice.
TEST(layer_norm_problem, backward_slicing_covers_every_row_once) {
  for (int sms : {1, 8, 132}) {
    for (std::int64_t m : {1, 7, 8, 9, 42, 1000, 16384, 100000}) {
      go::layer_norm_problem const problem{m, 768};
      go::layer_norm_slicing const s = problem.backward_slicing(sms);
      SCOPED_TRACE("SMs " + std::to_string(sms) + ", M " + std::to_string(m));
      EXPECT_GE(s.slices, 1);
      EXPECT_LE(s.rows_per_slice, go::layer_norm_problem::max_rows_per_slice);
      EXPECT_GE(s.slices * s.rows_per_slice, m);        // every row in a slice
      EXPECT_LT((s.slices - 1) * s.rows_per_slice, m);  // the last slice not empty
      EXPECT_LE(s.slices, std::max<std::int64_t>(3 * sms, (m + 1023) / 1024));
      EXPECT_EQ(problem.backward_workspace_bytes(sms),
                static_cast<std::size_t>(s.slices) * 2 * 768 * sizeof(float));
    }
  }
  // The worked example of kernels/ops/layer_norm.cu: M = 16384 on 132 SMs.
  go::layer_norm_slicing const h100 = go::layer_norm_problem{16384, 768}.backward_slicing(132);
  EXPECT_EQ(h100.slices, 391);
  EXPECT_EQ(h100.rows_per_slice, 42);
}
