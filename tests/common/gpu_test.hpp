#pragma once

// The fixture of every GPU test: without a visible CUDA device the test is skipped, and ctest
// reports it as skipped, not passed.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <optional>
#include <vector>

#include "common/pool_blocks.hpp"

#if defined(GRAPHSTEP_CUDA_SIM)
#include <graphstep/sim/sim.hpp>
#endif

namespace graphstep::testing {

/// Built for the simulated CUDA device (graphstep::cuda_sim): the runtime, graphstep's kernels and
/// cuBLASLt (with the cuBLAS calls the tests make) run on the CPU; cuDNN, NCCL and CUPTI, whose
/// device code graphstep cannot see, are not modelled there yet, so a test that needs one is
/// skipped on it, not passed.
#if defined(GRAPHSTEP_CUDA_SIM)
inline constexpr bool simulated_device = true;
#else
inline constexpr bool simulated_device = false;
#endif

/// Copies `bytes` from host memory to the device and waits until they are there: a plain
/// cudaMemcpy from pageable memory may return before its copy lands (CUDA Runtime API, "API
/// synchronization behavior"), and it runs on the legacy stream, which non-blocking streams do
/// not wait for.
inline void copy_to_device(void* device, void const* host, std::size_t bytes) {
  GRAPHSTEP_CUDA_TRY(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
}

/// Waits for the whole device, then copies `count` elements of device memory to the host: for
/// tests whose kernels run on the legacy stream.
template <typename T>
std::vector<T> read_back(T const* device, std::size_t count) {
  std::vector<T> host(count);
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  GRAPHSTEP_CUDA_TRY(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

/// Copies `count` elements of device memory to the host in the order of `stream`, and waits for
/// them.
template <typename T>
std::vector<T> copy_to_host(T const* device, std::size_t count, cuda::stream_view stream) {
  std::vector<T> values(count);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(values.data(), device, count * sizeof(T),
                                     cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return values;
}

class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

/// @brief A GPU test with a stream and a pool, made once the device is known to be there.
class stream_pool_test : public gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
    pool_.emplace();
    blocks_.emplace(*pool_, *stream_);
  }
  std::optional<cuda::stream> stream_;
  std::optional<memory::memory_pool> pool_;
  std::optional<pool_blocks> blocks_;  ///< the test's buffers from pool_, given back at the end
};

/// @brief For its lifetime, work stays queued until the host waits for it, as on a busy GPU: on
/// the simulated device, whose default runs work as it is enqueued, the deferred execution mode;
/// on a GPU, nothing. Completion then is never what orders two streams by chance.
class queued_work {
 public:
  queued_work() {
#if defined(GRAPHSTEP_CUDA_SIM)
    previous_ = sim::current_execution_mode();
    sim::set_execution_mode(sim::execution_mode::deferred);
#endif
  }
  ~queued_work() {
#if defined(GRAPHSTEP_CUDA_SIM)
    // An interleaved order restarts from seed 0: any seed gives an order CUDA allows.
    sim::set_execution_mode(previous_);
#endif
  }
  queued_work(queued_work const&) = delete;
  queued_work& operator=(queued_work const&) = delete;
  queued_work(queued_work&&) = delete;
  queued_work& operator=(queued_work&&) = delete;

 private:
#if defined(GRAPHSTEP_CUDA_SIM)
  sim::execution_mode previous_{sim::execution_mode::immediate};
#endif
};

}  // namespace graphstep::testing

/// Skips the calling test on the simulated device, which does not model `library` yet, saying
/// `why` not.
#define GRAPHSTEP_SKIP_ON_SIMULATED_DEVICE(library, why)                                       \
  do {                                                                                         \
    if (::graphstep::testing::simulated_device)                                                \
      GTEST_SKIP() << library << " is not modelled on the simulated CUDA device yet: " << why; \
  } while (false)
