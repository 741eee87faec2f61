#pragma once

/// @file cuda/device_buffer.hpp
/// @brief `device_buffer`: owned device memory from a `memory_resource` (a `memory::memory_pool`
/// or the runtime's), a tensor (a `tensor_spec`) or plain bytes, returned in stream order, with
/// copies that check size, type and capture state.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/tensor.hpp>
#include <optional>
#include <vector>

namespace graphstep::cuda {

/// @brief Device memory from a `memory_resource`, returned to it when the buffer dies: the one
/// owner of device memory in graphstep. Made from a `tensor_spec` (a tensor, a static input or
/// output of a captured step: `view()` and `tensor()` name it to graphstep's APIs, and its
/// messages name it by the spec), or from a byte count (a workspace). The memory is
/// uninitialized.
///
/// Stream ordering: the memory is allocated on `stream()` and goes back to the resource on
/// `stream()` (the resource's contract, see `memory_resource`), after the buffer's own copies on
/// other streams (it records an event after each, and the release waits for those not yet
/// complete). Work on other streams must wait for `stream()` before its first use; other work
/// that uses the buffer on another stream (a kernel, a graph replayed there) must be ordered
/// before the release: name that stream with `record_use` after the work, or move the release
/// there with `set_stream`. Nothing waits for the whole device, so releasing a buffer never
/// breaks a capture under way on any thread.
///
/// The stream and the resource must outlive the buffer: declare the pool before the buffers it
/// backs. A `memory::memory_pool` must not be moved from while it backs a buffer.
///
/// Copies check that the bytes (and, for a typed buffer, the type) match the buffer. Copies
/// from or to host memory refuse to run inside a capture: the graph would record the host
/// address and read whatever is there at replay time instead of the data of the moment.
/// Refill static inputs between replays, on the replay stream.
///
/// A buffer of 0 bytes is empty: it allocates nothing, `data()` is null, and destroying it
/// frees nothing. Move-only; a moved-from buffer is empty (its stream and resource unchanged).
class device_buffer {
 public:
  /// @brief `bytes` of untyped memory from `resource` on `stream`; with 0 bytes, an empty
  /// buffer that allocates nothing.
  /// @throws usage_error (a stream capturing into a graph the resource cannot serve),
  /// out_of_memory, no_device_error, cuda_error (whatever `resource.allocate` throws)
  device_buffer(std::size_t bytes, stream_view stream,
                memory_resource& resource = default_resource());
  /// @brief The tensor `spec` (`spec.bytes()` bytes) from `resource` on `stream`:
  /// `device_buffer{{"fc1 weight", {640, 4096}, dtype::bfloat16}, stream, pool}`.
  /// @throws usage_error (a spec of no element, and what the byte-count constructor throws),
  /// out_of_memory, no_device_error, cuda_error
  device_buffer(tensor_spec spec, stream_view stream,
                memory_resource& resource = default_resource());

  /// @brief Returns the memory on `stream()`, after the recorded uses elsewhere. Never throws: a
  /// failure is reported on stderr (and the memory stays allocated rather than handed out while
  /// some stream may still use it).
  ~device_buffer();

  device_buffer(device_buffer&& other) noexcept;
  /// @brief Returns this buffer's memory on its stream, then takes `other`'s memory, spec,
  /// stream and resource.
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
  /// @brief The tensor it was made as; none for a buffer made from bytes, or moved from.
  [[nodiscard]] std::optional<tensor_spec> const& spec() const noexcept { return spec_; }
  /// @brief Its elements, as the ops, collectives and optimizers take them.
  /// @throws usage_error (a buffer made from bytes, which has no type; a moved-from buffer)
  [[nodiscard]] device_span view() const;
  /// @brief The tensor it holds, its spec at its address, as the checkpoints, `watch` and the
  /// graphed callables take it.
  /// @throws usage_error (a buffer made from bytes; a moved-from buffer)
  [[nodiscard]] tensor_view tensor() const;

  /// @throws usage_error (size or type mismatch, null source, a capturing stream, an empty
  /// buffer), cuda_error
  void copy_from_host(void const* source, std::size_t bytes, dtype type, stream_view stream);
  /// @brief float32 convenience.
  void copy_from_host(std::vector<float> const& source, stream_view stream);
  /// @brief Device-to-device from `source`, of the buffer's bytes (and type, for a typed
  /// buffer); legal inside a capture (both addresses are fixed).
  /// @throws usage_error (size or type mismatch, null source, an empty buffer), cuda_error
  void copy_from_device(device_span source, stream_view stream);
  /// @brief Device-to-device from another buffer of the same bytes and type.
  void copy_from(device_buffer const& source, stream_view stream);
  /// @brief Enqueues a copy to the host; synchronize `stream` before reading it.
  void copy_to_host(void* destination, std::size_t bytes, dtype type, stream_view stream) const;
  /// @brief float32 convenience: copies and synchronizes.
  [[nodiscard]] std::vector<float> to_host(stream_view stream) const;

  /// @brief The stream the memory goes back on.
  [[nodiscard]] stream_view stream() const noexcept { return stream_; }
  /// @brief The resource the memory came from and goes back to.
  [[nodiscard]] memory_resource& resource() const noexcept { return *resource_; }

  /// @brief Returns the memory on `stream` instead: call it when the last use of the memory
  /// moves to another stream, or before `stream()` is destroyed. Enqueues nothing: the work on
  /// the old stream that uses the buffer must be ordered before `stream`'s next work (an event,
  /// or a synchronization), or named with `record_use` first.
  void set_stream(stream_view stream) noexcept { stream_ = stream; }
  /// @brief The release waits for the work issued to `stream` so far (an event recorded now, on
  /// the device current when the buffer was made, which `stream` must belong to): call it after
  /// the last work on another stream that uses the buffer. Inside a capture it
  /// records nothing: replays of the graph are ordered by the stream they are replayed on.
  /// @throws cuda_error; usage_error on an empty buffer
  void record_use(stream_view stream) const;

 private:
  void allocate(std::size_t bytes);
  void release() noexcept;
  void expect(std::size_t bytes, dtype type, char const* what) const;
  void copy_device_bytes(void const* source, std::size_t bytes, dtype type, char const* what,
                         stream_view stream);

  void* data_{};
  std::size_t size_{};
  stream_view stream_;
  memory_resource* resource_;
  int device_{-1};  // current at allocation: where record_use makes its events
  std::optional<tensor_spec> spec_;
  // Recorded after uses on other streams; the release waits for those not yet complete.
  mutable std::vector<event> uses_elsewhere_;
};

}  // namespace graphstep::cuda
