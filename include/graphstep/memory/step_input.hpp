#pragma once

/// @file memory/step_input.hpp
/// @brief `step_input<T>`: values that change every step (token ids, a learning rate, a step
/// count, a struct of per-step scalars) in device memory at a fixed address, for kernels of a
/// captured step to read, filled from the host before each replay through double-buffered
/// pinned staging.

#include <cstddef>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/detail/host_staging.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace graphstep::memory {

/// @brief `size()` elements of `T` in device memory at an address that stays fixed, so a graph
/// captured with kernels that read `data()` reads each replay's values, not the capture's.
///
/// A kernel parameter passed by value is copied into the graph at capture: every replay sees
/// the capture's value. Put such a value in a `step_input` and pass the kernel its `data()`
/// instead; `upload` a new value before each replay, on the replay stream.
///
/// Staging: an upload copies the values into one of `depth` pinned host slots (2 by default)
/// and enqueues the copy from there, so it returns without waiting for the device; the host
/// fills the next step's slot while the device still copies (or replays) this one. An upload
/// waits only for the upload that used the same slot `depth` uploads ago.
///
/// Stream ordering: the memory is allocated (and zeroed) on the constructor's stream and freed
/// there. An upload writes `data()` in the order of its stream: on the replay stream it follows
/// the replays enqueued before it and precedes those after. Readers on other streams must be
/// ordered against uploads as any device memory must. Uploads refuse a capturing stream (a
/// captured copy would replay the slot's contents of the moment, not the next step's values).
///
/// Adopting: `adopt(data, count)` makes an input over device memory the caller owns and keeps
/// owning (a C trainer's token buffer, which its kernels already read): uploads fill it with the
/// same staging, ordering and capture rules; nothing is allocated, zeroed or freed, and the
/// memory must outlive the input and every graph whose kernels read it.
///
/// Cost: an upload makes one capture query, the copy and an event record; once the ring has
/// gone round, also the host wait for the slot's previous copy (an event synchronize, in
/// Relaxed capture mode so that another thread's capture is never broken: two mode switches).
///
/// Move-only; not thread-safe (one thread uploads).
///
/// @tparam T trivially copyable: an integer, a float, a plain struct of them
template <typename T>
class step_input {
  static_assert(std::is_trivially_copyable_v<T>,
                "step_input<T>: T must be trivially copyable (its bytes are copied to the device)");

 public:
  /// @brief `count` elements from `resource` (a `memory_pool`, or CUDA's allocator), zeroed on
  /// `stream`.
  /// @throws usage_error (count 0, depth 0, a capturing stream), out_of_memory,
  /// no_device_error, cuda_error
  step_input(std::size_t count, cuda::stream_view stream,
             cuda::memory_resource& resource = cuda::default_resource(), std::size_t depth = 2)
      : staging_{bytes_of(count), depth, stream, resource, "step_input"} {}

  /// @brief An input over the `count` elements of `T` at `device_data`, device memory that the
  /// caller owns and keeps owning; uploads copy into it as into an input's own memory. Nothing
  /// is allocated, zeroed or freed; the pinned slots and their events are the input's.
  /// @throws usage_error (a null or misaligned `device_data`, count 0, depth 0),
  /// no_device_error, cuda_error
  [[nodiscard]] static step_input adopt(T* device_data, std::size_t count, std::size_t depth = 2) {
    return step_input{detail::input_staging{device_data, bytes_of(count), alignof(T), depth,
                                            "step_input"}};
  }

  /// @brief The device address kernels read.
  [[nodiscard]] T* data() const noexcept { return static_cast<T*>(staging_.device()); }
  [[nodiscard]] std::size_t size() const noexcept { return staging_.bytes() / sizeof(T); }

  /// @brief Copies `count` (= `size()`) values to the device on `stream`.
  /// @throws usage_error (a null pointer, a count other than `size()`, a capturing stream),
  /// cuda_error
  void upload(T const* values, std::size_t count, cuda::stream_view stream) {
    staging_.upload(values, count, sizeof(T), stream);
  }
  /// @throws as `upload(values.data(), values.size(), stream)`
  void upload(std::vector<T> const& values, cuda::stream_view stream) {
    upload(values.data(), values.size(), stream);
  }
  /// @brief Uploads one value: for inputs of one element.
  /// @throws usage_error (an input of more than one element, a capturing stream), cuda_error
  void set(T const& value, cuda::stream_view stream) { upload(&value, 1, stream); }

  /// @brief The host slot of the next upload (`size()` elements, pinned): fill it in place,
  /// then call `upload_staged`. Waits for the upload that used the slot before.
  /// @throws cuda_error
  [[nodiscard]] T* stage() { return static_cast<T*>(staging_.stage()); }
  /// @brief Uploads the slot `stage()` returned.
  /// @throws usage_error (nothing staged since the last upload, a capturing stream), cuda_error
  void upload_staged(cuda::stream_view stream) { staging_.upload_staged(stream); }

  /// @brief Frees the memory on `stream` instead of the constructor's (see `device_buffer`);
  /// nothing for an adopted input, whose memory the caller frees.
  void set_stream(cuda::stream_view stream) noexcept { staging_.set_stream(stream); }

 private:
  explicit step_input(detail::input_staging staging) noexcept : staging_{std::move(staging)} {}

  static std::size_t bytes_of(std::size_t count) {
    GRAPHSTEP_EXPECTS(count > 0, "step_input: an input needs at least one element");
    GRAPHSTEP_EXPECTS(count <= static_cast<std::size_t>(-1) / sizeof(T),
                      "step_input: " + std::to_string(count) + " elements do not fit in memory");
    return count * sizeof(T);
  }

  detail::input_staging staging_;
};

}  // namespace graphstep::memory
