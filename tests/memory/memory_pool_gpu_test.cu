// The memory pool on a device: fixed addresses across replays, graph-private memory, sharing,
// growth, budgets, planned mode and teardown in any order. Every test runs on both backings.

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_mode.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/pool_statistics.hpp>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"
#include "common/test_kernels.cuh"

namespace gs = graphstep;
using gs::testing::axpy_kernel;
using gs::testing::blocks_for;
using gs::testing::fill_kernel;
using gs::testing::message_of;

namespace {

class pool_test : public gs::testing::gpu_test,
                  public ::testing::WithParamInterface<gs::memory::pool_backing> {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
  }
  gs::memory::pool_options options(std::size_t budget = 0) const {
    gs::memory::pool_options o;
    o.backing = GetParam();
    o.budget_bytes = budget;
    o.growth_bytes = std::size_t{2} << 20;
    return o;
  }
  float read(float const* device) {
    float host = 0.0F;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(&host, device, sizeof(float), cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return host;
  }
  std::optional<gs::cuda::stream> stream_;
};

std::uintptr_t address(void const* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

// `replays` on a GPU, or GRAPHSTEP_SOAK_REPLAYS where that is set lower: the simulated device's
// test presets bound it, as they bound the soak tests.
std::size_t bounded_replays(std::size_t replays) {
  if (char const* env = std::getenv("GRAPHSTEP_SOAK_REPLAYS")) {
    std::size_t const bound = std::strtoull(env, nullptr, 10);
    if (bound > 0 && bound < replays) return bound;
  }
  return replays;
}

}  // namespace

namespace graphstep::memory {
// Readable test names in failure reports.
void PrintTo(pool_backing backing, std::ostream* out) {
  *out << (backing == pool_backing::virtual_memory ? "virtual_memory" : "device_malloc");
}
}  // namespace graphstep::memory

TEST_P(pool_test, captured_allocations_keep_their_addresses_across_replays) {
  gs::memory::memory_pool pool{options()};
  int const n = 1024;
  float* out = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
  std::vector<void*> scratch;
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, pool, [&] {
    for (int i = 0; i < 4; ++i) {
      auto* s = static_cast<float*>(pool.allocate(sizeof(float) * n * (i + 1), *stream_));
      scratch.push_back(s);
      fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(s, 1.0F, n);
      axpy_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(out, s, 1.0F, n);
      if (i % 2 == 1) pool.deallocate(s, *stream_);  // reused later in the same capture
    }
  });
  auto const held = pool.bytes_held_by(g.id());
  EXPECT_GT(held, 0U);
  // Eager allocations never land on memory the graph writes.
  std::vector<void*> eager;
  for (int i = 0; i < 16; ++i) {
    void* p = pool.allocate(sizeof(float) * n, *stream_);
    for (void* s : scratch) {
      EXPECT_FALSE(address(p) < address(s) + sizeof(float) * n * 4 &&
                   address(s) < address(p) + sizeof(float) * n)
          << "an eager block overlaps graph memory";
    }
    eager.push_back(p);
  }
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, sizeof(float) * n, stream_->get()));
  std::size_t const replays = bounded_replays(10000);
  for (std::size_t i = 0; i < replays; ++i) g.replay(*stream_);
  EXPECT_EQ(read(out), 4.0F * static_cast<float>(replays));
  EXPECT_EQ(pool.bytes_held_by(g.id()), held);
  for (void* p : eager) pool.deallocate(p, *stream_);
  pool.deallocate(out, *stream_);
}

// torch.cuda.memory_snapshot(): segments tiled by blocks, each live block with the graph that
// allocated it; a graph's outputs stay live until the graph goes.
TEST_P(pool_test, a_snapshot_shows_segments_blocks_and_who_holds_them) {
  gs::memory::memory_pool pool{options()};
  std::size_t const bytes = 4096;
  void* eager = pool.allocate(bytes, *stream_);
  void* output = nullptr;
  void* scratch = nullptr;
  std::uint64_t graph_id = 0;
  {
    gs::graphs::graph_exec g;
    gs::graphs::capture(g, *stream_, pool, [&] {
      output = pool.allocate(bytes, *stream_);
      scratch = pool.allocate(2 * bytes, *stream_);
      fill_kernel<<<blocks_for(1024), 256, 0, stream_->get()>>>(static_cast<float*>(scratch), 1.0F,
                                                                1024);
      pool.deallocate(scratch, *stream_);
    });
    graph_id = g.id();
    auto const segments = pool.snapshot();
    ASSERT_FALSE(segments.empty());
    std::size_t live_bytes = 0;
    std::size_t segment_bytes = 0;
    bool scratch_reserved = false;
    for (auto const& segment : segments) {
      segment_bytes += segment.bytes;
      auto next = address(segment.base);
      for (auto const& b : segment.blocks) {
        EXPECT_EQ(address(b.address), next) << "blocks tile their segment";
        next += b.bytes;
        if (b.live) live_bytes += b.bytes;
        if (b.address == scratch) {
          EXPECT_FALSE(b.live);
          scratch_reserved = b.reserved_for == std::vector<std::uint64_t>{graph_id};
        }
      }
    }
    EXPECT_TRUE(scratch_reserved) << "the graph's freed scratch stays its own";
    EXPECT_EQ(live_bytes, pool.statistics().bytes_in_use);
    EXPECT_LE(segment_bytes, pool.statistics().mapped_bytes);
    auto const live = pool.live_allocations();
    ASSERT_EQ(live.size(), 2U);
    for (auto const& b : live) {
      EXPECT_GE(b.bytes, bytes);
      EXPECT_TRUE(b.address == eager || b.address == output);
      EXPECT_EQ(b.graph, b.address == output ? graph_id : 0U);
    }
  }
  stream_->synchronize();
  auto const after = pool.live_allocations();
  ASSERT_EQ(after.size(), 1U) << "the output went with its graph";
  EXPECT_EQ(after[0].address, eager);
  for (auto const& segment : pool.snapshot()) {
    for (auto const& b : segment.blocks) EXPECT_TRUE(b.reserved_for.empty());
  }
  pool.deallocate(eager, *stream_);
}

TEST_P(pool_test, size_graphs_sharing_a_pool_take_about_the_largest) {
  std::vector<int> const sizes{8192, 4096, 2048, 1024, 512};  // largest first
  auto capture_all = [&](gs::memory::memory_pool* shared) {
    std::vector<gs::graphs::graph_exec> graphs;
    std::vector<gs::memory::memory_pool> own;
    float* out = nullptr;
    for (int rows : sizes) {
      gs::memory::memory_pool* pool = shared;
      if (pool == nullptr) pool = &own.emplace_back(options());
      if (out == nullptr) out = static_cast<float*>(pool->allocate(sizeof(float), *stream_));
      gs::graphs::graph_exec& g = graphs.emplace_back();
      gs::graphs::capture(g, *stream_, *pool, [&] {
        std::size_t const bytes = sizeof(float) * 1024 * rows;
        auto* a = static_cast<float*>(pool->allocate(bytes, *stream_));
        auto* b = static_cast<float*>(pool->allocate(bytes, *stream_));
        fill_kernel<<<blocks_for(1024 * rows), 256, 0, stream_->get()>>>(a, 1.0F, 1024 * rows);
        axpy_kernel<<<blocks_for(1024 * rows), 256, 0, stream_->get()>>>(b, a, 1.0F, 1024 * rows);
        pool->deallocate(a, *stream_);
        pool->deallocate(b, *stream_);
      });
    }
    std::size_t mapped = 0;
    if (shared != nullptr) mapped = shared->statistics().mapped_bytes;
    for (auto& p : own) mapped += p.statistics().mapped_bytes;
    for (auto& g : graphs) g.replay(*stream_);
    // From the first pool (own grows, so no pointer into it is kept).
    (shared != nullptr ? *shared : own.front()).deallocate(out, *stream_);
    stream_->synchronize();
    return mapped;
  };
  gs::memory::memory_pool shared{options()};
  std::size_t const shared_bytes = capture_all(&shared);
  std::size_t const separate_bytes = capture_all(nullptr);
  std::size_t const largest = 2 * sizeof(float) * 1024 * sizes.front();
  std::printf("shared pool: %zu B, separate pools: %zu B, largest capture size: %zu B\n",
              shared_bytes, separate_bytes, largest);
  EXPECT_LT(shared_bytes, separate_bytes);
  EXPECT_LE(shared_bytes, largest + (std::size_t{4} << 20));  // about the largest, not the sum
}

TEST_P(pool_test, graphs_sharing_memory_replayed_on_two_streams_run_one_after_the_other) {
  gs::memory::memory_pool pool{options()};
  gs::cuda::stream other;
  int const n = 1 << 16;
  std::size_t const bytes = sizeof(float) * n;
  auto* sums = static_cast<float*>(pool.allocate(2 * sizeof(float) * n, *stream_));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(sums, 0, 2 * bytes, stream_->get()));
  stream_->synchronize();
  // Each graph fills a scratch block with its own value and adds it to its own sums; the
  // second capture reuses the block the first freed.
  std::vector<float*> scratch;
  auto capture_adding = [&](gs::graphs::graph_exec& g, float value, float* into) {
    gs::graphs::capture(g, *stream_, pool, [&] {
      auto* s = static_cast<float*>(pool.allocate(bytes, *stream_));
      scratch.push_back(s);
      fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(s, value, n);
      axpy_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(into, s, 1.0F, n);
      pool.deallocate(s, *stream_);
    });
  };
  gs::graphs::graph_exec ones;
  gs::graphs::graph_exec twos;
  capture_adding(ones, 1.0F, sums);
  capture_adding(twos, 2.0F, sums + n);
  ASSERT_EQ(scratch[0], scratch[1]) << "the graphs do not share memory: nothing to check";
  int const replays = 20;
  for (int i = 0; i < replays; ++i) {
    ones.replay(*stream_);
    twos.replay(other);
  }
  // Only launches still running are waited for: how many depends on the device's pace.
  EXPECT_LE(pool.statistics().ordered_replays, static_cast<std::size_t>(2 * replays - 1));
  other.synchronize();
  stream_->synchronize();
  std::vector<float> host(2 * n);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(host.data(), sums, 2 * bytes, cudaMemcpyDeviceToHost, stream_->get()));
  stream_->synchronize();
  for (int i = 0; i < n; i += 997) {
    ASSERT_EQ(host[i], 1.0F * replays) << "element " << i << " of the first graph's sums";
    ASSERT_EQ(host[n + i], 2.0F * replays) << "element " << i << " of the second graph's sums";
  }
  pool.deallocate(sums, *stream_);
}

// An executable updated to run another graph's work is ordered by that graph's memory, not by
// the memory of the graph it was made from (a graph cache's template, switched between
// capture sizes). Queued work: the replays are still running when the next one is made.
TEST_P(pool_test, an_updated_executable_is_ordered_by_the_memory_of_the_work_it_runs) {
  gs::testing::queued_work const queued;
  gs::memory::memory_pool pool{options()};
  gs::cuda::stream other;
  int const n = 1 << 16;
  std::size_t const bytes = sizeof(float) * n;
  auto capture_fill = [&](auto& target, float value, bool keep) {
    float* block = nullptr;
    gs::graphs::capture(target, *stream_, pool, [&] {
      block = static_cast<float*>(pool.allocate(bytes, *stream_));
      fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(block, value, n);
      if (!keep) pool.deallocate(block, *stream_);
    });
    return block;
  };
  gs::graphs::graph_exec made_from_a;
  gs::graphs::graph b;
  gs::graphs::graph_exec c;
  float* const a_output = capture_fill(made_from_a, 1.0F, true);  // A keeps its block
  float* const b_scratch = capture_fill(b, 2.0F, false);
  float* const c_scratch = capture_fill(c, 3.0F, false);
  ASSERT_EQ(b_scratch, c_scratch) << "B and C do not share memory: nothing to check";
  ASSERT_NE(a_output, b_scratch) << "A shares B's memory: the old order would hold by chance";
  ASSERT_TRUE(made_from_a.update(b));
  made_from_a.replay(*stream_);  // B's work
  c.replay(other);               // writes B's scratch: the race checker reports it unless ordered
  if (gs::testing::simulated_device) {
    EXPECT_EQ(pool.statistics().ordered_replays, 1U);
  }
  other.synchronize();
  stream_->synchronize();

  // The graph whose work it runs gone, the executable refuses to run that work.
  {
    gs::graphs::graph brief;
    static_cast<void>(capture_fill(brief, 4.0F, false));
    ASSERT_TRUE(made_from_a.update(brief));
  }
  EXPECT_NE(message_of([&] { made_from_a.replay(*stream_); }).find("has since been destroyed"),
            std::string::npos);
  ASSERT_TRUE(made_from_a.update(made_from_a.source()));
  made_from_a.replay(*stream_);
  EXPECT_EQ(read(a_output + n - 1), 1.0F);
}

TEST_P(pool_test, a_pool_grows_on_its_own_device_whichever_is_current) {
  if (gs::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  gs::memory::pool_options on_second = options();
  on_second.device = 1;
  gs::memory::memory_pool pool{on_second};
  std::optional<gs::cuda::stream> own_stream;
  {
    gs::cuda::device_guard const on_second_device{1};
    own_stream.emplace();
  }
  gs::cuda::device_guard const on_first_device{0};
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back(pool.allocate(std::size_t{3} << 20, *own_stream));  // grows each time
  }
  cudaPointerAttributes attributes{};
  for (void* block : blocks) {
    GRAPHSTEP_CUDA_TRY(cudaPointerGetAttributes(&attributes, block));
    EXPECT_EQ(attributes.device, 1) << "the pool grew on the current device, not its own";
  }
  int current = -1;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&current));
  EXPECT_EQ(current, 0) << "growing changed the current device";
  for (void* block : blocks) pool.deallocate(block, *own_stream);
  own_stream->synchronize();
  EXPECT_GE(pool.statistics().growths, 2U);
}

TEST_P(pool_test, peer_devices_may_use_the_pools_memory) {
  if (gs::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  gs::memory::pool_options shared_with_second = options();
  shared_with_second.device = 0;
  shared_with_second.peer_devices = {1};
  gs::memory::memory_pool pool{shared_with_second};
  int const n = 4096;
  auto* data = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
  stream_->synchronize();
  {
    // A kernel on device 1 writes the pool's memory on device 0: without the grant it faults.
    gs::cuda::device_guard const on_second_device{1};
    gs::cuda::stream second;
    fill_kernel<<<blocks_for(n), 256, 0, second.get()>>>(data, 5.0F, n);
    second.synchronize();
  }
  EXPECT_EQ(read(data + n - 1), 5.0F);
  pool.deallocate(data, *stream_);
}

// The pool's events and memory are its device's: a stream of another device is refused at its
// first use, before anything is recorded on it, rather than failing later at a replay.
TEST_P(pool_test, a_stream_of_another_device_is_refused_at_its_first_use_by_name) {
  if (gs::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  gs::memory::pool_options on_first = options();
  on_first.device = 0;
  gs::memory::memory_pool pool{on_first};
  void* const block = pool.allocate(1024, *stream_);
  std::optional<gs::cuda::stream> second_devices;
  {
    gs::cuda::device_guard const on_second_device{1};
    second_devices.emplace();
  }
  std::string const names_both =
      "the pool is on device 0, the stream belongs to device 1: use a stream of device 0";
  std::string message =
      message_of([&] { static_cast<void>(pool.allocate(1024, *second_devices)); });
  EXPECT_NE(message.find("allocate: " + names_both), std::string::npos) << message;
  EXPECT_NE(message.find("pool_options::device = 1"), std::string::npos) << message;
  message = message_of([&] { pool.deallocate(block, *second_devices); });
  EXPECT_NE(message.find("deallocate: " + names_both), std::string::npos) << message;
  message = message_of([&] { pool.record_use(block, *second_devices); });
  EXPECT_NE(message.find("record_use: " + names_both), std::string::npos) << message;
  {
    gs::cuda::device_guard const on_second_device{1};
    gs::graphs::graph_exec g;
    message = message_of([&] {
      gs::graphs::capture(g, *second_devices, pool,
                          [&] { static_cast<void>(pool.allocate(1024, *second_devices)); });
    });
    EXPECT_NE(message.find("open_capture: " + names_both), std::string::npos) << message;
    EXPECT_TRUE(g.empty());
    EXPECT_FALSE(gs::cuda::stream_view{*second_devices}.is_capturing());
  }
  EXPECT_EQ(pool.statistics().bytes_in_use, 1024U) << "the refused calls changed nothing";
  pool.deallocate(block, *stream_);  // the pool still works on its own device
  stream_->synchronize();
  EXPECT_EQ(pool.statistics().bytes_in_use, 0U);
}

// An alignment past the granularity the pool grows by could never be kept: the pool's ranges
// begin on granularity boundaries. Refused when the pool is made, with the range it takes.
TEST_P(pool_test, an_alignment_past_the_growth_granularity_is_refused_by_name) {
  gs::memory::pool_options bad = options();
  bad.alignment = std::size_t{1} << 40;
  std::string const message = message_of([&] { gs::memory::memory_pool pool{bad}; });
  EXPECT_NE(message.find("pool_options::alignment of 1099511627776 bytes"), std::string::npos)
      << message;
  EXPECT_NE(message.find("a power of two from 1 to 2097152"), std::string::npos) << message;
  bad.alignment = 4096;
  gs::memory::memory_pool pool{bad};
  void* const block = pool.allocate(1, *stream_);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block) % bad.alignment, 0U);
  pool.deallocate(block, *stream_);
  stream_->synchronize();
}

TEST_P(pool_test, bad_peer_devices_are_usage_errors_that_say_which) {
  gs::memory::pool_options bad = options();
  bad.device = 0;
  bad.peer_devices = {99};
  EXPECT_NE(message_of([&] { gs::memory::memory_pool pool{bad}; }).find("device 99 does not exist"),
            std::string::npos);
  bad.peer_devices = {0};
  EXPECT_NE(message_of([&] { gs::memory::memory_pool pool{bad}; }).find("the pool's own device"),
            std::string::npos);
  if (gs::cuda::device_count() < 2) return;
  bad.peer_devices = {1, 1};
  EXPECT_NE(message_of([&] { gs::memory::memory_pool pool{bad}; }).find("listed twice"),
            std::string::npos);
}

TEST_P(pool_test, a_device_that_does_not_exist_is_a_usage_error_that_says_which) {
  gs::memory::pool_options bad = options();
  for (int const device : {-2, gs::cuda::device_count()}) {
    bad.device = device;
    std::string const message = message_of([&] { gs::memory::memory_pool pool{bad}; });
    EXPECT_NE(message.find("pool_options::device is " + std::to_string(device)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("-1 for the current device"), std::string::npos) << message;
  }
}

TEST_P(pool_test, sizes_past_any_address_space_are_usage_errors_that_say_which) {
  std::size_t const largest = std::numeric_limits<std::size_t>::max();
  gs::memory::pool_options bad = options();
  bad.growth_bytes = largest;
  EXPECT_NE(message_of([&] { gs::memory::memory_pool pool{bad}; })
                .find("pool_options::growth_bytes of " + std::to_string(largest) + " bytes"),
            std::string::npos);
  if (GetParam() == gs::memory::pool_backing::virtual_memory) {
    bad = options();
    bad.reserve_bytes = largest;
    EXPECT_NE(message_of([&] { gs::memory::memory_pool pool{bad}; })
                  .find("pool_options::reserve_bytes of " + std::to_string(largest) + " bytes"),
              std::string::npos);
  }
  gs::memory::memory_pool pool{options()};
  for (std::size_t const bytes : {largest, largest - (std::size_t{2} << 20), largest / 2 + 1}) {
    std::string const message = message_of([&] {
      static_cast<void>(pool.allocate(bytes, *stream_));
    });
    EXPECT_NE(message.find("a request of " + std::to_string(bytes) + " bytes"), std::string::npos)
        << message;
  }
  EXPECT_EQ(pool.statistics().mapped_bytes, 0U) << "nothing was mapped for the refused requests";
}

TEST_P(pool_test, growth_keeps_old_addresses_valid) {
  gs::memory::memory_pool pool{options()};
  std::vector<float*> blocks;
  for (int i = 0; i < 8; ++i) {
    auto* p = static_cast<float*>(pool.allocate(std::size_t{3} << 20, *stream_));  // forces growth
    fill_kernel<<<1, 32, 0, stream_->get()>>>(p, static_cast<float>(i), 1);
    blocks.push_back(p);
  }
  EXPECT_GE(pool.statistics().growths, 2U);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(read(blocks[i]), static_cast<float>(i));
  for (float* p : blocks) pool.deallocate(p, *stream_);
}

// Work on some stream may still use a block never deallocated when the pool's last user goes:
// its memory stays mapped, and stderr says how much. The kernel runs only after the pool is
// gone (queued work), so unmapped memory would fault it.
TEST_P(pool_test, a_pool_that_dies_with_a_block_never_deallocated_keeps_its_memory) {
  gs::testing::queued_work const queued;
  int const n = 1024;
  auto pool = std::make_unique<gs::memory::memory_pool>(options());
  auto* kept = static_cast<float*>(pool->allocate(sizeof(float) * n, *stream_));
  fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(kept, 7.0F, n);
  ::testing::internal::CaptureStderr();
  pool.reset();
  std::string const said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(read(kept + n - 1), 7.0F);
  EXPECT_NE(said.find("4096 bytes never deallocated"), std::string::npos) << said;
}

TEST_P(pool_test, budget_exceeded_is_out_of_memory_with_sizes) {
  gs::memory::memory_pool pool{options(std::size_t{8} << 20)};
  void* first = pool.allocate(std::size_t{4} << 20, *stream_);
  try {
    static_cast<void>(pool.allocate(std::size_t{16} << 20, *stream_));
    FAIL() << "no exception";
  } catch (gs::out_of_memory const& e) {
    EXPECT_EQ(e.sizes().requested, std::size_t{16} << 20);
    EXPECT_EQ(e.sizes().budget, std::size_t{8} << 20);
    EXPECT_GE(e.sizes().in_use, std::size_t{4} << 20);
    EXPECT_NE(std::string{e.what()}.find("budget"), std::string::npos) << e.what();
  }
  pool.deallocate(first, *stream_);
}

TEST_P(pool_test, device_exhaustion_is_out_of_memory) {
  gs::memory::memory_pool pool{options()};
  std::size_t free_bytes = 0;
  std::size_t total = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
  EXPECT_THROW(static_cast<void>(pool.allocate(total * 2, *stream_)), gs::out_of_memory);
}

TEST_P(pool_test, bad_frees_are_usage_errors) {
  gs::memory::memory_pool pool{options()};
  void* p = pool.allocate(1024, *stream_);
  pool.deallocate(p, *stream_);
  EXPECT_THROW(pool.deallocate(p, *stream_), gs::usage_error);  // double free
  int on_host = 0;
  EXPECT_THROW(pool.deallocate(&on_host, *stream_), gs::usage_error);  // foreign pointer
  EXPECT_THROW(static_cast<void>(pool.allocate(0, *stream_)), gs::usage_error);
}

TEST_P(pool_test, planned_mode_serves_the_warm_up_layout) {
  gs::memory::memory_pool pool{options()};
  int const n = 4096;
  float* out = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
  auto step = [&] {
    auto* a = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
    auto* b = static_cast<float*>(pool.allocate(sizeof(float) * n * 2, *stream_));
    fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(a, 2.0F, n);
    pool.deallocate(a, *stream_);
    auto* c = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
    fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(c, 3.0F, n);
    axpy_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(out, c, 1.0F, n);
    pool.deallocate(b, *stream_);
    pool.deallocate(c, *stream_);
  };
  pool.begin_trace();
  step();
  auto const plan = pool.plan_next_capture(pool.end_trace());
  EXPECT_LE(plan.footprint_ratio(), 1.05);
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, pool, step);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, sizeof(float) * n, stream_->get()));
  g.replay(*stream_);
  g.replay(*stream_);
  EXPECT_EQ(read(out), 6.0F);
  pool.deallocate(out, *stream_);
}

TEST_P(pool_test, planned_mode_names_the_diverging_allocation) {
  gs::memory::memory_pool pool{options()};
  pool.begin_trace();
  void* a = pool.allocate(1024, *stream_);
  pool.deallocate(a, *stream_);
  static_cast<void>(pool.plan_next_capture(pool.end_trace()));
  gs::graphs::graph_exec g;
  try {
    gs::graphs::capture(g, *stream_, pool,
                        [&] { static_cast<void>(pool.allocate(4096, *stream_)); });
    FAIL() << "no exception";
  } catch (gs::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("4096"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(g.empty());
}

TEST_P(pool_test, a_full_reserved_range_is_out_of_memory) {
  if (GetParam() != gs::memory::pool_backing::virtual_memory) GTEST_SKIP() << "no range to fill";
  auto o = options();
  o.reserve_bytes = std::size_t{2} << 20;  // rounded up to the allocation granularity
  gs::memory::memory_pool pool{o};
  std::size_t const reserved = pool.statistics().reserved_bytes;
  std::string const what = message_of<gs::out_of_memory>(
      [&] { static_cast<void>(pool.allocate(reserved + (std::size_t{1} << 20), *stream_)); });
  EXPECT_NE(what.find("reserved address range"), std::string::npos) << what;
  EXPECT_NE(what.find("reserve_bytes"), std::string::npos) << what;
  void* fits = pool.allocate(1024, *stream_);  // the pool is still usable
  pool.deallocate(fits, *stream_);
}

TEST_P(pool_test, allocating_in_a_capture_not_given_this_pool_is_a_usage_error) {
  gs::memory::memory_pool pool{options()};
  gs::graphs::graph_exec g;
  std::string const what = message_of([&] {
    gs::graphs::capture(g, *stream_, [&] { static_cast<void>(pool.allocate(1024, *stream_)); });
  });
  EXPECT_NE(what.find("not by a graphs::capture_scope given this pool"), std::string::npos) << what;
  EXPECT_TRUE(g.empty());
  EXPECT_FALSE(gs::cuda::stream_view{*stream_}.is_capturing());
  EXPECT_EQ(pool.statistics().bytes_in_use, 0U);
}

// PyTorch lets a capture into one pool free another pool's tensor; here it is refused, since
// the other pool would give the block to eager work while the graph's replays still read it.
TEST_P(pool_test, freeing_another_pools_block_inside_a_capture_is_a_usage_error) {
  gs::memory::memory_pool other{options()};
  gs::memory::memory_pool pool{options()};
  void* block = other.allocate(1024, *stream_);
  gs::graphs::graph_exec g;
  std::string const what = message_of(
      [&] { gs::graphs::capture(g, *stream_, pool, [&] { other.deallocate(block, *stream_); }); });
  EXPECT_NE(what.find("free this pool's blocks outside the capture"), std::string::npos) << what;
  EXPECT_TRUE(g.empty());
  EXPECT_EQ(other.statistics().bytes_in_use, 1024U) << "the block is still allocated";
  other.deallocate(block, *stream_);
}

TEST_P(pool_test, a_moved_from_pool_is_a_usage_error) {
  gs::memory::memory_pool pool{options()};
  gs::memory::memory_pool moved{std::move(pool)};
  std::string const what = message_of([&] {
    static_cast<void>(pool.allocate(1024, *stream_));  // NOLINT(bugprone-use-after-move)
  });
  EXPECT_NE(what.find("moved from"), std::string::npos) << what;
  gs::graphs::graph_exec g;
  EXPECT_THROW((gs::graphs::capture_scope{g, *stream_, pool}), gs::usage_error);
  EXPECT_FALSE(gs::cuda::stream_view{*stream_}.is_capturing());
  void* p = moved.allocate(1024, *stream_);
  moved.deallocate(p, *stream_);
}

// PyTorch reuses a side stream's free on the capturing stream once the side stream is joined;
// capture_scope::join tells the pool so.
TEST_P(pool_test, a_side_streams_free_serves_the_capturing_stream_after_the_join) {
  gs::memory::memory_pool pool{options()};
  gs::cuda::stream side;
  int const n = 1024;
  std::size_t const bytes = sizeof(float) * n;
  auto* out = static_cast<float*>(pool.allocate(bytes, *stream_));
  float* side_block = nullptr;
  float* after_join = nullptr;
  gs::graphs::graph_exec g;
  {
    gs::graphs::capture_scope scope{g, *stream_, pool};
    scope.fork(side);
    side_block = static_cast<float*>(pool.allocate(bytes, side));
    fill_kernel<<<blocks_for(n), 256, 0, side.get()>>>(side_block, 2.0F, n);
    axpy_kernel<<<blocks_for(n), 256, 0, side.get()>>>(out, side_block, 1.0F, n);
    pool.deallocate(side_block, side);
    scope.join(side);
    after_join = static_cast<float*>(pool.allocate(bytes, *stream_));
    fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(after_join, 5.0F, n);
    axpy_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(out, after_join, 1.0F, n);
    pool.deallocate(after_join, *stream_);
    scope.end();
  }
  EXPECT_EQ(after_join, side_block);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, bytes, stream_->get()));
  g.replay(*stream_);
  EXPECT_EQ(read(out), 7.0F);
  pool.deallocate(out, *stream_);
}

TEST_P(pool_test, planned_mode_refuses_a_free_on_a_side_stream) {
  gs::memory::memory_pool pool{options()};
  pool.begin_trace();
  pool.deallocate(pool.allocate(4096, *stream_), *stream_);
  static_cast<void>(pool.plan_next_capture(pool.end_trace()));
  gs::cuda::stream side;
  gs::graphs::graph_exec g;
  std::string refused;
  {
    gs::graphs::capture_scope scope{
        g, *stream_, pool, {gs::graphs::capture_mode::this_thread, "planned"}};
    auto* x = static_cast<float*>(pool.allocate(4096, *stream_));
    scope.fork(side);
    fill_kernel<<<1, 32, 0, side.get()>>>(x, 1.0F, 32);
    refused = message_of([&] { pool.deallocate(x, side); });
    scope.join(side);
    pool.deallocate(x, *stream_);  // where planned mode wants it: after the join
    scope.end();
  }
  EXPECT_NE(refused.find("freed a block on a side stream"), std::string::npos) << refused;
  EXPECT_FALSE(g.empty());
  g.replay(*stream_);
  stream_->synchronize();
}

TEST_P(pool_test, teardown_in_any_order_leaks_nothing) {
  std::size_t free_before = 0;
  std::size_t total = 0;
  // Measured from the second round on: CUDA's first launch of a kernel and first graph take
  // device memory of their own for good (lazy module loading: 2 MiB on an H100).
  for (bool const measured : {false, true}) {
    if (measured) {
      GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
      GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_before, &total));
    }
    for (bool pool_first : {true, false}) {
      auto pool = std::make_unique<gs::memory::memory_pool>(options());
      auto g = std::make_unique<gs::graphs::graph_exec>();
      gs::graphs::capture(*g, *stream_, *pool, [&] {
        auto* x = static_cast<float*>(pool->allocate(std::size_t{8} << 20, *stream_));
        fill_kernel<<<1, 32, 0, stream_->get()>>>(x, 1.0F, 32);
      });
      g->replay(*stream_);
      if (pool_first) {
        pool.reset();         // the graph keeps the memory alive...
        g->replay(*stream_);  // ...so it can still run
        stream_->synchronize();
        g.reset();
      } else {
        g.reset();
        EXPECT_EQ(pool->statistics().live_graphs, 0U);
        pool.reset();
      }
    }
  }
  std::size_t free_after = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_after, free_before);
}

// PyTorch reads a graph's output after deleting the graph; here the output is kept on request
// and becomes an ordinary block, while the graph's other outputs go with it.
TEST_P(pool_test, an_output_kept_after_its_graph_outlives_it) {
  gs::memory::memory_pool pool{options()};
  int const n = 1024;
  float* kept = nullptr;
  float* dropped = nullptr;
  {
    gs::graphs::graph_exec g;
    gs::graphs::capture(g, *stream_, pool, [&] {
      kept = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
      dropped = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
      fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(kept, 0.0F, n);
      fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(dropped, 0.0F, n);
      axpy_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(kept, dropped, 1.0F, n);
    });
    pool.keep_after_graph(kept);
    auto const live = pool.live_allocations();
    ASSERT_EQ(live.size(), 2U);
    EXPECT_EQ(live[0].kept_after_graph, live[0].address == kept);
    EXPECT_EQ(live[1].kept_after_graph, live[1].address == kept);
    for (int i = 0; i < 3; ++i) g.replay(*stream_);
    EXPECT_TRUE(gs::testing::contains(message_of([&] { pool.keep_after_graph(kept + 1); }),
                                      "no live block starts at"));
  }
  // The graph is gone: its output stays, an eager block of the pool now.
  EXPECT_EQ(read(kept), 0.0F);
  auto const live = pool.live_allocations();
  ASSERT_EQ(live.size(), 1U);
  EXPECT_EQ(live[0].address, kept);
  EXPECT_EQ(live[0].graph, 0U);
  EXPECT_EQ(pool.statistics().bytes_in_use, sizeof(float) * n);
  EXPECT_EQ(pool.statistics().live_graphs, 0U);
  pool.deallocate(kept, *stream_);
  EXPECT_EQ(pool.statistics().bytes_in_use, 0U);
}

// Tensor.record_stream: a block read on a side stream and freed on its own stream is reused
// there at once, and the new writes wait for the side stream's read. Without the recorded use
// the simulated device's race checker stops the test at the write.
TEST_P(pool_test, a_recorded_use_orders_the_reuse_after_the_other_streams_work) {
  gs::memory::memory_pool pool{options()};
  gs::cuda::stream side;
  gs::cuda::event written;
  int const n = 4096;
  auto* x = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
  auto* y = static_cast<float*>(pool.allocate(sizeof(float) * n, side));
  fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(x, 1.0F, n);
  written.record(*stream_);
  side.view().wait(written);
  gs::testing::copy_kernel<<<blocks_for(n), 256, 0, side.get()>>>(x, y, n);
  pool.record_use(x, side);
  pool.deallocate(x, *stream_);
  auto* z = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
  EXPECT_EQ(z, x) << "the freeing stream reuses the block at once";
  fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(z, 9.0F, n);
  side.synchronize();
  stream_->synchronize();
  float copied = 0.0F;
  GRAPHSTEP_CUDA_TRY(cudaMemcpy(&copied, y + n - 1, sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(copied, 1.0F);
  EXPECT_NE(message_of([&] { pool.record_use(x + 1, side); }).find("no live block"),
            std::string::npos);
  gs::graphs::graph_exec g;
  std::string const capturing = message_of(
      [&] { gs::graphs::capture(g, *stream_, pool, [&] { pool.record_use(z, *stream_); }); });
  EXPECT_NE(capturing.find("the stream is capturing"), std::string::npos) << capturing;
  pool.deallocate(z, *stream_);
  pool.deallocate(y, side);
}

// torch.cuda.empty_cache(): what no block uses goes back to the device; live blocks stay where
// they are, and the pool grows again when it must.
TEST_P(pool_test, trim_gives_unused_memory_back_and_the_pool_grows_again) {
  gs::memory::memory_pool pool{options()};
  std::size_t const mib = std::size_t{1} << 20;
  auto* stays = static_cast<float*>(pool.allocate(2 * mib, *stream_));
  auto* goes = static_cast<float*>(pool.allocate(4 * mib, *stream_));
  int const n = static_cast<int>(4 * mib / sizeof(float));
  fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(goes, 2.0F, n);
  fill_kernel<<<1, 256, 0, stream_->get()>>>(stays, 3.0F, 256);
  pool.deallocate(goes, *stream_);  // its kernel may still run: trim waits for it
  std::size_t const mapped = pool.statistics().mapped_bytes;
  std::size_t device_free_before = 0;
  std::size_t device_total = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&device_free_before, &device_total));
  EXPECT_EQ(pool.trim(), 4 * mib);
  std::size_t device_free_after = 0;
  GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&device_free_after, &device_total));
  EXPECT_EQ(device_free_after - device_free_before, 4 * mib);
  EXPECT_EQ(pool.statistics().mapped_bytes, mapped - 4 * mib);
  EXPECT_EQ(pool.statistics().trimmed_bytes, 4 * mib);
  EXPECT_EQ(read(stays), 3.0F);
  auto* again = static_cast<float*>(pool.allocate(4 * mib, *stream_));
  fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(again, 5.0F, n);
  EXPECT_EQ(read(again + n - 1), 5.0F);
  EXPECT_EQ(pool.statistics().growths, 3U);
  pool.deallocate(again, *stream_);
  pool.deallocate(stays, *stream_);
  EXPECT_EQ(pool.trim(), mapped);  // everything: no block is live
  EXPECT_EQ(pool.statistics().mapped_bytes, 0U);
}

TEST_P(pool_test, trim_keeps_a_live_graphs_memory_and_is_refused_inside_a_capture) {
  gs::memory::memory_pool pool{options()};
  int const n = 1024;
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, pool, [&] {
    auto* temp = static_cast<float*>(pool.allocate(sizeof(float) * n, *stream_));
    fill_kernel<<<blocks_for(n), 256, 0, stream_->get()>>>(temp, 1.0F, n);
    pool.deallocate(temp, *stream_);
    EXPECT_NE(message_of([&] {
                static_cast<void>(pool.trim());
              }).find("a capture into this pool is under way"),
              std::string::npos);
  });
  std::size_t const mapped = pool.statistics().mapped_bytes;
  EXPECT_EQ(pool.trim(), 0U) << "the graph's replays write that memory";
  g.replay(*stream_);
  stream_->synchronize();
  g.reset();
  EXPECT_EQ(pool.trim(), mapped);
  EXPECT_EQ(pool.statistics().mapped_bytes, 0U);
}

// torch.cuda.graph_pool_handle(): an identity per pool, kept across moves.
TEST_P(pool_test, each_pool_has_an_identity_that_moves_with_it) {
  gs::memory::memory_pool first{options()};
  gs::memory::memory_pool second{options()};
  EXPECT_NE(first.id(), second.id());
  EXPECT_NE(first.id(), 0U);
  std::uint64_t const id = first.id();
  gs::memory::memory_pool moved{std::move(first)};
  EXPECT_EQ(moved.id(), id);
  EXPECT_NE(message_of([&] {
              static_cast<void>(first.id());  // NOLINT(bugprone-use-after-move)
            }).find("moved from"),
            std::string::npos);
}

namespace {
class pinned_pool_test : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
  }
  static gs::memory::pool_options pinned() {
    gs::memory::pool_options o;
    o.backing = gs::memory::pool_backing::pinned_host;
    return o;
  }
  std::optional<gs::cuda::stream> stream_;
};
}  // namespace

// PyTorch's caching host allocator in a capture: a pinned block that a captured copy reads is
// never handed to other data while the graph lives, though the capture freed it, neither to
// eager work nor to the capture's later requests. Without the host pool's capture side, the
// eager block below would be the same block, and the replay would copy 9s.
TEST_F(pinned_pool_test, a_captured_copy_keeps_its_pinned_block_while_the_graph_lives) {
  gs::memory::memory_pool pool;
  gs::memory::memory_pool host{pinned()};
  EXPECT_EQ(host.backing(), gs::memory::pool_backing::pinned_host);
  int const n = 256;
  std::size_t const bytes = sizeof(float) * n;
  auto* out = static_cast<float*>(pool.allocate(bytes, *stream_));
  auto* second_out = static_cast<float*>(pool.allocate(bytes, *stream_));
  float* staged = nullptr;
  float* second_staged = nullptr;
  gs::graphs::graph_exec g;
  gs::graphs::capture_options options;
  options.host_pool = &host;
  gs::graphs::capture(
      g, *stream_, pool,
      [&] {
        staged = static_cast<float*>(host.allocate(bytes, *stream_));
        std::fill(staged, staged + n, 7.0F);  // built on the host while capturing, once
        GRAPHSTEP_CUDA_TRY(
            cudaMemcpyAsync(out, staged, bytes, cudaMemcpyHostToDevice, stream_->get()));
        host.deallocate(staged, *stream_);
        // Not even this capture takes the block again: the replay reads what it held then.
        second_staged = static_cast<float*>(host.allocate(bytes, *stream_));
        std::fill(second_staged, second_staged + n, 8.0F);
        GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(second_out, second_staged, bytes, cudaMemcpyHostToDevice,
                                           stream_->get()));
        host.deallocate(second_staged, *stream_);
      },
      options);
  EXPECT_GE(host.bytes_pinned_by(g.id()), bytes);
  auto* eager = static_cast<float*>(host.allocate(bytes, *stream_));
  EXPECT_NE(eager, staged);
  std::fill(eager, eager + n, 9.0F);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out, 0, bytes, stream_->get()));
  g.replay(*stream_);
  std::vector<float> copied(n);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(copied.data(), out, bytes, cudaMemcpyDeviceToHost, stream_->get()));
  stream_->synchronize();
  EXPECT_EQ(copied.front(), 7.0F);
  EXPECT_EQ(copied.back(), 7.0F);
  EXPECT_NE(second_staged, staged);
  float second = 0.0F;
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(&second, second_out, sizeof(float), cudaMemcpyDeviceToHost, stream_->get()));
  stream_->synchronize();
  EXPECT_EQ(second, 8.0F);
  std::uint64_t const id = g.id();
  g.reset();
  EXPECT_EQ(host.bytes_pinned_by(id), 0U) << "the graph's pinned memory is the pool's again";
  host.deallocate(eager, *stream_);
  pool.deallocate(out, *stream_);
  pool.deallocate(second_out, *stream_);
  std::size_t const mapped = host.statistics().mapped_bytes;
  EXPECT_GT(mapped, 0U);
  EXPECT_EQ(host.trim(), mapped);
  EXPECT_EQ(host.statistics().mapped_bytes, 0U);
}

TEST_F(pinned_pool_test, a_host_pool_that_is_not_pinned_or_is_the_pool_is_a_usage_error) {
  gs::memory::memory_pool pool;
  gs::memory::memory_pool host{pinned()};
  gs::graphs::graph_exec g;
  gs::graphs::capture_options options;
  options.host_pool = &pool;
  std::string const same = message_of([&] {
    gs::graphs::capture(
        g, *stream_, pool, [] {}, options);
  });
  EXPECT_NE(same.find("host_pool is the capture's pool too"), std::string::npos) << same;
  gs::memory::memory_pool other;
  options.host_pool = &other;
  std::string const device = message_of([&] {
    gs::graphs::capture(
        g, *stream_, pool, [] {}, options);
  });
  EXPECT_NE(device.find("must be a pool_backing::pinned_host pool"), std::string::npos) << device;
  EXPECT_FALSE(gs::cuda::stream_view{*stream_}.is_capturing());
  EXPECT_TRUE(g.empty());
  if (gs::cuda::device_count() > 1) {
    gs::memory::pool_options with_peers = pinned();
    with_peers.peer_devices = {1};
    EXPECT_NE(message_of([&] {
                gs::memory::memory_pool refused{with_peers};
              }).find("portable to every device already"),
              std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(backings, pool_test,
                         ::testing::Values(gs::memory::pool_backing::virtual_memory,
                                           gs::memory::pool_backing::device_malloc),
                         [](auto const& info) {
                           return info.param == gs::memory::pool_backing::virtual_memory
                                      ? std::string{"virtual_memory"}
                                      : std::string{"device_malloc"};
                         });
