// graphstep_core: plain C++, includes no CUDA header.
#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/cross_entropy_problem.hpp>
#include <string>

#include "detail/span_checks.hpp"
#include "ops/detail/operand_checks.hpp"

namespace graphstep::ops {

void cross_entropy_problem::check_shape(char const* call) const {
  cross_entropy_shape const& s = shape;
  std::string const what{call};
  GRAPHSTEP_EXPECTS(s.rows > 0 && s.vocab > 0 && s.padded_vocab > 0,
                    what + ": sizes must be positive (rows=" + std::to_string(s.rows) +
                        ", vocab=" + std::to_string(s.vocab) +
                        ", padded_vocab=" + std::to_string(s.padded_vocab) + ")");
  GRAPHSTEP_EXPECTS(s.padded_vocab >= s.vocab,
                    what + ": padded_vocab=" + std::to_string(s.padded_vocab) +
                        " is less than vocab=" + std::to_string(s.vocab) +
                        "; the logits' row length must hold every class");
  GRAPHSTEP_EXPECTS(s.rows <= max_rows, what + ": rows=" + std::to_string(s.rows) +
                                            " are too many for one launch (at most 2^31 - 1); "
                                            "split the rows into several calls");
}

dtype cross_entropy_problem::check(device_span loss, device_span dlogits, device_span logits,
                                   device_span targets, void const* workspace,
                                   std::size_t workspace_bytes) const {
  char const* const what = "cross_entropy";
  dtype const type = graphstep::detail::floating_operand_type(what, "logits", logits);
  check_shape(what);
  auto const rows = static_cast<std::size_t>(shape.rows);
  std::size_t const matrix = rows * static_cast<std::size_t>(shape.padded_vocab);
  using graphstep::detail::expect_operand;
  expect_operand(what, "loss", loss, dtype::float32, 1);
  expect_operand(what, "dlogits", dlogits, type, matrix);
  expect_operand(what, "logits", logits, type, matrix);
  expect_operand(what, "targets", targets, dtype::int32, rows);
  // In place or apart: a partial overlap would let one row's writes reach another's reads.
  std::size_t const bytes = matrix * size_in_bytes(type);
  GRAPHSTEP_EXPECTS(logits.data() == dlogits.data() ||
                        !detail::overlap(logits.data(), bytes, dlogits.data(), bytes),
                    std::string{what} + ": dlogits overlaps logits without being logits; pass " +
                        "the same span for in place, or separate buffers");
  GRAPHSTEP_EXPECTS(workspace != nullptr, std::string{what} +
                                              ": workspace is a null pointer; give at least "
                                              "cross_entropy_workspace_size() bytes");
  GRAPHSTEP_EXPECTS(
      detail::aligned_to(workspace, alignof(float)),
      std::string{what} + ": workspace is not 4-byte aligned (take it from the pool)");
  std::size_t const needed = this->workspace_bytes();
  GRAPHSTEP_EXPECTS(workspace_bytes >= needed,
                    std::string{what} + ": the workspace has " + std::to_string(workspace_bytes) +
                        " bytes, too little for " + std::to_string(shape.rows) +
                        " rows; give at least cross_entropy_workspace_size() = " +
                        std::to_string(needed) + " bytes");
  return type;
}

std::size_t cross_entropy_problem::workspace_bytes() const {
  check_shape("cross_entropy_workspace_size");
  return static_cast<std::size_t>(shape.rows) * sizeof(float);
}

}  // namespace graphstep::ops
