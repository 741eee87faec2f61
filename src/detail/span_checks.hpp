#pragma once

/// @file detail/span_checks.hpp
/// @brief The operand checks every component's launchers and problems share: a span's address,
/// type and size, an M×N operand's elements, an op's floating type. Internal.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <string_view>

namespace graphstep::detail {

/// @brief Whether `expect_valid_span` refuses a span without elements.
enum class empty_span { allowed, refused };

/// @brief Refuses the span that `call` and `operand` name ("all_reduce", "the send buffer") when
/// it has elements but a null pointer, its type is no dtype value, its address is not aligned to
/// an element, or its bytes do not fit a `size_t`; and, where `empty` says so, when it has no
/// element. An empty span that is allowed passes with any pointer. The message is built only
/// when the span is refused, so that a call enqueued every step pays for no string.
/// @throws usage_error
void expect_valid_span(std::string_view call, std::string_view operand, device_span const& span,
                       empty_span empty = empty_span::allowed);

/// @brief Refuses an operand of an op whose shape says how many elements it reads or writes:
/// as `expect_valid_span` (an empty span refused), and when its type is not `type` or it holds
/// fewer than `needed` elements. Builds no message when it passes.
/// @throws usage_error
void expect_operand(std::string_view call, std::string_view operand, device_span const& span,
                    dtype type, std::size_t needed);

/// @brief Elements of an M×N operand of the op `call` names: refuses an M or N that is not
/// positive, and a product that does not fit a `size_t`. Builds no message when it passes.
/// @throws usage_error
[[nodiscard]] std::size_t matrix_elements(std::string_view call, std::int64_t m, std::int64_t n);

/// @brief The type of an op's floating operands, read from the one that `operand` names: refused
/// as `expect_valid_span` (an empty span refused) and when it is not a floating type.
/// @throws usage_error
[[nodiscard]] dtype floating_operand_type(std::string_view call, std::string_view operand,
                                          device_span const& span);

}  // namespace graphstep::detail
