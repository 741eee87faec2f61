#pragma once

/// @file memory/static_buffer.hpp
/// @brief `static_buffer`: a typed, shaped device buffer from a memory pool, at an address that
/// stays fixed — the static inputs and outputs of captured steps — with copies that check size,
/// type and capture state.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <memory>
#include <string>
#include <vector>

namespace graphstep::memory {

/// @brief Elements of a shape; the empty shape is a scalar (1 element).
/// @throws usage_error (a negative extent, an element count that overflows)
[[nodiscard]] std::size_t element_count(std::vector<std::int64_t> const& shape);
/// @brief "[640, 4096] float32".
[[nodiscard]] std::string describe(std::vector<std::int64_t> const& shape, dtype type);

/// @brief A device buffer of `shape` and `type` from `pool`. It keeps the pool's memory alive,
/// so it may outlive the pool handle. Destruction waits for the device before returning the
/// block (work on any stream may still read it). Move-only; a moved-from buffer is empty.
///
/// Copies check that the bytes and the type match the buffer. Copies from or to host memory
/// refuse to run inside a capture: the graph would record the host address and read whatever
/// is there at replay time instead of the data of the moment. Refill static inputs between
/// replays, on the replay stream.
class static_buffer {
 public:
  /// @throws usage_error (bad shape, zero elements), out_of_memory, no_device_error
  static_buffer(memory_pool& pool, std::vector<std::int64_t> shape, dtype type,
                cuda::stream_view stream);
  ~static_buffer();
  static_buffer(static_buffer&& other) noexcept;
  static_buffer& operator=(static_buffer&& other) noexcept;
  static_buffer(static_buffer const&) = delete;
  static_buffer& operator=(static_buffer const&) = delete;

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_ / size_in_bytes(type_); }
  [[nodiscard]] std::vector<std::int64_t> const& shape() const noexcept { return shape_; }
  [[nodiscard]] dtype type() const noexcept { return type_; }

  /// @throws usage_error (size or type mismatch, null source, a capturing stream)
  void copy_from_host(void const* source, std::size_t bytes, dtype type, cuda::stream_view stream);
  /// @brief float32 convenience.
  void copy_from_host(std::vector<float> const& source, cuda::stream_view stream);
  /// @brief Device-to-device; legal inside a capture (both addresses are fixed).
  void copy_from_device(void const* source, std::size_t bytes, dtype type,
                        cuda::stream_view stream);
  void copy_from(static_buffer const& source, cuda::stream_view stream);
  /// @brief Enqueues a copy to the host; synchronize `stream` before reading it.
  void copy_to_host(void* destination, std::size_t bytes, dtype type,
                    cuda::stream_view stream) const;
  /// @brief float32 convenience: copies and synchronizes.
  [[nodiscard]] std::vector<float> to_host(cuda::stream_view stream) const;

 private:
  void release() noexcept;
  void expect(std::size_t bytes, dtype type, char const* what) const;

  std::shared_ptr<void> pool_;  // keeps the pool's memory alive
  void* data_{};
  std::size_t bytes_{};
  std::vector<std::int64_t> shape_;
  dtype type_{dtype::float32};
};

}  // namespace graphstep::memory
