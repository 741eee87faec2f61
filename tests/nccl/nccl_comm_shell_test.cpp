// Without a visible device the NCCL entry points that need one fail with no_device_error.

#include <gtest/gtest.h>

#include <chrono>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bootstrap.hpp>
#include <graphstep/nccl/nccl_comm.hpp>
#include <string>

namespace gs = graphstep;
namespace gn = graphstep::nccl;

TEST(nccl_no_device, communicators_need_a_device) {
  if (gs::cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_THROW(static_cast<void>(gn::nccl_comm::for_local_devices({0})), gs::no_device_error);
  EXPECT_THROW(static_cast<void>(gn::nccl_comm::from_unique_id({}, 0, 1)), gs::no_device_error);
  EXPECT_THROW(static_cast<void>(gn::communicator_from_environment()), gs::no_device_error);
  EXPECT_THROW(static_cast<void>(gn::nccl_comm::for_local_devices({})), gs::usage_error);
}

// Checked before any device is touched, so the same with or without a GPU.
TEST(nccl_no_device, two_ranks_on_one_gpu_are_refused_before_nccl_is_called) {
  EXPECT_THROW(static_cast<void>(gn::nccl_comm::for_local_devices({0, 0})), gs::usage_error);
}

TEST(nccl_no_device, an_init_timeout_that_is_not_positive_is_refused_before_nccl_is_called) {
  gn::nccl_comm_options options;
  options.init_timeout = std::chrono::milliseconds{0};
  try {
    static_cast<void>(gn::nccl_comm::from_unique_id({}, 0, 1, options));
    ADD_FAILURE() << "a zero init timeout was accepted";
  } catch (gs::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("the init timeout must be positive, not 0 ms"),
              std::string::npos)
        << e.what();
  }
}
