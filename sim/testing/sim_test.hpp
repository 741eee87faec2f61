#pragma once

// What the simulated device's own tests share: checks of CUDA runtime calls, the fixture that
// skips a GPU test where no device is visible, and copies to and from the device. They use the
// CUDA runtime alone (graphstep::cuda_sim, or CUDA::cudart on a GPU), never graphstep's library:
// the simulator is built and tested on its own (sim/CMakeLists.txt).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(GRAPHSTEP_CUDA_SIM)
#include <graphstep/sim/sim.hpp>
#endif

namespace sim_testing {

/// Built for the simulated CUDA device (graphstep::cuda_sim), not for a GPU.
#if defined(GRAPHSTEP_CUDA_SIM)
inline constexpr bool simulated_device = true;
#else
inline constexpr bool simulated_device = false;
#endif

/// Throws, naming the call, its place and the error, where `status` is not cudaSuccess: a test
/// that gets one fails with that message (GoogleTest reports the exception).
inline void throw_unless_success(cudaError_t status, char const* call, char const* file, int line) {
  if (status == cudaSuccess) return;
  static_cast<void>(cudaGetLastError());
  throw std::runtime_error{std::string{file} + ":" + std::to_string(line) + ": " + call +
                           " failed: " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")"};
}

}  // namespace sim_testing

/// Calls a CUDA runtime function; on failure throws, naming the call and the error.
#define SIM_TEST_TRY(call) ::sim_testing::throw_unless_success((call), #call, __FILE__, __LINE__)

/// Calls a CUDA runtime function where throwing is no way out (a TearDown, a destructor); on
/// failure the test fails, naming the call and the error, and goes on.
#define SIM_TEST_EXPECT_SUCCESS(call)                                                \
  do {                                                                               \
    if (auto const sim_status_ = (call); sim_status_ != cudaSuccess) {               \
      static_cast<void>(cudaGetLastError());                                         \
      ADD_FAILURE() << #call << " failed: " << cudaGetErrorName(sim_status_) << " (" \
                    << cudaGetErrorString(sim_status_) << ")";                       \
    }                                                                                \
  } while (0)

namespace sim_testing {

/// Copies `bytes` from host memory to the device and waits until they are there: a plain
/// cudaMemcpy from pageable memory may return before its copy lands (CUDA Runtime API, "API
/// synchronization behavior"), and it runs on the legacy stream, which non-blocking streams do
/// not wait for.
inline void copy_to_device(void* device, void const* host, std::size_t bytes) {
  SIM_TEST_TRY(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  SIM_TEST_TRY(cudaDeviceSynchronize());
}

/// Waits for the whole device, then copies `count` elements of device memory to the host: for
/// tests whose kernels run on the legacy stream.
template <typename T>
std::vector<T> read_back(T const* device, std::size_t count) {
  std::vector<T> host(count);
  SIM_TEST_TRY(cudaDeviceSynchronize());
  SIM_TEST_TRY(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

/// Copies `count` elements of device memory to the host in the order of `stream`, and waits for
/// them.
template <typename T>
std::vector<T> copy_to_host(T const* device, std::size_t count, cudaStream_t stream) {
  std::vector<T> values(count);
  SIM_TEST_TRY(
      cudaMemcpyAsync(values.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  SIM_TEST_TRY(cudaStreamSynchronize(stream));
  return values;
}

/// The fixture of every GPU test: without a visible CUDA device the test is skipped, and ctest
/// reports it as skipped, not passed.
class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      static_cast<void>(cudaGetLastError());
      GTEST_SKIP() << "no CUDA device visible";
    }
  }
};

/// @brief For its lifetime, work stays queued until the host waits for it, as on a busy GPU: on
/// the simulated device, whose default runs work as it is enqueued, the deferred execution mode;
/// on a GPU, nothing. Completion then is never what orders two streams by chance.
class queued_work {
 public:
  queued_work() {
#if defined(GRAPHSTEP_CUDA_SIM)
    previous_ = graphstep::sim::current_execution_mode();
    graphstep::sim::set_execution_mode(graphstep::sim::execution_mode::deferred);
#endif
  }
  ~queued_work() {
#if defined(GRAPHSTEP_CUDA_SIM)
    // An interleaved order restarts from seed 0: any seed gives an order CUDA allows.
    graphstep::sim::set_execution_mode(previous_);
#endif
  }
  queued_work(queued_work const&) = delete;
  queued_work& operator=(queued_work const&) = delete;
  queued_work(queued_work&&) = delete;
  queued_work& operator=(queued_work&&) = delete;

 private:
#if defined(GRAPHSTEP_CUDA_SIM)
  graphstep::sim::execution_mode previous_{graphstep::sim::execution_mode::immediate};
#endif
};

#if defined(GRAPHSTEP_CUDA_SIM)
/// One way the simulated device runs work (graphstep::sim::execution_mode), for a rule that must
/// hold in each: INSTANTIATE_TEST_SUITE_P(every_execution, suite,
/// ::testing::ValuesIn(sim_testing::every_execution), sim_testing::execution_name).
struct execution {
  graphstep::sim::execution_mode mode;
  std::uint64_t seed;
  char const* name;
};
inline constexpr std::array<execution, 3> every_execution{{
    {graphstep::sim::execution_mode::immediate, 0, "immediate"},
    {graphstep::sim::execution_mode::deferred, 0, "deferred"},
    {graphstep::sim::execution_mode::interleaved, 7, "interleaved"},
}};
inline std::string execution_name(::testing::TestParamInfo<execution> const& info) {
  return info.param.name;
}

/// @brief For its lifetime, work runs as `execution` says; the mode before comes back after
/// (an interleaved order from seed 0).
class execution_scope {
 public:
  explicit execution_scope(execution const& how)
      : previous_{graphstep::sim::current_execution_mode()} {
    graphstep::sim::set_execution_mode(how.mode, how.seed);
  }
  ~execution_scope() { graphstep::sim::set_execution_mode(previous_); }
  execution_scope(execution_scope const&) = delete;
  execution_scope& operator=(execution_scope const&) = delete;
  execution_scope(execution_scope&&) = delete;
  execution_scope& operator=(execution_scope&&) = delete;

 private:
  graphstep::sim::execution_mode previous_;
};
#endif

}  // namespace sim_testing
