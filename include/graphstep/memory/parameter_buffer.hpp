#pragma once

/// @file memory/parameter_buffer.hpp
/// @brief `parameter_buffer`: the one owner of a buffer a `parameter_layout` describes, a
/// model's weights or its gradients, handing out its tensors by index and by name.

#include <cstddef>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/tensor.hpp>
#include <string>

namespace graphstep::memory {

/// @brief `layout.buffer_bytes()` of device memory from `resource`, laid out by `layout` (which
/// it keeps a copy of): a model's weights, or its gradients at the same offsets. Uninitialized,
/// move-only, returned in stream order as a `cuda::device_buffer` (which it holds, `buffer()`).
///
/// `adopt` makes one over device memory the caller owns (a C trainer's one allocation): it
/// allocates, copies and frees nothing, and the memory must outlive it and every graph that
/// captured its tensors.
class parameter_buffer {
 public:
  /// @throws usage_error (an empty layout, and what `cuda::device_buffer` refuses),
  /// out_of_memory, cuda_error
  parameter_buffer(parameter_layout layout, cuda::stream_view stream,
                   cuda::memory_resource& resource = cuda::default_resource());

  /// @brief A buffer over the `bytes` of device memory at `data`, which the caller owns,
  /// laid out by `layout` (a `parameter_layout::adopting(bytes)` with its tensors at the
  /// offsets they have there, or any layout the memory is large enough for).
  /// @throws usage_error (an empty layout, a null `data`, `data` not aligned to the layout's
  /// `alignment()`, a layout of more than `bytes`)
  [[nodiscard]] static parameter_buffer adopt(parameter_layout layout, void* data,
                                              std::size_t bytes);

  ~parameter_buffer() = default;
  /// @post `other` holds no memory (`data()` null).
  parameter_buffer(parameter_buffer&& other) noexcept;
  /// @post `other` holds no memory (`data()` null).
  parameter_buffer& operator=(parameter_buffer&& other) noexcept;
  parameter_buffer(parameter_buffer const&) = delete;
  parameter_buffer& operator=(parameter_buffer const&) = delete;

  [[nodiscard]] parameter_layout const& layout() const noexcept { return layout_; }
  /// @brief The first byte; null for a moved-from buffer.
  [[nodiscard]] void* data() const noexcept {
    return adopted_data_ != nullptr ? adopted_data_ : buffer_.data();
  }
  /// @brief `layout().buffer_bytes()`, or the adopted memory's `bytes`.
  [[nodiscard]] std::size_t bytes() const noexcept {
    return adopted_data_ != nullptr ? adopted_bytes_ : buffer_.size();
  }
  /// @brief Whether the memory is the caller's (`adopt`).
  [[nodiscard]] bool adopted() const noexcept { return adopted_data_ != nullptr; }
  /// @brief Tensor `index`, named and shaped as the layout says.
  /// @throws usage_error (no such index, a moved-from buffer)
  [[nodiscard]] tensor_view view(std::size_t index) const;
  /// @brief Tensor `name`.
  /// @throws usage_error (no such tensor, a moved-from buffer)
  [[nodiscard]] tensor_view view(std::string const& name) const;
  /// @brief Every tensor at once: the whole buffer as elements of its tensors' one dtype, the
  /// gaps between slots included. What an operation over all of them takes: the gradients'
  /// all-reduce, the weights' broadcast or comparison across ranks.
  /// @throws usage_error (tensors of more than one dtype, a buffer whose bytes are no whole
  /// number of elements, a moved-from buffer)
  [[nodiscard]] device_span span() const;
  /// @brief The memory, for its stream, its uses elsewhere and its copies; empty for an
  /// adopted buffer (the memory is the caller's: use `data()` and `bytes()`).
  [[nodiscard]] cuda::device_buffer& buffer() noexcept { return buffer_; }
  [[nodiscard]] cuda::device_buffer const& buffer() const noexcept { return buffer_; }

 private:
  explicit parameter_buffer(parameter_layout layout, void* data, std::size_t bytes);

  parameter_layout layout_;
  cuda::device_buffer buffer_;
  void* adopted_data_{};
  std::size_t adopted_bytes_{};
};

}  // namespace graphstep::memory
