// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/layer_norm_problem.hpp>
#include <string>
#include <utility>

#include "detail/span_checks.hpp"
#include "ops/detail/operand_checks.hpp"

namespace graphstep::ops {

std::size_t layer_norm_problem::check_shape(char const* call) const {
  std::size_t const elements = graphstep::detail::matrix_elements(call, m, n);
  // Grid x holds 2^31 - 1 blocks of rows_per_block rows.
  GRAPHSTEP_EXPECTS((m + rows_per_block - 1) / rows_per_block <= std::int64_t{0x7fffffff},
                    std::string{call} + ": M=" + std::to_string(m) +
                        " is too many rows for one launch; split the rows into several calls");
  return elements;
}

dtype layer_norm_problem::check_forward(device_span y, device_span mean, device_span rstd,
                                        device_span x, device_span gamma, device_span beta,
                                        float epsilon) const {
  char const* const what = "layer_norm_forward";
  dtype const type = graphstep::detail::floating_operand_type(what, "x", x);
  std::size_t const matrix = check_shape(what);
  auto const rows = static_cast<std::size_t>(m);
  using graphstep::detail::expect_operand;
  expect_operand(what, "y", y, type, matrix);
  expect_operand(what, "x", x, type, matrix);
  expect_operand(what, "gamma", gamma, type, static_cast<std::size_t>(n));
  expect_operand(what, "beta", beta, type, static_cast<std::size_t>(n));
  expect_operand(what, "mean", mean, dtype::float32, rows);
  expect_operand(what, "rstd", rstd, dtype::float32, rows);
  GRAPHSTEP_EXPECTS(epsilon > 0.0F, "layer_norm_forward: epsilon must be positive (got " +
                                        std::to_string(epsilon) + "); torch's default is 1e-5");
  GRAPHSTEP_EXPECTS(y.data() != x.data(),
                    "layer_norm_forward: y may not alias x; write to another buffer");
  return type;
}

dtype layer_norm_problem::check_backward(device_span dx, device_span dgamma, device_span dbeta,
                                         device_span dy, device_span x, device_span gamma,
                                         device_span mean, device_span rstd,
                                         void const* workspace) const {
  char const* const what = "layer_norm_backward";
  dtype const type = graphstep::detail::floating_operand_type(what, "x", x);
  std::size_t const matrix = check_shape(what);
  auto const rows = static_cast<std::size_t>(m);
  auto const columns = static_cast<std::size_t>(n);
  using graphstep::detail::expect_operand;
  expect_operand(what, "dx", dx, type, matrix);
  expect_operand(what, "dgamma", dgamma, type, columns);
  expect_operand(what, "dbeta", dbeta, type, columns);
  expect_operand(what, "dy", dy, type, matrix);
  expect_operand(what, "x", x, type, matrix);
  expect_operand(what, "gamma", gamma, type, columns);
  expect_operand(what, "mean", mean, dtype::float32, rows);
  expect_operand(what, "rstd", rstd, dtype::float32, rows);
  GRAPHSTEP_EXPECTS(dx.data() != dy.data() && dx.data() != x.data(),
                    "layer_norm_backward: dx may not alias dy or x; write to another buffer");
  GRAPHSTEP_EXPECTS(workspace != nullptr,
                    "layer_norm_backward: the workspace is required (a pointer is null); size it "
                    "with layer_norm_backward_workspace_size");
  GRAPHSTEP_EXPECTS(detail::aligned_to(workspace, alignof(float)),
                    "layer_norm_backward: the workspace must be 4-byte aligned (take it from the "
                    "pool)");
  return type;
}

void layer_norm_problem::check_backward_workspace(std::size_t workspace_bytes,
                                                  int multiprocessors) const {
  std::size_t const needed = backward_workspace_bytes(multiprocessors);
  GRAPHSTEP_EXPECTS(workspace_bytes >= needed, "layer_norm_backward: too little workspace (" +
                                                   std::to_string(workspace_bytes) +
                                                   " bytes given, " + std::to_string(needed) +
                                                   " needed for M=" + std::to_string(m) +
                                                   ", N=" + std::to_string(n) +
                                                   "); size it with "
                                                   "layer_norm_backward_workspace_size");
}

layer_norm_slicing layer_norm_problem::backward_slicing(int multiprocessors) const {
  std::int64_t const wanted = std::int64_t{std::max(multiprocessors, 1)} * blocks_per_sm;
  std::int64_t const by_rows = (m + rows_per_block - 1) / rows_per_block;
  std::int64_t const fewest = (m + max_rows_per_slice - 1) / max_rows_per_slice;
  std::int64_t const slices = std::max(std::min(wanted, by_rows), fewest);
  std::int64_t const rows_per_slice = (m + slices - 1) / slices;
  return {(m + rows_per_slice - 1) / rows_per_slice, rows_per_slice};
}

std::size_t layer_norm_problem::backward_workspace_bytes(int multiprocessors) const {
  static_cast<void>(check_shape("layer_norm_backward_workspace_size"));
  return static_cast<std::size_t>(backward_slicing(multiprocessors).slices) * 2 *
         static_cast<std::size_t>(n) * sizeof(float);
}

dtype check_add(device_span out, device_span a, device_span b) {
  using graphstep::detail::empty_span;
  graphstep::detail::expect_valid_span("add", "out", out, empty_span::refused);
  graphstep::detail::expect_valid_span("add", "a", a);
  graphstep::detail::expect_valid_span("add", "b", b);
  for (auto const& [name, operand] : {std::pair{"a", a}, std::pair{"b", b}}) {
    GRAPHSTEP_EXPECTS(operand.type() == out.type() && operand.count() == out.count(),
                      std::string{"add: "} + name + " is " + describe(operand) + " but out is " +
                          describe(out) + "; the three spans need one dtype and one count");
  }
  graphstep::detail::expect_floating("add: out", out.type());
  return out.type();
}

}  // namespace graphstep::ops
