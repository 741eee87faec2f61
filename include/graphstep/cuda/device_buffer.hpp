#pragma once

/// @file cuda/device_buffer.hpp
/// @brief `device_buffer`: owned, untyped device memory from a `memory_resource`, freed in
/// stream order.

#include <cstddef>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>

namespace graphstep::cuda {

/// @brief `size()` bytes of device memory from a `memory_resource`, returned to it on
/// destruction. The memory is uninitialized.
///
/// Stream ordering: the memory is allocated on `stream()` and freed on `stream()` (the
/// resource's contract, see `memory_resource`). Work on other streams must wait for
/// `stream()` before its first use, and must be ordered before the free (or the free moved
/// with `set_stream`). The stream and the resource must outlive the buffer; a
/// `memory::memory_pool` must not be moved from while it does.
///
/// A buffer of 0 bytes is empty: it allocates nothing, `data()` is null, and destroying it
/// frees nothing. Move-only; a moved-from buffer is empty.
class device_buffer {
 public:
  /// @brief Allocates `bytes` from `resource` on `stream`; with 0 bytes, an empty buffer that
  /// allocates nothing.
  /// @throws usage_error (a stream capturing into a graph the resource cannot serve),
  /// out_of_memory, no_device_error, cuda_error (whatever `resource.allocate` throws)
  device_buffer(std::size_t bytes, stream_view stream,
                memory_resource& resource = default_resource());

  /// @brief Frees the memory on `stream()`. Never throws: a failure is reported on stderr.
  ~device_buffer();

  /// @post `other` is empty (its stream and resource are unchanged)
  device_buffer(device_buffer&& other) noexcept;
  /// @brief Frees this buffer's memory on its stream, then takes `other`'s memory, stream and
  /// resource.
  /// @post `other` is empty (its stream and resource are unchanged)
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(device_buffer const&) = delete;
  device_buffer& operator=(device_buffer const&) = delete;

  /// @brief The device address; null when the buffer is empty. Like a pointer, a const buffer
  /// still hands out writable memory.
  [[nodiscard]] void* data() const noexcept { return data_; }
  /// @brief Bytes owned; 0 when empty.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @brief True when the buffer owns no memory.
  [[nodiscard]] bool empty() const noexcept { return data_ == nullptr; }
  /// @brief The stream the memory is freed on.
  [[nodiscard]] stream_view stream() const noexcept { return stream_; }
  /// @brief The resource the memory came from and goes back to.
  [[nodiscard]] memory_resource& resource() const noexcept { return *resource_; }

  /// @brief Frees the memory on `stream` instead: call it when the last use of the memory
  /// moves to another stream, or before `stream()` is destroyed. Enqueues nothing: `stream`
  /// must already be ordered after every earlier use (an event, or a synchronization).
  void set_stream(stream_view stream) noexcept { stream_ = stream; }

 private:
  void free_memory() noexcept;

  void* data_{};
  std::size_t size_{};
  stream_view stream_;
  memory_resource* resource_;
};

}  // namespace graphstep::cuda
