#pragma once

/// @file cuda/stream.hpp
/// @brief `stream`: an owning, move-only CUDA stream.

#include <cuda_runtime_api.h>

#include <graphstep/cuda/stream_view.hpp>
#include <memory>

namespace graphstep::cuda {

namespace detail {
struct stream_deleter {
  using pointer = cudaStream_t;  // unique_ptr holds the handle itself
  void operator()(pointer handle) const noexcept;
};
}  // namespace detail

/// @brief An owning CUDA stream. Created non-blocking, so it never synchronizes implicitly
/// with the legacy default stream (which would break captures). Move-only; a moved-from
/// stream holds no handle.
class stream {
 public:
  /// @brief Creates a non-blocking stream with the given priority (0 = default; lower numbers
  /// are higher priority, see cudaDeviceGetStreamPriorityRange).
  /// @throws no_device_error, cuda_error
  explicit stream(int priority = 0);

  /// @brief Takes ownership of an existing stream handle.
  [[nodiscard]] static stream adopt(cudaStream_t handle) noexcept { return stream{handle, 0}; }

  stream(stream&&) noexcept = default;
  stream& operator=(stream&&) noexcept = default;
  stream(stream const&) = delete;
  stream& operator=(stream const&) = delete;
  ~stream() = default;

  /// @brief The raw handle (null after a move).
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_.get(); }
  /// @brief A non-owning view, to pass to functions that enqueue work.
  [[nodiscard]] stream_view view() const noexcept { return stream_view{get()}; }
  operator stream_view() const noexcept { return view(); }  // NOLINT: implicit by design
  /// @brief Gives up ownership; the caller destroys the handle.
  /// @post get() == nullptr
  [[nodiscard]] cudaStream_t release() noexcept { return handle_.release(); }

  /// @brief Blocks the host until all work issued to the stream has finished.
  /// @throws cuda_error
  void synchronize() const { view().synchronize(); }

 private:
  stream(cudaStream_t handle, int /*adopt tag*/) noexcept : handle_{handle} {}
  std::unique_ptr<cudaStream_t, detail::stream_deleter> handle_;
};

}  // namespace graphstep::cuda
