#pragma once

/// @file memory/detail/host_staging.hpp
/// @brief The untyped shells behind `step_input` and `host_readback`: device memory at a fixed
/// address, a ring of pinned host slots and one event per slot.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <memory>

namespace graphstep::memory::detail {

/// @brief `bytes` of device memory, zeroed at construction, filled from pinned host slots.
class input_staging {
 public:
  /// @throws usage_error (zero bytes, depth 0, a capturing stream), out_of_memory,
  /// no_device_error, cuda_error
  input_staging(std::size_t bytes, std::size_t depth, cuda::stream_view stream,
                cuda::memory_resource& resource, char const* owner);
  /// @brief Stages into `bytes` of device memory at `device` that the caller owns: nothing is
  /// allocated, zeroed or freed.
  /// @throws usage_error (a null or misaligned `device`, zero bytes, depth 0), no_device_error,
  /// cuda_error
  input_staging(void* device, std::size_t bytes, std::size_t alignment, std::size_t depth,
                char const* owner);
  ~input_staging();
  input_staging(input_staging&& other) noexcept;
  input_staging& operator=(input_staging&& other) noexcept;
  input_staging(input_staging const&) = delete;
  input_staging& operator=(input_staging const&) = delete;

  [[nodiscard]] void* device() const noexcept;
  [[nodiscard]] std::size_t bytes() const noexcept;
  /// @brief The pinned slot of the next upload, once the upload that used it before has
  /// completed (the host waits for it).
  [[nodiscard]] void* stage();
  /// @brief Copies the staged slot to the device on `stream`.
  /// @throws usage_error (nothing staged, a capturing stream), cuda_error
  void upload_staged(cuda::stream_view stream);
  /// @brief Stages `count` elements of `element_bytes` at `source` (`bytes()` in all) and
  /// uploads them.
  /// @throws usage_error (a null source, a size other than `bytes()`, a capturing stream)
  void upload(void const* source, std::size_t count, std::size_t element_bytes,
              cuda::stream_view stream);
  /// @brief The release waits for the work on `stream` so far (see `device_buffer`): call it
  /// before the constructor's stream is destroyed.
  void set_stream(cuda::stream_view stream) noexcept;

 private:
  void copy_staged(cuda::stream_view stream);

  struct state;
  std::unique_ptr<state> state_;
};

/// @brief A ring of pinned host slots of `bytes` each that device memory is copied into.
class readback_staging {
 public:
  /// @throws usage_error (zero bytes, depth 0), no_device_error, cuda_error
  readback_staging(std::size_t bytes, std::size_t depth, char const* owner);
  /// @brief Reads back `bytes` of device memory at `source` that the caller owns.
  /// @throws usage_error (a null or misaligned `source`, zero bytes, depth 0), no_device_error,
  /// cuda_error
  readback_staging(void const* source, std::size_t bytes, std::size_t alignment,
                   std::size_t depth, char const* owner);
  ~readback_staging();
  readback_staging(readback_staging&& other) noexcept;
  readback_staging& operator=(readback_staging&& other) noexcept;
  readback_staging(readback_staging const&) = delete;
  readback_staging& operator=(readback_staging const&) = delete;

  [[nodiscard]] std::size_t bytes() const noexcept;
  /// @brief The adopted device memory, or null.
  [[nodiscard]] void const* source() const noexcept;
  /// @throws usage_error (a null source, a capturing stream), cuda_error
  std::uint64_t enqueue(void const* device_source, cuda::stream_view stream);
  /// @throws usage_error (a ticket never issued or overwritten), cuda_error
  [[nodiscard]] bool ready(std::uint64_t ticket) const;
  /// @brief Waits for `ticket`'s copy and copies its bytes to `destination`.
  /// @throws usage_error (a ticket never issued or overwritten), cuda_error
  void read(std::uint64_t ticket, void* destination) const;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace graphstep::memory::detail
