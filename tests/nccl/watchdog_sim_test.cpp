// The watchdog's background thread on the simulated device, where CUDA's contexts are
// observable: the thread must use only its communicator's device.

#include <gtest/gtest.h>

#include <chrono>
#include <graphstep/cuda/device.hpp>
#include <graphstep/nccl.hpp>
#include <graphstep/sim/sim.hpp>
#include <thread>

namespace gn = graphstep::nccl;

// A thread whose first runtime call comes before cudaSetDevice uses device 0's primary context
// (CUDA initializes it there), which costs a context's memory on GPU 0 for every rank of a host.
TEST(watchdog_thread, uses_only_its_communicators_device) {
  if (graphstep::cuda::device_count() < 2) {
    GTEST_SKIP() << "needs two simulated devices (GRAPHSTEP_SIM_DEVICES=2)";
  }
  auto comms = gn::nccl_comm::for_local_devices({1});
  std::size_t const before = graphstep::sim::threads_that_used_device(0);
  std::size_t const on_device_1 = graphstep::sim::threads_that_used_device(1);
  {
    gn::watchdog_options options;
    options.background = true;
    options.poll_interval = std::chrono::milliseconds{5};
    gn::watchdog const dog{comms.at(0).view(), options};
    std::this_thread::sleep_for(std::chrono::milliseconds{50});  // several polls
  }
  EXPECT_EQ(graphstep::sim::threads_that_used_device(0), before)
      << "the watchdog's thread used device 0's context";
  EXPECT_EQ(graphstep::sim::threads_that_used_device(1), on_device_1 + 1)
      << "the watchdog's thread did not use its communicator's device";
}
