// graphstep_core: plain C++, includes no CUDA header.
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/error.hpp>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>

#include "detail/span_checks.hpp"

namespace graphstep {

std::size_t element_count(std::vector<std::int64_t> const& shape) {
  std::size_t count = 1;
  for (std::int64_t extent : shape) {
    GRAPHSTEP_EXPECTS(extent >= 0,
                      "shape " + describe(shape, dtype::float32) + " has a negative extent");
    auto const e = static_cast<std::size_t>(extent);
    GRAPHSTEP_EXPECTS(e == 0 || count <= std::numeric_limits<std::size_t>::max() / e,
                      "shape " + describe(shape, dtype::float32) + " has too many elements");
    count *= e;
  }
  return count;
}

std::string describe(std::vector<std::int64_t> const& shape, dtype type) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i != 0 ? ", " : "") << shape[i];
  out << "] " << name(type);
  return out.str();
}

std::size_t device_span::bytes() const {
  std::size_t const element = size_in_bytes(type_);
  GRAPHSTEP_EXPECTS(count_ <= std::numeric_limits<std::size_t>::max() / element,
                    "a span of " + std::to_string(count_) + " " + name(type_) +
                        " elements has more bytes than a size_t holds");
  return count_ * element;
}

device_span device_span::subspan(std::size_t offset, std::size_t count) const {
  GRAPHSTEP_EXPECTS(offset <= count_ && count <= count_ - offset,
                    "subspan(" + std::to_string(offset) + ", " + std::to_string(count) +
                        ") reaches past the end of " + describe(*this) +
                        ": offset plus count must be at most " + std::to_string(count_));
  if (data_ == nullptr) return {nullptr, type_, count};
  return {static_cast<unsigned char*>(data_) + (offset * size_in_bytes(type_)), type_, count};
}

std::string describe(device_span const& span) {
  std::ostringstream out;
  out << span.count() << ' ' << name(span.type()) << " at " << span.data();
  return out.str();
}

namespace detail {

std::size_t matrix_elements(std::string_view call, std::int64_t m, std::int64_t n) {
  GRAPHSTEP_EXPECTS(m > 0 && n > 0, std::string{call} + ": sizes must be positive (M=" +
                                        std::to_string(m) + ", N=" + std::to_string(n) + ")");
  auto const rows = static_cast<std::size_t>(m);
  auto const columns = static_cast<std::size_t>(n);
  GRAPHSTEP_EXPECTS(rows <= std::numeric_limits<std::size_t>::max() / columns,
                    std::string{call} + ": M=" + std::to_string(m) + " by N=" + std::to_string(n) +
                        " is more elements than a size_t holds");
  return rows * columns;
}

void expect_valid_span(std::string_view call, std::string_view operand, device_span const& span,
                       empty_span empty) {
  bool const valid = span.empty() ? empty == empty_span::allowed
                                  : is_typed_buffer(span.data(), span.type()) &&
                                        span.count() <= std::numeric_limits<std::size_t>::max() /
                                                            size_in_bytes(span.type());
  if (valid) return;
  std::string which{call};
  which.append(": ").append(operand);
  GRAPHSTEP_EXPECTS(!span.empty(), which + " holds no element");
  expect_typed_buffer(which, span.data(), span.type());
  static_cast<void>(span.bytes());
}

void expect_operand(std::string_view call, std::string_view operand, device_span const& span,
                    dtype type, std::size_t needed) {
  expect_valid_span(call, operand, span, empty_span::refused);
  if (span.type() == type && span.count() >= needed) return;
  std::string which{call};
  which.append(": ").append(operand).append(" is ").append(describe(span));
  GRAPHSTEP_EXPECTS(span.type() == type, which + "; it must hold " + name(type));
  GRAPHSTEP_EXPECTS(span.count() >= needed,
                    which + ", but the sizes need " + std::to_string(needed) + " elements");
}

dtype floating_operand_type(std::string_view call, std::string_view operand,
                            device_span const& span) {
  expect_valid_span(call, operand, span, empty_span::refused);
  if (!is_floating(span.type())) {
    std::string which{call};
    expect_floating(which.append(": ").append(operand), span.type());
  }
  return span.type();
}

}  // namespace detail
}  // namespace graphstep
