#pragma once

/// @file memory/host_readback.hpp
/// @brief `host_readback<T>`: asynchronous copies of a step's outputs (the loss, a count) into
/// pinned host memory, read later by ticket, so the host never waits for the step it just
/// replayed.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/detail/host_staging.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace graphstep::memory {

/// @brief A ring of `depth` pinned slots of `size()` elements of `T`. `enqueue` copies device
/// memory into the next slot on a stream and returns a ticket at once; `get(ticket)` waits for
/// that copy only. A trainer enqueues the loss after replaying step k and reads it while step
/// k + 1 runs.
///
/// A slot is reused `depth` enqueues later: a ticket is readable until then, and refused
/// (usage_error) after. A copy into a reused slot is ordered after the copy it replaces, on
/// whichever streams they run. Enqueueing refuses a capturing stream: read results after the
/// replay, on the replay stream. Events and streams are those of the device current at
/// construction. Move-only; not thread-safe (one thread enqueues and reads).
///
/// Adopting: `adopt(device_source, count)` binds the read-back to device memory the caller owns
/// (a trainer's loss buffer), read by `enqueue(stream)` with the same rules; the memory must
/// outlive the read-back's enqueues.
///
/// @tparam T trivially copyable
template <typename T>
class host_readback {
  static_assert(std::is_trivially_copyable_v<T>,
                "host_readback<T>: T must be trivially copyable (its bytes are copied)");

 public:
  /// @throws usage_error (count 0, depth 0), no_device_error, cuda_error
  explicit host_readback(std::size_t count = 1, std::size_t depth = 2)
      : staging_{bytes_of(count), depth, "host_readback"} {}

  /// @brief A read-back of the `count` elements of `T` at `device_source`, device memory that
  /// the caller owns and keeps owning, copied by `enqueue(stream)`.
  /// @throws usage_error (a null or misaligned `device_source`, count 0, depth 0),
  /// no_device_error, cuda_error
  [[nodiscard]] static host_readback adopt(T const* device_source, std::size_t count = 1,
                                           std::size_t depth = 2) {
    return host_readback{detail::readback_staging{device_source, bytes_of(count), alignof(T),
                                                  depth, "host_readback"}};
  }

  [[nodiscard]] std::size_t size() const noexcept { return staging_.bytes() / sizeof(T); }
  /// @brief The adopted device memory, or null.
  [[nodiscard]] T const* source() const noexcept {
    return static_cast<T const*>(staging_.source());
  }

  /// @brief Enqueues the copy of `size()` elements at `device_source` on `stream`.
  /// @return the ticket to read it with
  /// @throws usage_error (a null source, a capturing stream), cuda_error
  std::uint64_t enqueue(T const* device_source, cuda::stream_view stream) {
    return staging_.enqueue(device_source, stream);
  }
  /// @brief Enqueues the copy of the adopted memory (`adopt`) on `stream`.
  /// @return the ticket to read it with
  /// @throws usage_error (a read-back that adopted no memory, a capturing stream), cuda_error
  std::uint64_t enqueue(cuda::stream_view stream) {
    GRAPHSTEP_EXPECTS(source() != nullptr,
                      "host_readback::enqueue: this read-back adopted no device memory; pass the "
                      "memory to read, enqueue(device_source, stream), or make it with adopt()");
    return staging_.enqueue(source(), stream);
  }
  /// @brief Whether `ticket`'s copy has completed; never waits.
  /// @throws usage_error (a ticket never issued, or overwritten), cuda_error
  [[nodiscard]] bool ready(std::uint64_t ticket) const { return staging_.ready(ticket); }
  /// @brief Waits for `ticket`'s copy and returns its values.
  /// @throws usage_error (a ticket never issued, or overwritten), cuda_error
  [[nodiscard]] std::vector<T> get(std::uint64_t ticket) const {
    std::vector<T> values(size());
    staging_.read(ticket, values.data());
    return values;
  }
  /// @brief `get(ticket)` of a one-element read-back.
  /// @throws usage_error (more than one element, and as `get`)
  [[nodiscard]] T value(std::uint64_t ticket) const {
    GRAPHSTEP_EXPECTS(size() == 1, "host_readback::value: this read-back holds " +
                                       std::to_string(size()) + " elements: use get()");
    T result{};
    staging_.read(ticket, &result);
    return result;
  }

 private:
  explicit host_readback(detail::readback_staging staging) noexcept
      : staging_{std::move(staging)} {}

  static std::size_t bytes_of(std::size_t count) {
    GRAPHSTEP_EXPECTS(count > 0, "host_readback: a read-back needs at least one element");
    GRAPHSTEP_EXPECTS(count <= static_cast<std::size_t>(-1) / sizeof(T),
                      "host_readback: " + std::to_string(count) + " elements do not fit in memory");
    return count * sizeof(T);
  }

  detail::readback_staging staging_;
};

}  // namespace graphstep::memory
