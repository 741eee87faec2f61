// The layer norm and add launchers refuse bad arguments before any CUDA call: null and
// misaligned pointers, non-positive sizes, a non-positive epsilon, aliases the kernels do not
// support, a missing or misaligned workspace. The pointers are fake addresses, never touched.
// (Too little workspace needs the device's SM count: layer_norm_gpu_test.cu checks it.)

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/layer_norm.hpp>
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
float* fake_floats(std::uintptr_t slot, std::uintptr_t offset = 0) {
  return static_cast<float*>(fake(slot, offset));
}

gs::cuda::stream_view const stream{cudaStreamPerThread};

// The forward's arguments, valid until a test changes one.
struct forward_call {
  void* y{fake(1)};
  float* mean{fake_floats(2)};
  float* rstd{fake_floats(3)};
  void const* x{fake(4)};
  void const* gamma{fake(5)};
  void const* beta{fake(6)};
  std::int64_t m{4};
  std::int64_t n{768};
  float epsilon{1e-5F};
  gs::dtype type{gs::dtype::bfloat16};
  void operator()() const {
    go::launch_layer_norm_forward(y, mean, rstd, x, gamma, beta, m, n, epsilon, type, stream);
  }
};

struct backward_call {
  void* dx{fake(1)};
  void* dgamma{fake(2)};
  void* dbeta{fake(3)};
  void const* dy{fake(4)};
  void const* x{fake(5)};
  void const* gamma{fake(6)};
  float const* mean{fake_floats(7)};
  float const* rstd{fake_floats(8)};
  std::int64_t m{4};
  std::int64_t n{768};
  gs::dtype type{gs::dtype::bfloat16};
  void* workspace{fake(9)};
  std::size_t workspace_bytes{1 << 20};
  void operator()() const {
    go::launch_layer_norm_backward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, m, n, true, type,
                                   workspace, workspace_bytes, stream);
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
       std::vector<pointer_case>{{"y", [](forward_call& f) { f.y = nullptr; }},
                                 {"mean", [](forward_call& f) { f.mean = nullptr; }},
                                 {"rstd", [](forward_call& f) { f.rstd = nullptr; }},
                                 {"x", [](forward_call& f) { f.x = nullptr; }},
                                 {"gamma", [](forward_call& f) { f.gamma = nullptr; }},
                                 {"beta", [](forward_call& f) { f.beta = nullptr; }}}) {
    forward_call f;
    c.clear(f);
    expect_refused(f, {"layer_norm_forward", std::string{c.name} + " is a null pointer"}, c.name);
  }
}

TEST(layer_norm_forward_arguments, pointers_off_their_element_are_refused) {
  forward_call x_off;
  x_off.x = fake(4, 1);
  expect_refused(x_off, {"layer_norm_forward: x", "not aligned", "2 bytes", "bfloat16"}, "x");
  forward_call gamma_off;
  gamma_off.type = gs::dtype::float32;
  gamma_off.gamma = fake(5, 2);
  expect_refused(gamma_off, {"gamma", "not aligned", "4 bytes", "float32"}, "gamma");
  forward_call y_off;
  y_off.y = fake(1, 1);
  expect_refused(y_off, {"layer_norm_forward: y", "not aligned"}, "y");
  forward_call beta_off;
  beta_off.beta = fake(6, 1);
  expect_refused(beta_off, {"layer_norm_forward: beta", "not aligned"}, "beta");
  // The statistics are fp32 whatever the storage type.
  forward_call mean_off;
  mean_off.mean = fake_floats(2, 2);
  expect_refused(mean_off, {"layer_norm_forward: mean", "not aligned", "4 bytes"}, "mean");
  forward_call rstd_off;
  rstd_off.rstd = fake_floats(3, 2);
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
  in_place.y = const_cast<void*>(in_place.x);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  expect_refused(in_place, {"layer_norm_forward", "y may not alias x"}, "alias");
  forward_call unknown;
  unknown.type = static_cast<gs::dtype>(7);
  expect_refused(unknown, {"layer_norm_forward", "unknown dtype"}, "type");
  forward_call integers;
  integers.type = gs::dtype::int32;
  expect_refused(integers, {"layer_norm_forward: type is int32; it takes float32"}, "int32");
}

TEST(layer_norm_backward_arguments, null_pointers_are_named) {
  struct pointer_case {
    char const* name;
    void (*clear)(backward_call&);
  };
  for (auto const& c :
       std::vector<pointer_case>{{"dx", [](backward_call& b) { b.dx = nullptr; }},
                                 {"dgamma", [](backward_call& b) { b.dgamma = nullptr; }},
                                 {"dbeta", [](backward_call& b) { b.dbeta = nullptr; }},
                                 {"dy", [](backward_call& b) { b.dy = nullptr; }},
                                 {"x", [](backward_call& b) { b.x = nullptr; }},
                                 {"gamma", [](backward_call& b) { b.gamma = nullptr; }},
                                 {"mean", [](backward_call& b) { b.mean = nullptr; }},
                                 {"rstd", [](backward_call& b) { b.rstd = nullptr; }}}) {
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
  dx_off.dx = fake(1, 1);
  expect_refused(dx_off, {"layer_norm_backward: dx", "not aligned", "2 bytes"}, "dx");
  backward_call dy_off;
  dy_off.type = gs::dtype::float32;
  dy_off.dy = fake(4, 2);
  expect_refused(dy_off, {"layer_norm_backward: dy", "not aligned", "4 bytes"}, "dy");
  backward_call dgamma_off;
  dgamma_off.dgamma = fake(2, 1);
  expect_refused(dgamma_off, {"layer_norm_backward: dgamma", "not aligned"}, "dgamma");
  backward_call rstd_off;
  rstd_off.rstd = fake_floats(8, 1);
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
  onto_dy.dx = const_cast<void*>(onto_dy.dy);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  expect_refused(onto_dy, {"layer_norm_backward", "dx may not alias dy or x"}, "dy alias");
  backward_call onto_x;
  onto_x.dx = const_cast<void*>(onto_x.x);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  expect_refused(onto_x, {"layer_norm_backward", "dx may not alias dy or x"}, "x alias");
}

TEST(layer_norm_backward_arguments, workspace_size_refuses_non_positive_sizes) {
  for (auto const& size : {std::pair<std::int64_t, std::int64_t>{0, 768}, {16, 0}, {-1, -1}}) {
    std::string const message = message_of([&] {
      static_cast<void>(go::layer_norm_backward_workspace_size(size.first, size.second));
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
    return [=] { go::launch_add(out, a, b, stream); };
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
