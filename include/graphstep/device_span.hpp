#pragma once

/// @file device_span.hpp
/// @brief `device_span`: device memory as graphstep's APIs take it, not owned (where, how many
/// elements, of which type), and the shapes of typed buffers.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/dtype.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace graphstep {

/// @brief Elements of a shape; the empty shape is a scalar (1 element).
/// @throws usage_error (a negative extent, an element count that overflows)
[[nodiscard]] std::size_t element_count(std::vector<std::int64_t> const& shape);
/// @brief "[640, 4096] float32".
[[nodiscard]] std::string describe(std::vector<std::int64_t> const& shape, dtype type);

/// @brief `count()` elements of `type()` at `data()` in device memory, not owned: what every
/// graphstep API that takes a buffer of device memory takes (the ops, the collectives, the
/// optimizers' parameters, the loss scaler, dropout and the random fills, a graphed callable's
/// static tensors). A typed `cuda::device_buffer` gives its own with `view()`.
///
/// The type is always named and comes before the count, `{pointer, dtype::bfloat16, count}`,
/// so that a (pointer, bytes, type) triple or a (pointer, bytes) pair, as graphstep's older
/// views took, does not compile instead of naming other memory. Like a pointer, a span does not
/// make its memory const, and nothing checks that the memory is there: the API it is given to
/// checks what it can (a null pointer with elements, the alignment of the type).
class device_span {
 public:
  /// @brief No memory: null, 0 elements, float32.
  constexpr device_span() noexcept = default;
  /// @brief `count` elements of `type` at `data`.
  constexpr device_span(void* data, dtype type, std::size_t count) noexcept
      : data_{data}, count_{count}, type_{type} {}

  [[nodiscard]] constexpr void* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t count() const noexcept { return count_; }
  [[nodiscard]] constexpr dtype type() const noexcept { return type_; }
  /// @brief `count() × size_in_bytes(type())`.
  /// @throws usage_error when the product does not fit a `size_t`
  [[nodiscard]] std::size_t bytes() const;
  [[nodiscard]] constexpr bool empty() const noexcept { return count_ == 0; }

  /// @brief Elements [offset, offset + count) of this span.
  /// @throws usage_error (the range does not lie within this span)
  [[nodiscard]] device_span subspan(std::size_t offset, std::size_t count) const;

  /// @brief Same memory, same count, same type.
  friend constexpr bool operator==(device_span const& a, device_span const& b) noexcept {
    return a.data_ == b.data_ && a.count_ == b.count_ && a.type_ == b.type_;
  }
  friend constexpr bool operator!=(device_span const& a, device_span const& b) noexcept {
    return !(a == b);
  }

 private:
  void* data_{};
  std::size_t count_{};
  dtype type_{dtype::float32};
};

/// @brief "1024 float32 at 0x7f…": for messages.
[[nodiscard]] std::string describe(device_span const& span);

}  // namespace graphstep
