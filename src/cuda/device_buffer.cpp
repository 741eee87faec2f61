#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <string>
#include <utility>

#include "cuda/detail/relaxed_capture_mode.hpp"
#include "detail/address_text.hpp"
#include "detail/logger.hpp"

namespace graphstep::cuda {
namespace {

// As GRAPHSTEP_ASSERT_CUDA_SUCCESS reports: a destructor must not throw.
void report_release_failure(void const* pointer, std::size_t bytes, char const* what) noexcept {
  graphstep::detail::log_lazily(log_level::error, [&] {
    return "cleanup failed, continuing: device_buffer of " + std::to_string(bytes) + " B at " +
           graphstep::detail::pointer_text(pointer) + ": " + what;
  });
}

// A tensor's spec, checked before anything is allocated (the spec has checked its dtype and
// that its bytes fit a size_t).
tensor_spec with_elements(tensor_spec spec) {
  GRAPHSTEP_EXPECTS(spec.count() > 0, "device_buffer: " + describe(spec) +
                                          " holds no element; give every extent a positive size");
  return spec;
}

}  // namespace

device_buffer::device_buffer(std::size_t bytes, stream_view stream, memory_resource& resource)
    : stream_{stream}, resource_{&resource} {
  allocate(bytes);
}

device_buffer::device_buffer(tensor_spec spec, stream_view stream, memory_resource& resource)
    : stream_{stream}, resource_{&resource}, spec_{with_elements(std::move(spec))} {
  allocate(spec_->bytes());
}

void device_buffer::allocate(std::size_t bytes) {
  if (bytes == 0) return;  // empty: nothing to allocate, nothing to free
  data_ = resource_->allocate(bytes, stream_);
  size_ = bytes;
  // Where record_use makes its events. Not thrown on: the memory is this buffer's already.
  if (cudaGetDevice(&device_) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    device_ = -1;
  }
}

device_buffer::~device_buffer() {
  release();
}

device_buffer::device_buffer(device_buffer&& other) noexcept
    : data_{std::exchange(other.data_, nullptr)},
      size_{std::exchange(other.size_, 0)},
      stream_{other.stream_},
      resource_{other.resource_},
      device_{other.device_},
      spec_{std::exchange(other.spec_, std::nullopt)},
      uses_elsewhere_{std::exchange(other.uses_elsewhere_, {})} {}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    stream_ = other.stream_;
    resource_ = other.resource_;
    device_ = other.device_;
    spec_ = std::exchange(other.spec_, std::nullopt);
    uses_elsewhere_ = std::exchange(other.uses_elsewhere_, {});
  }
  return *this;
}

void device_buffer::release() noexcept {
  if (data_ == nullptr) return;
  void* const pointer = std::exchange(data_, nullptr);
  std::size_t const bytes = std::exchange(size_, 0);
  try {
    if (!uses_elsewhere_.empty()) {
      // Waits on events only, Relaxed: a device-wide wait would break every capture under way
      // on the device, including those graphstep cannot see, and a host wait in Global mode
      // another thread's Global capture. (The resources free in Relaxed mode themselves.)
      detail::relaxed_capture_mode const relaxed;
      bool const capturing = stream_.is_capturing();
      for (event const& use : uses_elsewhere_) {
        if (use.query()) continue;
        // A capturing stream may not wait on an event recorded outside its capture
        // (cudaErrorStreamCaptureIsolation): the host waits instead.
        if (capturing) {
          use.synchronize();
        } else {
          stream_.wait(use);
        }
      }
      uses_elsewhere_.clear();
    }
    resource_->deallocate(pointer, bytes, stream_);
  } catch (cuda_error const& e) {
    // The runtime shutting down at exit has freed everything already.
    if (e.code() != static_cast<int>(cudaErrorCudartUnloading)) {
      report_release_failure(pointer, bytes, e.what());
    }
  } catch (std::exception const& e) {
    report_release_failure(pointer, bytes, e.what());
  } catch (...) {
    report_release_failure(pointer, bytes, "the resource threw an exception of unknown type");
  }
  uses_elsewhere_.clear();
  spec_.reset();
}

device_span device_buffer::view() const {
  GRAPHSTEP_EXPECTS(data_ != nullptr, "device_buffer::view: this buffer is empty (moved from?)");
  GRAPHSTEP_EXPECTS(spec_.has_value(),
                    "device_buffer::view: a buffer made from a byte count has no element type; "
                    "make it from a tensor_spec");
  return {data_, spec_->type(), spec_->count()};
}

tensor_view device_buffer::tensor() const {
  GRAPHSTEP_EXPECTS(data_ != nullptr, "device_buffer::tensor: this buffer is empty (moved from?)");
  GRAPHSTEP_EXPECTS(spec_.has_value(),
                    "device_buffer::tensor: a buffer made from a byte count is no tensor; make "
                    "it from a tensor_spec");
  return {data_, *spec_};
}

void device_buffer::record_use(stream_view stream) const {
  GRAPHSTEP_EXPECTS(data_ != nullptr,
                    "device_buffer::record_use: this buffer is empty (moved from?)");
  if (stream.get() == stream_.get() || stream.is_capturing()) return;
  GRAPHSTEP_EXPECTS(device_ >= 0, "device_buffer::record_use: the buffer's device is unknown");
  device_guard const on_device{device_};
  detail::relaxed_capture_mode const relaxed;
  // Reuses an event whose use has completed, so the list stays as long as the uses in flight.
  auto done = std::find_if(uses_elsewhere_.begin(), uses_elsewhere_.end(),
                           [](event const& use) { return use.query(); });
  if (done == uses_elsewhere_.end()) done = uses_elsewhere_.emplace(uses_elsewhere_.end());
  done->record(stream);
}

void device_buffer::expect(std::size_t bytes, dtype type, char const* what) const {
  bool const typed_as_given = !spec_ || type == spec_->type();
  if (data_ != nullptr && typed_as_given && bytes == size_) return;  // no message built per copy
  std::string const where = std::string{"device_buffer::"} + what + ": ";
  GRAPHSTEP_EXPECTS(data_ != nullptr, where + "this buffer is empty (moved from?)");
  std::string const described = spec_ ? describe(*spec_) : "untyped";
  GRAPHSTEP_EXPECTS(typed_as_given, where + name(type) + " data for a " + described + " buffer");
  GRAPHSTEP_EXPECTS(bytes == size_, where + std::to_string(bytes) + " bytes for " +
                                        (spec_ ? "a " : "an ") + described + " buffer of " +
                                        std::to_string(size_) + " bytes");
}

void device_buffer::copy_from_host(void const* source, std::size_t bytes, dtype type,
                                   stream_view stream) {
  expect(bytes, type, "copy_from_host");
  GRAPHSTEP_EXPECTS(source != nullptr, "device_buffer::copy_from_host: the source is null");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "device_buffer::copy_from_host inside a capture would record the host "
                    "address, not the data: refill static inputs between replays");
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(data_, source, bytes, cudaMemcpyHostToDevice, stream.get()));
  record_use(stream);
}

void device_buffer::copy_from_host(std::vector<float> const& source, stream_view stream) {
  copy_from_host(source.data(), source.size() * sizeof(float), dtype::float32, stream);
}

void device_buffer::copy_from_device(device_span source, stream_view stream) {
  copy_device_bytes(source.data(), source.bytes(), source.type(), "copy_from_device", stream);
}

void device_buffer::copy_device_bytes(void const* source, std::size_t bytes, dtype type,
                                      char const* what, stream_view stream) {
  expect(bytes, type, what);
  GRAPHSTEP_EXPECTS(source != nullptr,
                    std::string{"device_buffer::"} + what + ": the source is null");
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(data_, source, bytes, cudaMemcpyDeviceToDevice, stream.get()));
  record_use(stream);
}

void device_buffer::copy_from(device_buffer const& source, stream_view stream) {
  auto const type_of = [](device_buffer const& b) {
    return b.spec_ ? std::optional<dtype>{b.spec_->type()} : std::nullopt;
  };
  GRAPHSTEP_EXPECTS(type_of(source) == type_of(*this),
                    "device_buffer::copy_from: buffers of different types (or one untyped)");
  copy_device_bytes(source.data(), source.size(), spec_ ? spec_->type() : dtype::float32,
                    "copy_from", stream);
  source.record_use(stream);
}

void device_buffer::copy_to_host(void* destination, std::size_t bytes, dtype type,
                                 stream_view stream) const {
  expect(bytes, type, "copy_to_host");
  GRAPHSTEP_EXPECTS(destination != nullptr, "device_buffer::copy_to_host: the destination is null");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "device_buffer::copy_to_host inside a capture would record the host "
                    "address: read results after the replay");
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(destination, data_, bytes, cudaMemcpyDeviceToHost, stream.get()));
  record_use(stream);
}

std::vector<float> device_buffer::to_host(stream_view stream) const {
  std::vector<float> host(size_ / sizeof(float));
  copy_to_host(host.data(), host.size() * sizeof(float), dtype::float32, stream);
  stream.synchronize();
  return host;
}

}  // namespace graphstep::cuda
