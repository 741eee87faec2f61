#pragma once

/// @file memory/static_buffer.hpp
/// @brief `static_buffer`: a typed, shaped device buffer from a memory pool, at an address that
/// stays fixed — the static inputs and outputs of captured steps — with copies that check size,
/// type and capture state.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/event.hpp>
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
/// so it may outlive the pool handle. Move-only; a moved-from buffer is empty.
///
/// Stream ordering: the block is allocated on `stream()` (the stream given to the constructor)
/// and goes back to the pool in stream order on `stream()` when the buffer dies, after the
/// buffer's own copies on other streams (it records an event after each and the release waits
/// for them). Other work that uses the buffer on another stream — a kernel, a graph replayed
/// there — must be ordered before the release: name that stream with `record_use` after the
/// work, or move the release there with `set_stream`. Nothing waits for the whole device, so
/// releasing a buffer never breaks a capture under way on any thread. The stream must outlive
/// the buffer, or be replaced with `set_stream` first.
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

  /// @brief The stream the block goes back to the pool on.
  [[nodiscard]] cuda::stream_view stream() const noexcept { return stream_; }
  /// @brief Releases the block on `stream` instead: call it before `stream()` is destroyed.
  /// Enqueues nothing: the work on the old stream that uses the buffer must be ordered before
  /// `stream`'s next work (an event, or a synchronization), or named with `record_use` first.
  void set_stream(cuda::stream_view stream) noexcept { stream_ = stream; }
  /// @brief The release waits for the work issued to `stream` so far (an event recorded now):
  /// call it after the last work on another stream that uses the buffer. Inside a capture it
  /// records nothing: replays of the graph are ordered by the stream they are replayed on.
  /// @throws cuda_error; usage_error on a moved-from buffer
  void record_use(cuda::stream_view stream) const;

 private:
  void release() noexcept;
  void expect(std::size_t bytes, dtype type, char const* what) const;

  std::shared_ptr<void> pool_;  // keeps the pool's memory alive
  void* data_{};
  std::size_t bytes_{};
  std::vector<std::int64_t> shape_;
  dtype type_{dtype::float32};
  cuda::stream_view stream_;
  // Recorded after uses on other streams; the release waits for those not yet complete.
  mutable std::vector<cuda::event> uses_elsewhere_;
};

}  // namespace graphstep::memory
