// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/gelu_problem.hpp>
#include <string>

#include "detail/span_checks.hpp"
#include "ops/detail/operand_checks.hpp"

namespace graphstep::ops {

using graphstep::detail::expect_operand;

dtype gelu_problem::check_forward(device_span y, device_span pre_activation,
                                  device_span bias) const {
  char const* const what = "bias_gelu";
  dtype const type = graphstep::detail::floating_operand_type(what, "y", y);
  std::size_t const elements = graphstep::detail::matrix_elements(what, m, n);
  expect_operand(what, "y", y, type, elements);
  if (!pre_activation.empty()) {
    expect_operand(what, "pre_activation", pre_activation, type, elements);
  }
  if (!bias.empty()) expect_operand(what, "bias", bias, type, static_cast<std::size_t>(n));
  return type;
}

dtype gelu_problem::check_backward(device_span dz, device_span dy,
                                   device_span pre_activation) const {
  char const* const what = "gelu_backward";
  dtype const type = graphstep::detail::floating_operand_type(what, "dy", dy);
  std::size_t const elements = graphstep::detail::matrix_elements(what, m, n);
  expect_operand(what, "dz", dz, type, elements);
  expect_operand(what, "dy", dy, type, elements);
  expect_operand(what, "pre_activation", pre_activation, type, elements);
  return type;
}

dtype bias_gradient_problem::check(device_span db, device_span dz, void const* workspace,
                                   std::size_t workspace_bytes) const {
  char const* const what = "bias_gradient";
  dtype const type = graphstep::detail::floating_operand_type(what, "dz", dz);
  std::size_t const elements = graphstep::detail::matrix_elements(what, m, n);
  expect_operand(what, "db", db, type, static_cast<std::size_t>(n));
  expect_operand(what, "dz", dz, type, elements);
  // Grid x holds 2^31 - 1 column tiles of at least 32 columns.
  GRAPHSTEP_EXPECTS(n / min_tile_columns < std::int64_t{0x7fffffff},
                    "bias_gradient: N=" + std::to_string(n) +
                        " is too wide for one launch; split the columns into several calls");
  GRAPHSTEP_EXPECTS(workspace_bytes == 0 || workspace != nullptr,
                    "bias_gradient: a workspace size was given without a workspace pointer; pass "
                    "both, or neither for the one-pass sum");
  GRAPHSTEP_EXPECTS(detail::aligned_to(workspace, alignof(float)),
                    "bias_gradient: the workspace must be 4-byte aligned (take it from the pool)");
  return type;
}

std::size_t bias_gradient_problem::workspace_bytes(int multiprocessors) const {
  GRAPHSTEP_EXPECTS(
      n > 0, "bias_gradient_workspace_size: N must be positive (N=" + std::to_string(n) + ")");
  // Slices × N fp32 sums, slices = ⌈blocks wanted / tiles⌉ with tiles ≥ ⌈N / 64⌉ (bf16 or fp16
  // tiles are the widest): at most blocks wanted × 64 + N sums.
  auto const blocks = static_cast<std::size_t>(std::max(multiprocessors, 1)) *
                      static_cast<std::size_t>(blocks_per_sm);
  return (blocks * static_cast<std::size_t>(max_tile_columns) + static_cast<std::size_t>(n)) *
         sizeof(float);
}

}  // namespace graphstep::ops
