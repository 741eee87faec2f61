#pragma once

// The fixture of the single-process NCCL GPU tests: a stream, device buffers filled from the
// host and read back, and the collectives' view of them.

#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <optional>
#include <vector>

#include "common/gpu_test.hpp"

namespace graphstep::testing {

class nccl_buffer_test : public gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
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
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    return static_cast<float*>(device);
  }
  std::vector<float> download(float const* device, std::size_t n) {
    std::vector<float> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, n * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return host;
  }
  static nccl::buffer_view buffer(float* p, std::size_t n) {
    return {p, n * sizeof(float), dtype::float32};
  }
  std::optional<cuda::stream> stream_;
  std::vector<void*> buffers_;
};

}  // namespace graphstep::testing
