// graphstep_core: plain C++, includes no CUDA header.
#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/embedding_problem.hpp>
#include <string>

#include "detail/span_checks.hpp"

namespace graphstep::ops {

namespace {

// Elements of each operand, from a shape that check_shape accepted.
struct embedding_sizes {
  explicit embedding_sizes(embedding_shape const& s)
      : positions{static_cast<std::size_t>(s.batch * s.sequence)},
        rows_out{positions * static_cast<std::size_t>(s.channels)},
        token_table{static_cast<std::size_t>(s.vocab) * static_cast<std::size_t>(s.channels)},
        position_table{static_cast<std::size_t>(s.sequence) *
                       static_cast<std::size_t>(s.channels)} {}
  std::size_t positions;       // tokens: B·T ids
  std::size_t rows_out;        // out and dout: [B·T, C]
  std::size_t token_table;     // [vocab, C]
  std::size_t position_table;  // [T, C]
};

using graphstep::detail::expect_operand;

}  // namespace

void embedding_problem::check_shape(char const* call) const {
  embedding_shape const& s = shape;
  std::string const what{call};
  GRAPHSTEP_EXPECTS(s.batch > 0 && s.sequence > 0 && s.vocab > 0 && s.channels > 0,
                    what + ": sizes must be positive (batch=" + std::to_string(s.batch) +
                        ", sequence=" + std::to_string(s.sequence) + ", vocab=" +
                        std::to_string(s.vocab) + ", channels=" + std::to_string(s.channels) + ")");
  GRAPHSTEP_EXPECTS(s.batch <= max_positions / s.sequence,
                    what + ": batch·sequence=" + std::to_string(s.batch) + "·" +
                        std::to_string(s.sequence) + " positions are too many for one launch " +
                        "(at most 2^30); split the batch");
  GRAPHSTEP_EXPECTS(s.channels <= max_channels,
                    what + ": channels=" + std::to_string(s.channels) +
                        " is too wide for one launch (at most 65535·256)");
}

dtype embedding_problem::check_forward(device_span out, device_span tokens, device_span token_table,
                                       device_span position_table) const {
  char const* const what = "embedding_forward";
  dtype const type = graphstep::detail::floating_operand_type(what, "token_table", token_table);
  check_shape(what);
  embedding_sizes const sizes{shape};
  expect_operand(what, "out", out, type, sizes.rows_out);
  expect_operand(what, "tokens", tokens, dtype::int32, sizes.positions);
  expect_operand(what, "token_table", token_table, type, sizes.token_table);
  expect_operand(what, "position_table", position_table, type, sizes.position_table);
  return type;
}

dtype embedding_problem::check_backward(device_span token_gradient, device_span position_gradient,
                                        device_span dout, device_span tokens) const {
  char const* const what = "embedding_backward";
  dtype const type = graphstep::detail::floating_operand_type(what, "dout", dout);
  check_shape(what);
  embedding_sizes const sizes{shape};
  expect_operand(what, "token_gradient", token_gradient, type, sizes.token_table);
  expect_operand(what, "position_gradient", position_gradient, type, sizes.position_table);
  expect_operand(what, "dout", dout, type, sizes.rows_out);
  expect_operand(what, "tokens", tokens, dtype::int32, sizes.positions);
  return type;
}

}  // namespace graphstep::ops
