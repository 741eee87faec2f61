// device_buffer on a device, from every resource (the CUDA runtime's and a pool of each
// backing): allocation on a stream, contents, moves, frees on another stream; then what only a
// pool shows (statistics, budget, memory returned on destruction), the default resource's
// refusal of a capturing stream, and the training parts taking their memory from a pool.

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/train/adam.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/mse_loss.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"
#include "common/test_kernels.cuh"

namespace gs = graphstep;
using gs::testing::blocks_for;
using gs::testing::fill_kernel;
using gs::testing::message_of;

namespace {

enum class source { runtime, pool_virtual_memory, pool_device_malloc };

class device_buffer_test : public gs::testing::gpu_test,
                           public ::testing::WithParamInterface<source> {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
    if (GetParam() != source::runtime) {
      gs::memory::pool_options options;
      options.backing = GetParam() == source::pool_virtual_memory
                            ? gs::memory::pool_backing::virtual_memory
                            : gs::memory::pool_backing::device_malloc;
      options.growth_bytes = std::size_t{2} << 20;
      pool_.emplace(options);
    }
  }
  gs::cuda::memory_resource& resource() {
    if (pool_) return *pool_;
    return gs::cuda::default_resource();
  }
  template <typename T>
  std::vector<T> to_host(gs::cuda::device_buffer const& buffer) {
    std::vector<T> host(buffer.size() / sizeof(T));
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), buffer.data(), buffer.size(),
                                       cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return host;
  }
  // Declared first: it outlives the pool, which records the frees made on it.
  std::optional<gs::cuda::stream> stream_;
  std::optional<gs::memory::memory_pool> pool_;
};

}  // namespace

TEST_P(device_buffer_test, allocates_device_memory_on_a_stream) {
  gs::cuda::device_buffer const buffer{std::size_t{1} << 20, *stream_, resource()};
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.size(), std::size_t{1} << 20);
  EXPECT_EQ(buffer.stream(), stream_->view());
  EXPECT_EQ(&buffer.resource(), &resource());
  stream_->synchronize();  // the allocation is stream-ordered: done before the query below
  cudaPointerAttributes attributes{};
  GRAPHSTEP_CUDA_TRY(cudaPointerGetAttributes(&attributes, buffer.data()));
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
}

TEST_P(device_buffer_test, contents_round_trip) {
  int const n = 10000;
  std::vector<int> values(n);
  std::iota(values.begin(), values.end(), -17);
  gs::cuda::device_buffer const first{sizeof(int) * n, *stream_, resource()};
  gs::cuda::device_buffer const second{sizeof(int) * n, *stream_, resource()};
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(first.data(), values.data(), first.size(),
                                     cudaMemcpyHostToDevice, stream_->get()));
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(second.data(), first.data(), first.size(),
                                     cudaMemcpyDeviceToDevice, stream_->get()));
  EXPECT_EQ(to_host<int>(second), values);
}

TEST_P(device_buffer_test, a_kernel_on_the_stream_writes_it) {
  int const n = 4096;
  gs::cuda::device_buffer const buffer{sizeof(float) * n, *stream_, resource()};
  fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(static_cast<float*>(buffer.data()), 2.5F,
                                                         n);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  EXPECT_EQ(to_host<float>(buffer), std::vector<float>(n, 2.5F));
}

TEST_P(device_buffer_test, a_move_keeps_the_address_and_the_contents) {
  std::vector<float> const values(1000, 4.0F);
  gs::cuda::device_buffer source_buffer{sizeof(float) * values.size(), *stream_, resource()};
  void* const address = source_buffer.data();
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(address, values.data(), source_buffer.size(),
                                     cudaMemcpyHostToDevice, stream_->get()));
  gs::cuda::device_buffer moved{std::move(source_buffer)};
  EXPECT_EQ(moved.data(), address);
  EXPECT_TRUE(source_buffer.empty());  // NOLINT(bugprone-use-after-move): specified state
  gs::cuda::device_buffer assigned{16, *stream_, resource()};
  assigned = std::move(moved);  // frees its own 16 bytes first
  EXPECT_EQ(assigned.data(), address);
  EXPECT_EQ(to_host<float>(assigned), values);
}

TEST_P(device_buffer_test, set_stream_frees_on_another_stream) {
  gs::cuda::stream other;
  {
    gs::cuda::device_buffer buffer{std::size_t{1} << 16, *stream_, resource()};
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(buffer.data(), 0, buffer.size(), stream_->get()));
    gs::cuda::event const written;
    written.record(*stream_);
    other.view().wait(written);  // the free on `other` comes after the memset
    buffer.set_stream(other);
    ::testing::internal::CaptureStderr();
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // nothing reported
  other.synchronize();
  stream_->synchronize();
}

INSTANTIATE_TEST_SUITE_P(resources, device_buffer_test,
                         ::testing::Values(source::runtime, source::pool_virtual_memory,
                                           source::pool_device_malloc),
                         [](auto const& info) {
                           switch (info.param) {
                             case source::runtime: return std::string{"default_resource"};
                             case source::pool_virtual_memory: return std::string{"pool_vm"};
                             case source::pool_device_malloc: return std::string{"pool_malloc"};
                           }
                           return std::string{"unknown"};
                         });

namespace {

class device_buffer_pool_test : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
  }
  std::optional<gs::cuda::stream> stream_;
};

}  // namespace

TEST_F(device_buffer_pool_test, counts_in_the_pool_statistics_and_returns_on_destruction) {
  gs::memory::memory_pool pool;
  std::size_t const before = pool.statistics().bytes_in_use;
  std::size_t const bytes = 3000;
  void* address = nullptr;
  {
    gs::cuda::device_buffer const buffer{bytes, *stream_, pool};
    address = buffer.data();
    EXPECT_EQ(&buffer.resource(), static_cast<gs::cuda::memory_resource*>(&pool));
    auto const stats = pool.statistics();
    EXPECT_GE(stats.bytes_in_use, before + bytes);
    EXPECT_GE(stats.peak_bytes_in_use, before + bytes);
    EXPECT_GE(stats.mapped_bytes, bytes);
  }
  EXPECT_EQ(pool.statistics().bytes_in_use, before);
  // The block went back to the pool: the same stream gets it again at once.
  gs::cuda::device_buffer const again{bytes, *stream_, pool};
  EXPECT_EQ(again.data(), address);
}

TEST_F(device_buffer_pool_test, a_move_keeps_the_pool_block) {
  gs::memory::memory_pool pool;
  gs::cuda::device_buffer first{4096, *stream_, pool};
  std::size_t const in_use = pool.statistics().bytes_in_use;
  gs::cuda::device_buffer second{std::move(first)};
  EXPECT_EQ(pool.statistics().bytes_in_use, in_use);  // nothing freed, nothing allocated
  gs::cuda::device_buffer third{256, *stream_, pool};
  EXPECT_GT(pool.statistics().bytes_in_use, in_use);
  third = std::move(second);  // third's own block goes back
  EXPECT_EQ(pool.statistics().bytes_in_use, in_use);
}

TEST_F(device_buffer_pool_test, the_pool_budget_bounds_buffers) {
  gs::memory::pool_options options;
  options.budget_bytes = std::size_t{8} << 20;
  options.growth_bytes = std::size_t{2} << 20;
  gs::memory::memory_pool pool{options};
  gs::cuda::device_buffer const fits{std::size_t{1} << 20, *stream_, pool};
  try {
    gs::cuda::device_buffer const too_big{std::size_t{16} << 20, *stream_, pool};
    FAIL() << "no exception";
  } catch (gs::out_of_memory const& e) {
    EXPECT_EQ(e.sizes().requested, std::size_t{16} << 20);
    EXPECT_EQ(e.sizes().budget, options.budget_bytes);
    EXPECT_GE(e.sizes().in_use, std::size_t{1} << 20);
  }
  EXPECT_LE(pool.statistics().mapped_bytes, options.budget_bytes);
}

TEST_F(device_buffer_pool_test, a_capturing_stream_is_refused_without_its_capture_pool) {
  gs::memory::memory_pool pool;
  GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeThreadLocal));
  // Both refuse before calling into CUDA, so the capture stays valid.
  std::string const runtime = message_of([&] { gs::cuda::device_buffer b{256, *stream_}; });
  std::string const foreign = message_of([&] { gs::cuda::device_buffer b{256, *stream_, pool}; });
  // An empty buffer needs no memory: accepted.
  EXPECT_NO_THROW(gs::cuda::device_buffer const b(0, *stream_));
  cudaGraph_t graph = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(stream_->get(), &graph));
  GRAPHSTEP_CUDA_TRY(cudaGraphDestroy(graph));
  EXPECT_NE(runtime.find("cuda::default_resource: the stream is capturing"), std::string::npos)
      << runtime;
  EXPECT_NE(foreign.find("not by a graphs::capture_scope given this pool"), std::string::npos)
      << foreign;
}

TEST_F(device_buffer_pool_test, the_training_parts_take_their_memory_from_a_pool) {
  gs::memory::memory_pool pool;
  std::size_t const n = 5000;
  gs::cuda::device_buffer const value{sizeof(float) * n, *stream_, pool};
  gs::cuda::device_buffer const gradient{sizeof(float) * n, *stream_, pool};
  gs::train::parameter const p{{value.data(), gs::dtype::float32, n},
                               {gradient.data(), gs::dtype::float32, n}};
  std::size_t const before = pool.statistics().bytes_in_use;
  {
    gs::train::capture_safe_rng const rng{1, *stream_, pool};
    std::size_t const with_rng = pool.statistics().bytes_in_use;
    EXPECT_GE(with_rng, before + 2 * sizeof(std::uint64_t));
    gs::train::mse_loss const loss{n, *stream_, pool};
    std::size_t const with_loss = pool.statistics().bytes_in_use;
    EXPECT_GT(with_loss, with_rng);
    gs::train::adam const adam{{p}, {}, {}, {}, *stream_, pool};
    // Two state buffers of n floats each, and the tables.
    EXPECT_GE(pool.statistics().bytes_in_use, with_loss + 2 * sizeof(float) * n);
    EXPECT_EQ(adam.steps_taken(*stream_), 0);
  }
  stream_->synchronize();
  EXPECT_EQ(pool.statistics().bytes_in_use, before);
}
