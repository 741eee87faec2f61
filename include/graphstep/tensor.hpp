#pragma once

/// @file tensor.hpp
/// @brief `tensor_spec`, what a tensor is (its name where it has one, its shape, its dtype), and
/// `tensor_view`, a tensor in device memory, not owned: where it is and what it is. Every API
/// that describes or takes a whole tensor (a parameter layout's slots, a checkpoint's entries, a
/// graphed callable's static buffers, a watched region, a model's tensor table) says it with
/// these; sizes are elements, and bytes are derived from the element count and the dtype.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <string>
#include <vector>

namespace graphstep {

/// @brief What a tensor is: its name (empty where it has none), its shape (row-major extents;
/// the empty shape is a scalar of one element) and its dtype. The element count and the bytes
/// are computed once, when it is made, so that a spec that exists can always say its size.
class tensor_spec {
 public:
  /// @brief An unnamed float32 scalar.
  tensor_spec() = default;
  /// @brief An unnamed tensor of `shape` and `type`.
  /// @throws usage_error (a negative extent, an unknown dtype, more elements or bytes than a
  /// `size_t` holds)
  tensor_spec(std::vector<std::int64_t> shape, dtype type);
  /// @brief The tensor `name` of `shape` and `type`.
  /// @throws as above
  tensor_spec(std::string name, std::vector<std::int64_t> shape, dtype type);

  [[nodiscard]] std::string const& name() const noexcept { return name_; }
  [[nodiscard]] std::vector<std::int64_t> const& shape() const noexcept { return shape_; }
  [[nodiscard]] dtype type() const noexcept { return type_; }
  /// @brief Elements: the product of the shape (1 for a scalar).
  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  /// @brief `count() × size_in_bytes(type())`.
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * size_in_bytes(type_); }

  /// @brief The same shape and dtype under another name.
  [[nodiscard]] tensor_spec renamed(std::string name) const;

  /// @brief Same name, shape and dtype.
  friend bool operator==(tensor_spec const& a, tensor_spec const& b) noexcept {
    return a.type_ == b.type_ && a.shape_ == b.shape_ && a.name_ == b.name_;
  }
  friend bool operator!=(tensor_spec const& a, tensor_spec const& b) noexcept { return !(a == b); }

 private:
  std::string name_;
  std::vector<std::int64_t> shape_;
  dtype type_{dtype::float32};
  std::size_t count_{1};
};

/// @brief Whether `a` and `b` have the same shape and dtype, whatever their names.
[[nodiscard]] bool same_shape_and_type(tensor_spec const& a, tensor_spec const& b) noexcept;

/// @brief "'fc1 weight' [640, 4096] bfloat16", or "[640, 4096] bfloat16" without a name: for
/// messages.
[[nodiscard]] std::string describe(tensor_spec const& spec);

/// @brief A tensor in device memory, not owned: its first element at `data()`, and its spec.
/// The flat `device_span` that the ops and collectives take is `span()`. Like a span, a view
/// does not make its memory const, and nothing checks that the memory is there.
class tensor_view {
 public:
  /// @brief No memory: null, an unnamed float32 scalar.
  tensor_view() = default;
  /// @brief The tensor `spec` at `data`.
  /// @throws usage_error (a null pointer for a tensor with elements, an address not aligned to
  /// an element of the spec's dtype)
  tensor_view(void* data, tensor_spec spec);
  /// @brief The elements of `span` seen as an unnamed tensor of `shape`.
  /// @throws usage_error (a shape whose element count is not the span's; as above)
  tensor_view(device_span span, std::vector<std::int64_t> shape);

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] tensor_spec const& spec() const noexcept { return spec_; }
  [[nodiscard]] std::string const& name() const noexcept { return spec_.name(); }
  [[nodiscard]] std::vector<std::int64_t> const& shape() const noexcept { return spec_.shape(); }
  [[nodiscard]] dtype type() const noexcept { return spec_.type(); }
  [[nodiscard]] std::size_t count() const noexcept { return spec_.count(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return spec_.bytes(); }
  /// @brief The same memory as a flat span of `count()` elements of `type()`.
  [[nodiscard]] device_span span() const noexcept { return {data_, spec_.type(), spec_.count()}; }

 private:
  void* data_{};
  tensor_spec spec_;
};

/// @brief "'w' [4, 8] float32 at 0x7f…": for messages.
[[nodiscard]] std::string describe(tensor_view const& view);

}  // namespace graphstep
