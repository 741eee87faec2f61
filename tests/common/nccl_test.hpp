#pragma once

// The fixture of the single-process NCCL GPU tests: a stream, device buffers filled from the
// host and read back, and the collectives' view of them.

#include <atomic>
#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <optional>
#include <vector>

#include "common/gpu_test.hpp"

namespace graphstep::testing {

/// A GPU test that calls NCCL: skipped where no device is visible.
using nccl_gpu_test = gpu_test;

class nccl_buffer_test : public nccl_gpu_test {
 protected:
  void SetUp() override {
    nccl_gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
  }
  void TearDown() override {
    for (void* p : buffers_) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(p));
  }
  float* upload(std::vector<float> const& host) {
    void* device = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&device, host.size() * sizeof(float)));
    buffers_.push_back(device);
    graphstep::testing::copy_to_device(device, host.data(), host.size() * sizeof(float));
    return static_cast<float*>(device);
  }
  std::vector<float> download(float const* device, std::size_t n) {
    std::vector<float> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, n * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return host;
  }
  static device_span buffer(float* p, std::size_t n) { return {p, dtype::float32, n}; }
  std::optional<cuda::stream> stream_;
  std::vector<void*> buffers_;
};

/// @brief A non-blocking stream whose work cannot finish until `finish()`: a host function on
/// it spins on a flag, standing for a collective that hangs. Released and destroyed at the end
/// of its scope, also when a test fails early. On the simulated device, where work may run on
/// the host thread that enqueues or queries it, the work is deferred meanwhile (it runs when the
/// host waits for it, after `finish()`).
class stalled_stream {
 public:
  stalled_stream() {
    GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    GRAPHSTEP_CUDA_TRY(cudaLaunchHostFunc(
        stream_,
        [](void* flag) {
          while (static_cast<std::atomic<int>*>(flag)->load() == 0) {
          }
        },
        &released_));
  }
  ~stalled_stream() {
    released_ = 1;
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamSynchronize(stream_));
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(stream_));
  }
  stalled_stream(stalled_stream const&) = delete;
  stalled_stream& operator=(stalled_stream const&) = delete;
  stalled_stream(stalled_stream&&) = delete;
  stalled_stream& operator=(stalled_stream&&) = delete;

  /// @brief Lets the stalled work finish and waits for it.
  void finish() {
    released_ = 1;
    GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(stream_));
  }
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

 private:
  queued_work const queued_;  // first: deferred before the stream's work, restored after it
  cudaStream_t stream_{};
  std::atomic<int> released_{0};
};

}  // namespace graphstep::testing
