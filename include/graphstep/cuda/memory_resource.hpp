#pragma once

/// @file cuda/memory_resource.hpp
/// @brief `memory_resource`: the interface of every source of device memory (stream-ordered),
/// and `default_resource()`, the one that takes memory from the CUDA runtime.

#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>

namespace graphstep::cuda {

/// @brief A source of device memory whose allocations and frees are ordered on a stream.
///
/// Stream ordering: `allocate(bytes, s)` returns memory that work enqueued on `s` after the
/// call may use at once; work on another stream may use it only after it has waited for `s`
/// (an event, or a synchronization). `deallocate(p, bytes, s)` frees the memory once the work
/// enqueued on `s` before the call has run: every use of `p` on other streams must be ordered
/// before that point. The memory may be handed out again right after, to allocations on `s`.
/// The stream must still exist when `deallocate` is called.
///
/// Callers deallocate with the size they allocated. Resources are not copied through this
/// interface; a resource must outlive every allocation it handed out. Implementations override
/// the private `do_allocate` and `do_deallocate`; the public functions check the arguments
/// first, so every resource refuses the same misuse the same way.
class memory_resource {
 public:
  virtual ~memory_resource() = default;

  /// @brief At least `bytes` of device memory, ordered on `stream`, aligned as the resource
  /// documents (a `memory::memory_pool` to its `pool_options::alignment`).
  /// @throws usage_error (zero bytes, and the resource's own checks, e.g. a stream capturing
  /// into a graph the resource cannot serve), out_of_memory, no_device_error, cuda_error
  [[nodiscard]] void* allocate(std::size_t bytes, stream_view stream);

  /// @brief Returns `pointer`, obtained from `allocate(bytes, …)` of this resource, ordered on
  /// `stream`.
  /// @throws usage_error (a null pointer, and the resource's own checks), cuda_error
  void deallocate(void* pointer, std::size_t bytes, stream_view stream);

 protected:
  memory_resource() = default;
  // Protected, so that a resource is never copied or moved through a base reference (slicing).
  memory_resource(memory_resource const&) = default;
  memory_resource(memory_resource&&) noexcept = default;
  memory_resource& operator=(memory_resource const&) = default;
  memory_resource& operator=(memory_resource&&) noexcept = default;

 private:
  /// @brief Serves `allocate`; `bytes` is positive.
  virtual void* do_allocate(std::size_t bytes, stream_view stream) = 0;
  /// @brief Serves `deallocate`; `pointer` is not null.
  virtual void do_deallocate(void* pointer, std::size_t bytes, stream_view stream) = 0;
};

/// @brief The process-wide resource that takes memory from the CUDA runtime's stream-ordered
/// allocator (`cudaMallocAsync` / `cudaFreeAsync` on the given stream, from the device's
/// current memory pool). Thread-safe; never destroyed, so buffers in static objects may
/// outlive `main`.
///
/// It refuses a stream that is capturing into a graph (`usage_error`): an allocation there
/// would belong to the graph, and a free there could only free the graph's own allocations.
/// Allocate before the capture, or from the `memory::memory_pool` given to the capture. A
/// request the device cannot serve throws `out_of_memory`.
[[nodiscard]] memory_resource& default_resource() noexcept;

}  // namespace graphstep::cuda
