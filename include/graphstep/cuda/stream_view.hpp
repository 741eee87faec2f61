#pragma once

/// @file cuda/stream_view.hpp
/// @brief `stream_view`: a non-owning, trivially copyable reference to a CUDA stream.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <type_traits>

namespace graphstep::cuda {

class event;

/// @brief A non-owning view of a `cudaStream_t`. Pass it by value; it must not outlive the
/// stream it refers to. Every graphstep function that enqueues work takes one, with no default:
/// the legacy default stream is never picked silently.
class stream_view {
 public:
  /// @brief Wraps a raw stream handle. Implicit on purpose, so CUDA code passes its streams.
  constexpr stream_view(cudaStream_t stream) noexcept : stream_{stream} {}  // NOLINT
  /// A literal 0 is ambiguous: write `cudaStreamLegacy` or `cudaStreamPerThread` explicitly.
  stream_view(int) = delete;
  /// A null stream is ambiguous: write `cudaStreamLegacy` or `cudaStreamPerThread` explicitly.
  stream_view(std::nullptr_t) = delete;

  /// @brief The raw handle.
  [[nodiscard]] constexpr cudaStream_t get() const noexcept { return stream_; }

  /// @brief True for the legacy default stream (which cannot be captured).
  [[nodiscard]] bool is_legacy_default() const noexcept {
    return stream_ == nullptr || stream_ == cudaStreamLegacy;
  }

  /// @brief Blocks the host until all work issued to the stream has finished.
  /// @throws cuda_error (capture_error if the stream is capturing)
  void synchronize() const;

  /// @brief Makes all later work on this stream wait for `e`'s last record. Legal during
  /// capture when `e` was recorded in the same capture (this is how side streams fork and join).
  /// @throws cuda_error
  void wait(event const& e) const;

  /// @brief True while the stream is being captured into a graph.
  /// @throws cuda_error
  [[nodiscard]] bool is_capturing() const;

  friend constexpr bool operator==(stream_view lhs, stream_view rhs) noexcept {
    return lhs.stream_ == rhs.stream_;
  }
  friend constexpr bool operator!=(stream_view lhs, stream_view rhs) noexcept {
    return !(lhs == rhs);
  }

 private:
  cudaStream_t stream_;
};

static_assert(std::is_trivially_copyable_v<stream_view>);

}  // namespace graphstep::cuda
