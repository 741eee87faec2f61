// device_buffer and memory_resource without a device: ownership through moves, empty buffers,
// the order of allocate and deallocate calls (against a resource that hands out fake addresses
// and never calls CUDA), the checks that fire before any CUDA call, and "no CUDA device visible"
// from the default resource.

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/no_device.hpp"

namespace gs = graphstep;

namespace {

static_assert(!std::is_copy_constructible_v<gs::cuda::device_buffer>);
static_assert(!std::is_copy_assignable_v<gs::cuda::device_buffer>);
static_assert(std::is_nothrow_move_constructible_v<gs::cuda::device_buffer>);
static_assert(std::is_nothrow_move_assignable_v<gs::cuda::device_buffer>);
static_assert(std::is_nothrow_destructible_v<gs::cuda::device_buffer>);
static_assert(!std::is_default_constructible_v<gs::cuda::device_buffer>);

static_assert(std::is_abstract_v<gs::cuda::memory_resource>);
static_assert(std::has_virtual_destructor_v<gs::cuda::memory_resource>);
// Copies and moves are protected: no slicing through a base reference.
static_assert(!std::is_copy_constructible_v<gs::cuda::memory_resource>);
static_assert(!std::is_copy_assignable_v<gs::cuda::memory_resource>);
static_assert(!std::is_move_assignable_v<gs::cuda::memory_resource>);

// A pool is a resource, and its own two-argument calls still work beside the base's.
static_assert(std::is_base_of_v<gs::cuda::memory_resource, gs::memory::memory_pool>);
static_assert(std::is_convertible_v<gs::memory::memory_pool&, gs::cuda::memory_resource&>);
static_assert(std::is_same_v<decltype(std::declval<gs::memory::memory_pool&>().allocate(
                                 std::size_t{1}, std::declval<gs::cuda::stream_view>())),
                             void*>);
static_assert(std::is_same_v<decltype(std::declval<gs::memory::memory_pool&>().deallocate(
                                 nullptr, std::declval<gs::cuda::stream_view>())),
                             void>);
static_assert(std::is_same_v<decltype(std::declval<gs::memory::memory_pool&>().deallocate(
                                 nullptr, std::size_t{1}, std::declval<gs::cuda::stream_view>())),
                             void>);

// Streams that the recording resource only compares, never passes to CUDA.
cudaStream_t fake_stream(std::uintptr_t n) {
  return reinterpret_cast<cudaStream_t>(n);  // NOLINT(performance-no-int-to-ptr)
}

// Hands out fake addresses and records every call.
class recording_resource final : public gs::cuda::memory_resource {
 public:
  struct call {
    bool allocate;
    void* pointer;
    std::size_t bytes;
    cudaStream_t stream;
  };
  std::vector<call> calls;
  bool fail_deallocate{false};

 private:
  void* do_allocate(std::size_t bytes, gs::cuda::stream_view stream) override {
    auto* const pointer = reinterpret_cast<void*>(  // NOLINT(performance-no-int-to-ptr)
        std::uintptr_t{0x10000} * (calls.size() + 1));
    calls.push_back({true, pointer, bytes, stream.get()});
    return pointer;
  }
  void do_deallocate(void* pointer, std::size_t bytes, gs::cuda::stream_view stream) override {
    calls.push_back({false, pointer, bytes, stream.get()});
    if (fail_deallocate) throw gs::usage_error{"recording_resource: refused to free"};
  }
};

}  // namespace

TEST(device_buffer, allocates_from_its_resource_and_frees_there_on_its_stream) {
  recording_resource resource;
  void* address = nullptr;
  {
    gs::cuda::device_buffer const buffer{100, fake_stream(0x1), resource};
    address = buffer.data();
    EXPECT_NE(address, nullptr);
    EXPECT_EQ(buffer.size(), 100U);
    EXPECT_FALSE(buffer.empty());
    EXPECT_EQ(buffer.stream(), gs::cuda::stream_view{fake_stream(0x1)});
    EXPECT_EQ(&buffer.resource(), &resource);
    ASSERT_EQ(resource.calls.size(), 1U);
  }
  ASSERT_EQ(resource.calls.size(), 2U);
  EXPECT_TRUE(resource.calls[0].allocate);
  EXPECT_EQ(resource.calls[0].bytes, 100U);
  EXPECT_EQ(resource.calls[0].stream, fake_stream(0x1));
  EXPECT_FALSE(resource.calls[1].allocate);
  EXPECT_EQ(resource.calls[1].pointer, address);
  EXPECT_EQ(resource.calls[1].bytes, 100U);
  EXPECT_EQ(resource.calls[1].stream, fake_stream(0x1));
}

TEST(device_buffer, zero_bytes_is_an_empty_buffer_that_never_calls_the_resource) {
  recording_resource resource;
  {
    gs::cuda::device_buffer const buffer{0, fake_stream(0x1), resource};
    EXPECT_EQ(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), 0U);
    EXPECT_TRUE(buffer.empty());
    EXPECT_EQ(buffer.stream(), gs::cuda::stream_view{fake_stream(0x1)});
  }
  EXPECT_TRUE(resource.calls.empty());
}

// A tensor of no element is refused by name before the resource is asked (a spec of an
// unknown dtype cannot be made: tensor_spec's tests).
TEST(device_buffer, a_tensor_of_no_element_is_refused_before_anything_is_allocated) {
  recording_resource resource;
  std::string const said = gs::testing::message_of([&] {
    gs::cuda::device_buffer const buffer{
        {"empty", {4, 0}, gs::dtype::bfloat16}, fake_stream(0x1), resource};
  });
  EXPECT_TRUE(gs::testing::contains(
      said, "device_buffer: 'empty' [4, 0] bfloat16 holds no element; give every extent"))
      << said;
  EXPECT_TRUE(resource.calls.empty());
}

TEST(device_buffer, zero_bytes_from_the_default_resource_needs_no_device) {
  gs::cuda::device_buffer const buffer{0, cudaStreamPerThread};
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(&buffer.resource(), &gs::cuda::default_resource());
}

TEST(device_buffer, a_move_keeps_the_address_and_empties_the_source) {
  recording_resource resource;
  {
    gs::cuda::device_buffer source{64, fake_stream(0x1), resource};
    void* const address = source.data();
    gs::cuda::device_buffer moved{std::move(source)};
    EXPECT_EQ(moved.data(), address);
    EXPECT_EQ(moved.size(), 64U);
    EXPECT_EQ(moved.stream(), gs::cuda::stream_view{fake_stream(0x1)});
    // NOLINTBEGIN(bugprone-use-after-move): the moved-from state is specified
    EXPECT_EQ(source.data(), nullptr);
    EXPECT_EQ(source.size(), 0U);
    EXPECT_TRUE(source.empty());
    EXPECT_EQ(&source.resource(), &resource);
    // NOLINTEND(bugprone-use-after-move)
  }
  // One allocation, one free: the moved-from buffer frees nothing.
  ASSERT_EQ(resource.calls.size(), 2U);
  EXPECT_EQ(resource.calls[1].pointer, resource.calls[0].pointer);
}

TEST(device_buffer, move_assignment_frees_the_old_memory_on_the_old_stream_first) {
  recording_resource first;
  recording_resource second;
  {
    gs::cuda::device_buffer target{16, fake_stream(0x1), first};
    gs::cuda::device_buffer source{32, fake_stream(0x2), second};
    void* const old_address = target.data();
    void* const new_address = source.data();
    target = std::move(source);
    ASSERT_EQ(first.calls.size(), 2U);
    EXPECT_FALSE(first.calls[1].allocate);
    EXPECT_EQ(first.calls[1].pointer, old_address);
    EXPECT_EQ(first.calls[1].bytes, 16U);
    EXPECT_EQ(first.calls[1].stream, fake_stream(0x1));
    EXPECT_EQ(target.data(), new_address);
    EXPECT_EQ(target.size(), 32U);
    EXPECT_EQ(target.stream(), gs::cuda::stream_view{fake_stream(0x2)});
    EXPECT_EQ(&target.resource(), &second);
    EXPECT_TRUE(source.empty());  // NOLINT(bugprone-use-after-move)
    auto& self = target;
    target = std::move(self);  // self-move keeps the memory
    EXPECT_EQ(target.data(), new_address);
  }
  EXPECT_EQ(first.calls.size(), 2U);
  ASSERT_EQ(second.calls.size(), 2U);
  EXPECT_EQ(second.calls[1].pointer, second.calls[0].pointer);
  EXPECT_EQ(second.calls[1].stream, fake_stream(0x2));
}

TEST(device_buffer, set_stream_moves_the_free) {
  recording_resource resource;
  {
    gs::cuda::device_buffer buffer{8, fake_stream(0x1), resource};
    buffer.set_stream(fake_stream(0x2));
    EXPECT_EQ(buffer.stream(), gs::cuda::stream_view{fake_stream(0x2)});
  }
  ASSERT_EQ(resource.calls.size(), 2U);
  EXPECT_EQ(resource.calls[0].stream, fake_stream(0x1));
  EXPECT_EQ(resource.calls[1].stream, fake_stream(0x2));
}

TEST(device_buffer, a_failed_free_is_reported_not_thrown) {
  recording_resource resource;
  resource.fail_deallocate = true;
  ::testing::internal::CaptureStderr();
  { gs::cuda::device_buffer const buffer{8, fake_stream(0x1), resource}; }
  std::string const report = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(report.find("cleanup failed"), std::string::npos) << report;
  EXPECT_NE(report.find("device_buffer of 8 B"), std::string::npos) << report;
  EXPECT_NE(report.find("refused to free"), std::string::npos) << report;
  EXPECT_EQ(resource.calls.size(), 2U);
}

TEST(memory_resource, refuses_zero_bytes_and_null_pointers_before_the_resource_sees_them) {
  recording_resource resource;
  gs::cuda::memory_resource& base = resource;
  EXPECT_THROW(static_cast<void>(base.allocate(0, fake_stream(0x1))), gs::usage_error);
  EXPECT_THROW(base.deallocate(nullptr, 8, fake_stream(0x1)), gs::usage_error);
  EXPECT_TRUE(resource.calls.empty());
  // The same checks guard the default resource, before any CUDA call.
  gs::cuda::memory_resource& runtime = gs::cuda::default_resource();
  try {
    static_cast<void>(runtime.allocate(0, cudaStreamPerThread));
    FAIL() << "no exception";
  } catch (gs::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("0 bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runtime.deallocate(nullptr, 8, cudaStreamPerThread), gs::usage_error);
}

TEST(memory_resource, the_default_resource_is_one_instance) {
  EXPECT_EQ(&gs::cuda::default_resource(), &gs::cuda::default_resource());
}

namespace {

using device_buffer_no_device = graphstep::testing::no_device_test;
using graphstep::testing::expect_no_device_error;

}  // namespace

TEST_F(device_buffer_no_device, allocation_from_the_default_resource) {
  expect_no_device_error([] { gs::cuda::device_buffer buffer{16, cudaStreamPerThread}; });
  expect_no_device_error(
      [] { static_cast<void>(gs::cuda::default_resource().allocate(16, cudaStreamPerThread)); });
}
