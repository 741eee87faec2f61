#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_guard.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/static_buffer.hpp>
#include <limits>
#include <sstream>
#include <utility>

#include "cuda/detail/relaxed_capture_mode.hpp"
#include "memory/detail/pool_state.hpp"

namespace graphstep::memory {

std::size_t element_count(std::vector<std::int64_t> const& shape) {
  std::size_t count = 1;
  for (std::int64_t extent : shape) {
    GRAPHSTEP_EXPECTS(extent >= 0,
                      "shape " + describe(shape, dtype::float32) + " has a negative extent");
    auto const e = static_cast<std::size_t>(extent);
    GRAPHSTEP_EXPECTS(e == 0 || count <= std::numeric_limits<std::size_t>::max() / e,
                      "shape " + describe(shape, dtype::float32) + " has too many elements");
    count *= e;
  }
  return count;
}

std::string describe(std::vector<std::int64_t> const& shape, dtype type) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i != 0 ? ", " : "") << shape[i];
  out << "] " << name(type);
  return out.str();
}

static_buffer::static_buffer(memory_pool& pool, std::vector<std::int64_t> shape, dtype type,
                             cuda::stream_view stream)
    : shape_{std::move(shape)}, type_{type}, stream_{stream} {
  std::size_t const count = element_count(shape_);
  GRAPHSTEP_EXPECTS(count > 0,
                    "static_buffer: shape " + describe(shape_, type_) + " holds no element");
  GRAPHSTEP_EXPECTS(count <= std::numeric_limits<std::size_t>::max() / size_in_bytes(type),
                    "static_buffer: shape " + describe(shape_, type_) + " is too large");
  bytes_ = count * size_in_bytes(type);
  data_ = pool.allocate(bytes_, stream);
  pool_ = pool.state_;
}

static_buffer::~static_buffer() {
  release();
}

static_buffer::static_buffer(static_buffer&& other) noexcept
    : pool_{std::move(other.pool_)},
      data_{std::exchange(other.data_, nullptr)},
      bytes_{std::exchange(other.bytes_, 0)},
      shape_{std::move(other.shape_)},
      type_{other.type_},
      stream_{other.stream_},
      uses_elsewhere_{std::move(other.uses_elsewhere_)} {}

static_buffer& static_buffer::operator=(static_buffer&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::move(other.pool_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    shape_ = std::move(other.shape_);
    type_ = other.type_;
    stream_ = other.stream_;
    uses_elsewhere_ = std::move(other.uses_elsewhere_);
  }
  return *this;
}

void static_buffer::release() noexcept {
  if (data_ == nullptr || pool_ == nullptr) return;
  auto* const pool = static_cast<detail::pool_state*>(pool_.get());
  try {
    cuda::device_guard const on_device{pool->device()};
    // Waits on events only, Relaxed: a device-wide wait would break every capture under way on
    // the device, including those graphstep cannot see, and a host wait in Global mode another
    // thread's Global capture.
    cuda::detail::relaxed_capture_mode const relaxed;
    bool const capturing = stream_.is_capturing();
    for (cuda::event const& use : uses_elsewhere_) {
      if (use.query()) continue;
      // A capturing stream may not wait on an event recorded outside its capture
      // (cudaErrorStreamCaptureIsolation): the host waits instead.
      if (capturing) {
        use.synchronize();
      } else {
        stream_.wait(use);
      }
    }
    pool->deallocate(data_, stream_.get());
  } catch (std::exception const& e) {
    // The block stays allocated: handing it out while some stream may still use it is worse.
    static_cast<void>(std::fprintf(
        stderr, "graphstep: static_buffer release failed; its %zu bytes stay allocated: %s\n",
        bytes_, e.what()));
  }
  uses_elsewhere_.clear();
  data_ = nullptr;
  pool_.reset();
}

void static_buffer::record_use(cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(data_ != nullptr, "static_buffer::record_use: this buffer was moved from");
  if (stream.get() == stream_.get() || stream.is_capturing()) return;
  cuda::device_guard const on_device{static_cast<detail::pool_state*>(pool_.get())->device()};
  cuda::detail::relaxed_capture_mode const relaxed;
  // Reuses an event whose use has completed, so the list stays as long as the uses in flight.
  auto done = std::find_if(uses_elsewhere_.begin(), uses_elsewhere_.end(),
                           [](cuda::event const& use) { return use.query(); });
  if (done == uses_elsewhere_.end()) done = uses_elsewhere_.emplace(uses_elsewhere_.end());
  done->record(stream);
}

void static_buffer::expect(std::size_t bytes, dtype type, char const* what) const {
  GRAPHSTEP_EXPECTS(data_ != nullptr,
                    std::string{"static_buffer::"} + what + ": this buffer was moved from");
  GRAPHSTEP_EXPECTS(type == type_, std::string{"static_buffer::"} + what + ": " + name(type) +
                                       " data for a " + describe(shape_, type_) + " buffer");
  GRAPHSTEP_EXPECTS(bytes == bytes_, std::string{"static_buffer::"} + what + ": " +
                                         std::to_string(bytes) + " bytes for a " +
                                         describe(shape_, type_) + " buffer of " +
                                         std::to_string(bytes_) + " bytes");
}

void static_buffer::copy_from_host(void const* source, std::size_t bytes, dtype type,
                                   cuda::stream_view stream) {
  expect(bytes, type, "copy_from_host");
  GRAPHSTEP_EXPECTS(source != nullptr, "static_buffer::copy_from_host: the source is null");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "static_buffer::copy_from_host inside a capture would record the host "
                    "address, not the data: refill static inputs between replays");
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(data_, source, bytes, cudaMemcpyHostToDevice, stream.get()));
  record_use(stream);
}

void static_buffer::copy_from_host(std::vector<float> const& source, cuda::stream_view stream) {
  copy_from_host(source.data(), source.size() * sizeof(float), dtype::float32, stream);
}

void static_buffer::copy_from_device(void const* source, std::size_t bytes, dtype type,
                                     cuda::stream_view stream) {
  expect(bytes, type, "copy_from_device");
  GRAPHSTEP_EXPECTS(source != nullptr, "static_buffer::copy_from_device: the source is null");
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(data_, source, bytes, cudaMemcpyDeviceToDevice, stream.get()));
  record_use(stream);
}

void static_buffer::copy_from(static_buffer const& source, cuda::stream_view stream) {
  copy_from_device(source.data(), source.bytes(), source.type(), stream);
  source.record_use(stream);
}

void static_buffer::copy_to_host(void* destination, std::size_t bytes, dtype type,
                                 cuda::stream_view stream) const {
  expect(bytes, type, "copy_to_host");
  GRAPHSTEP_EXPECTS(destination != nullptr, "static_buffer::copy_to_host: the destination is null");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "static_buffer::copy_to_host inside a capture would record the host "
                    "address: read results after the replay");
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(destination, data_, bytes, cudaMemcpyDeviceToHost, stream.get()));
  record_use(stream);
}

std::vector<float> static_buffer::to_host(cuda::stream_view stream) const {
  std::vector<float> host(bytes_ / sizeof(float));
  copy_to_host(host.data(), host.size() * sizeof(float), dtype::float32, stream);
  stream.synchronize();
  return host;
}

}  // namespace graphstep::memory
