// Traits of the CUDA handle types: owners are move-only with noexcept moves, views are trivially
// copyable and refuse ambiguous null streams; the pool handle is move-only too.

#include <gtest/gtest.h>

#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <type_traits>

#include "common/handle_traits.hpp"

namespace gs = graphstep;

namespace {

static_assert(graphstep::testing::is_move_only_v<gs::cuda::stream>);
static_assert(graphstep::testing::is_move_only_v<gs::cuda::event>);
static_assert(graphstep::testing::is_move_only_v<gs::cuda::timed_event>);
static_assert(graphstep::testing::is_move_only_v<gs::memory::memory_pool>);
static_assert(std::is_base_of_v<gs::cuda::event, gs::cuda::timed_event>);

static_assert(std::is_trivially_copyable_v<gs::cuda::stream_view>);
static_assert(std::is_convertible_v<cudaStream_t, gs::cuda::stream_view>);
static_assert(!std::is_constructible_v<gs::cuda::stream_view, int>);
static_assert(!std::is_constructible_v<gs::cuda::stream_view, std::nullptr_t>);
static_assert(std::is_convertible_v<gs::cuda::stream const&, gs::cuda::stream_view>);

static_assert(!std::is_copy_constructible_v<gs::cuda::device_guard>);
static_assert(!std::is_move_constructible_v<gs::cuda::device_guard>);

}  // namespace

TEST(stream_view, compares_by_handle_and_knows_the_legacy_stream) {
  gs::cuda::stream_view const legacy{cudaStreamLegacy};
  gs::cuda::stream_view const per_thread{cudaStreamPerThread};
  EXPECT_TRUE(legacy.is_legacy_default());
  EXPECT_FALSE(per_thread.is_legacy_default());
  EXPECT_EQ(legacy, gs::cuda::stream_view{cudaStreamLegacy});
  EXPECT_NE(legacy, per_thread);
  EXPECT_EQ(per_thread.get(), cudaStreamPerThread);
}

TEST(stream, adopt_and_release_round_trip_without_a_device) {
  // A fake handle is never passed to CUDA: release() hands it back before destruction.
  auto* const fake = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000});
  gs::cuda::stream adopted = gs::cuda::stream::adopt(fake);
  EXPECT_EQ(adopted.get(), fake);
  EXPECT_EQ(adopted.view().get(), fake);
  gs::cuda::stream moved = std::move(adopted);
  EXPECT_EQ(adopted.get(), nullptr);  // NOLINT: moved-from state is specified
  EXPECT_EQ(moved.release(), fake);
  EXPECT_EQ(moved.get(), nullptr);
}

TEST(event, adopt_and_release_round_trip_without_a_device) {
  auto* const fake = reinterpret_cast<cudaEvent_t>(std::uintptr_t{0x2000});
  gs::cuda::event adopted = gs::cuda::event::adopt(fake);
  gs::cuda::event moved = std::move(adopted);
  EXPECT_EQ(adopted.get(), nullptr);  // NOLINT: moved-from state is specified
  EXPECT_EQ(moved.release(), fake);
}
