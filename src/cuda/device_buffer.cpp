#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/error.hpp>
#include <utility>

namespace graphstep::cuda {
namespace {

// As GRAPHSTEP_ASSERT_CUDA_SUCCESS reports: a destructor must not throw.
void report_free_failure(void const* pointer, std::size_t bytes, char const* what) noexcept {
  static_cast<void>(std::fprintf(
      stderr, "graphstep: cleanup failed, continuing: device_buffer of %zu B at %p: %s\n", bytes,
      pointer, what));
}

}  // namespace

device_buffer::device_buffer(std::size_t bytes, stream_view stream, memory_resource& resource)
    : stream_{stream}, resource_{&resource} {
  if (bytes == 0) return;  // empty: nothing to allocate, nothing to free
  data_ = resource.allocate(bytes, stream);
  size_ = bytes;
}

device_buffer::~device_buffer() {
  free_memory();
}

device_buffer::device_buffer(device_buffer&& other) noexcept
    : data_{std::exchange(other.data_, nullptr)},
      size_{std::exchange(other.size_, 0)},
      stream_{other.stream_},
      resource_{other.resource_} {}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  if (this != &other) {
    free_memory();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    stream_ = other.stream_;
    resource_ = other.resource_;
  }
  return *this;
}

void device_buffer::free_memory() noexcept {
  if (data_ == nullptr) return;
  void* const pointer = std::exchange(data_, nullptr);
  std::size_t const bytes = std::exchange(size_, 0);
  try {
    resource_->deallocate(pointer, bytes, stream_);
  } catch (cuda_error const& e) {
    // The runtime shutting down at exit has freed everything already.
    if (e.code() != static_cast<int>(cudaErrorCudartUnloading)) {
      report_free_failure(pointer, bytes, e.what());
    }
  } catch (std::exception const& e) {
    report_free_failure(pointer, bytes, e.what());
  } catch (...) {
    report_free_failure(pointer, bytes, "the resource threw an exception of unknown type");
  }
}

}  // namespace graphstep::cuda
