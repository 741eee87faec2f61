// Shapes of static buffers, and their refusal to work without a device.

#include <gtest/gtest.h>

#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/static_buffer.hpp>

namespace gs = graphstep;

TEST(shape, element_counts_and_descriptions) {
  EXPECT_EQ(gs::memory::element_count({640, 4096}), 640U * 4096U);
  EXPECT_EQ(gs::memory::element_count({}), 1U);  // a scalar
  EXPECT_EQ(gs::memory::element_count({3, 0, 5}), 0U);
  EXPECT_EQ(gs::memory::describe({640, 4096}, gs::dtype::bfloat16), "[640, 4096] bfloat16");
  EXPECT_THROW(static_cast<void>(gs::memory::element_count({4, -1})), gs::usage_error);
  EXPECT_THROW(
      static_cast<void>(gs::memory::element_count({std::int64_t{1} << 40, std::int64_t{1} << 40})),
      gs::usage_error);
}

TEST(static_buffer, needs_a_device) {
  if (gs::cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_THROW(gs::memory::memory_pool{}, gs::no_device_error);
}
