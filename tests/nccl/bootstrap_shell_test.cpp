// Without a visible device a communicator from the launcher's environment fails with
// no_device_error.

#include <gtest/gtest.h>

#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/bootstrap.hpp>

namespace gs = graphstep;
namespace gn = graphstep::nccl;

TEST(bootstrap_no_device, a_communicator_from_the_environment_needs_a_device) {
  if (gs::cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_THROW(static_cast<void>(gn::communicator_from_environment()), gs::no_device_error);
  gn::bootstrap_options options;
  options.slot = 1;
  EXPECT_THROW(static_cast<void>(gn::communicator_from_environment(options)), gs::no_device_error);
}
