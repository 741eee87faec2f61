#pragma once

/// @file memory/parameter_buffer.hpp
/// @brief `parameter_buffer`: the one owner of a buffer a `parameter_layout` describes, a
/// model's weights or its gradients, handing out its tensors by index and by name.

#include <cstddef>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/tensor.hpp>
#include <string>

namespace graphstep::memory {

/// @brief `layout.buffer_bytes()` of device memory from `resource`, laid out by `layout` (which
/// it keeps a copy of): a model's weights, or its gradients at the same offsets. Uninitialized,
/// move-only, returned in stream order as a `cuda::device_buffer` (which it holds, `buffer()`).
class parameter_buffer {
 public:
  /// @throws usage_error (an empty layout, and what `cuda::device_buffer` refuses),
  /// out_of_memory, cuda_error
  parameter_buffer(parameter_layout layout, cuda::stream_view stream,
                   cuda::memory_resource& resource = cuda::default_resource());

  [[nodiscard]] parameter_layout const& layout() const noexcept { return layout_; }
  /// @brief The first byte; null for a moved-from buffer.
  [[nodiscard]] void* data() const noexcept { return buffer_.data(); }
  /// @brief `layout().buffer_bytes()`.
  [[nodiscard]] std::size_t bytes() const noexcept { return buffer_.size(); }
  /// @brief Tensor `index`, named and shaped as the layout says.
  /// @throws usage_error (no such index, a moved-from buffer)
  [[nodiscard]] tensor_view view(std::size_t index) const;
  /// @brief Tensor `name`.
  /// @throws usage_error (no such tensor, a moved-from buffer)
  [[nodiscard]] tensor_view view(std::string const& name) const;
  /// @brief The memory, for its stream, its uses elsewhere and its copies.
  [[nodiscard]] cuda::device_buffer& buffer() noexcept { return buffer_; }
  [[nodiscard]] cuda::device_buffer const& buffer() const noexcept { return buffer_; }

 private:
  parameter_layout layout_;
  cuda::device_buffer buffer_;
};

}  // namespace graphstep::memory
