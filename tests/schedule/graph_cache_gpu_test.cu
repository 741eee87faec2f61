// The graph cache on a device: capture sizes replay the eager results, share one pool, derive their
// executables by update, and are evicted under a budget.

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/schedule/capture_shapes.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <graphstep/schedule/graph_cache.hpp>
#include <set>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/pool_blocks.hpp"

namespace gs = graphstep;
namespace gsch = graphstep::schedule;

namespace {

__global__ void row_sum_kernel(float* out, float const* in, int rows, int cols) {
  int const r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float sum = 0.0F;
  for (int c = 0; c < cols; ++c) sum += in[r * cols + c];
  out[r] = sum * 0.5F + 1.0F;
}

__global__ void fill_kernel(float* x, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = static_cast<float>(i % 7);
}

constexpr int cols = 64;
constexpr int largest = 256;

// A step sized by its capture size: scratch from the pool, then a result row per request row.
struct model {
  gs::memory::memory_pool& pool;
  float* out;
  void operator()(std::int64_t size, gs::cuda::stream_view stream) const {
    int const rows = static_cast<int>(size);
    // Oversized scratch (16 KiB a row) so that sharing memory between capture sizes shows.
    std::size_t const scratch_bytes = sizeof(float) * rows * cols * 64;
    auto* scratch = static_cast<float*>(pool.allocate(scratch_bytes, stream));
    fill_kernel<<<(rows * cols + 255) / 256, 256, 0, stream.get()>>>(scratch, rows * cols);
    row_sum_kernel<<<(rows + 127) / 128, 128, 0, stream.get()>>>(out, scratch, rows, cols);
    pool.deallocate(scratch, stream);
  }
};

std::vector<float> expected(int rows) {
  std::vector<float> v(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    float sum = 0.0F;
    for (int c = 0; c < cols; ++c) sum += static_cast<float>((r * cols + c) % 7);
    v[static_cast<std::size_t>(r)] = sum * 0.5F + 1.0F;
  }
  return v;
}

class schedule_test : public gs::testing::gpu_test,
                      public ::testing::WithParamInterface<gsch::graph_instantiation> {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
    gs::memory::pool_options small_steps;
    small_steps.growth_bytes = std::size_t{2} << 20;
    pool_.emplace(small_steps);
    blocks_.emplace(*pool_, *stream_);
    out_ = blocks_->get(largest);
  }
  std::vector<float> read(int rows) {
    std::vector<float> host(static_cast<std::size_t>(rows));
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), out_, sizeof(float) * rows,
                                       cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return host;
  }
  void clear() {
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(out_, 0, sizeof(float) * largest, stream_->get()));
  }
  std::optional<gs::cuda::stream> stream_;
  std::optional<gs::memory::memory_pool> pool_;
  std::optional<gs::testing::pool_blocks> blocks_;
  float* out_{};
};

}  // namespace

TEST_P(schedule_test, every_size_replays_the_eager_result) {
  gsch::graph_cache_options options;
  options.instantiation = GetParam();
  options.lifecycle.warmup_runs = 1;
  gsch::graph_cache cache{gsch::capture_sizes::powers_then_steps(largest, 32), model{*pool_, out_},
                          *pool_, options};
  std::set<std::int64_t> sizes;
  for (int round = 0; round < 3; ++round) {  // warm-up, capture, replay
    for (int size : {1, 3, 17, 100, 256, 64, 5}) {
      clear();
      auto const choice = cache.run(size, *stream_);
      sizes.insert(choice.captured);
      EXPECT_EQ(read(static_cast<int>(choice.captured)),
                expected(static_cast<int>(choice.captured)))
          << "size " << size << " round " << round;
    }
  }
  auto const& stats = cache.statistics();
  EXPECT_GT(stats.hits, 0U);
  EXPECT_GT(stats.pad_ratio(), 0.0);
  if (GetParam() == gsch::graph_instantiation::update_template) {
    EXPECT_GT(stats.updates + stats.update_refusals, 0U);
  }
  EXPECT_EQ(stats.captures, sizes.size()) << "one capture for each capture size used";
}

TEST_P(schedule_test, all_sizes_take_about_the_memory_of_the_largest) {
  gsch::graph_cache_options options;
  options.instantiation = GetParam();
  gsch::graph_cache cache{gsch::capture_sizes::powers_then_steps(largest, 8), model{*pool_, out_},
                          *pool_, options};
  cache.precapture(*stream_);
  EXPECT_EQ(cache.captured_count(), cache.policy().sizes().size());
  std::size_t const mapped = pool_->statistics().mapped_bytes;
  gs::memory::pool_options small_steps;
  small_steps.growth_bytes = std::size_t{2} << 20;
  gs::memory::memory_pool alone{small_steps};
  gs::testing::pool_blocks alone_blocks{alone, *stream_};
  float* out = alone_blocks.get(largest);
  gsch::graph_cache one{gsch::capture_sizes{{largest}}, model{alone, out}, alone, {}};
  one.precapture(*stream_);
  std::size_t sum_of_sizes = 0;
  for (std::int64_t b : cache.policy().sizes()) {
    sum_of_sizes += sizeof(float) * static_cast<std::size_t>(b) * cols * 64;
  }
  std::printf("%zu capture sizes: pool %zu B, largest alone %zu B, sum of capture sizes %zu B\n",
              cache.policy().sizes().size(), mapped, alone.statistics().mapped_bytes, sum_of_sizes);
  for (std::int64_t size : cache.policy().sizes()) {
    clear();
    static_cast<void>(cache.run(size, *stream_));
    EXPECT_EQ(read(static_cast<int>(size)), expected(static_cast<int>(size)));
  }
  EXPECT_LE(mapped, alone.statistics().mapped_bytes + (std::size_t{2} << 20))
      << "all capture sizes should fit in about the memory of the largest";
  EXPECT_LT(mapped, sum_of_sizes / 4);
}

TEST_P(schedule_test, a_budget_evicts_the_least_recently_used) {
  gsch::graph_cache_options options;
  options.instantiation = GetParam();
  options.lifecycle.warmup_runs = 0;
  gsch::graph_cache probe{gsch::capture_sizes{{largest}}, model{*pool_, out_}, *pool_, options};
  probe.precapture(*stream_);
  // A budget for about two graphs of the largest size.
  gs::memory::memory_pool pool;
  gs::testing::pool_blocks blocks{pool, *stream_};
  float* out = blocks.get(largest);
  options.budget_bytes = std::max<std::size_t>(2 * probe.bytes_of(largest), 1);
  gsch::graph_cache cache{gsch::capture_sizes{{64, 128, 192, 256}}, model{pool, out}, pool,
                          options};
  for (int size : {64, 128, 192, 256, 64, 128}) static_cast<void>(cache.run(size, *stream_));
  stream_->synchronize();
  std::size_t const evictions = cache.statistics().evictions;
  clear();
  static_cast<void>(cache.run(192, *stream_));  // evicted or not, still correct
  std::vector<float> host(192);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), out, sizeof(float) * 192, cudaMemcpyDeviceToHost,
                                     stream_->get()));
  stream_->synchronize();
  EXPECT_EQ(host, expected(192));
  EXPECT_GT(evictions, 0U) << "each graph is charged the memory it pins";
}

INSTANTIATE_TEST_SUITE_P(instantiation, schedule_test,
                         ::testing::Values(gsch::graph_instantiation::each_size,
                                           gsch::graph_instantiation::update_template),
                         [](auto const& info) {
                           return info.param == gsch::graph_instantiation::each_size
                                      ? std::string{"each_size"}
                                      : std::string{"update_template"};
                         });

namespace {

__global__ void offset_kernel(float* out, int rows, float offset) {
  int const r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) out[r] += offset;
}

// Capture sizes above 128 rows run one kernel more: a second topology, which no update can bridge.
struct two_topologies {
  model base;
  void operator()(std::int64_t size, gs::cuda::stream_view stream) const {
    base(size, stream);
    if (size > 128) {
      offset_kernel<<<(size + 127) / 128, 128, 0, stream.get()>>>(base.out, static_cast<int>(size),
                                                                  100.0F);
    }
  }
  static std::vector<float> expected_for(int rows) {
    std::vector<float> v = expected(rows);
    if (rows > 128) {
      for (float& x : v) x += 100.0F;
    }
    return v;
  }
};

}  // namespace

// The same fixture, for tests that choose their instantiation themselves.
using schedule_cache_test = schedule_test;

TEST_F(schedule_cache_test, a_refused_update_falls_back_to_instantiation_and_is_reported) {
  gsch::graph_cache_options options;
  options.instantiation = gsch::graph_instantiation::update_template;
  options.lifecycle.warmup_runs = 0;
  gsch::graph_cache cache{gsch::capture_sizes{{32, 64, 128, 192, 256}},
                          two_topologies{model{*pool_, out_}}, *pool_, options};
  cache.precapture(*stream_);  // the template is 256: 32..128 have the other topology
  for (int round = 0; round < 2; ++round) {
    for (int size : {32, 192, 64, 256, 128, 30}) {
      clear();
      auto const choice = cache.run(size, *stream_);
      int const rows = static_cast<int>(choice.captured);
      EXPECT_EQ(read(rows), two_topologies::expected_for(rows)) << "size " << size;
    }
  }
  EXPECT_EQ(cache.refused_sizes(), (std::set<std::int64_t>{32, 64, 128}));
  EXPECT_EQ(cache.statistics().update_refusals, 3U);  // once each: then their own executable
  EXPECT_GT(cache.statistics().updates, 0U);          // 192 and 256 share the template
}

TEST_F(schedule_cache_test, shape_sizes_pad_batch_and_length) {
  // rows = batch x length; the step writes one result per row of the capture size.
  gsch::capture_shapes policy{gsch::capture_sizes{{1, 2, 4}}, gsch::capture_sizes{{16, 32, 64}}};
  model const m{*pool_, out_};
  gsch::shape_graph_cache cache{policy,
                                [m](gsch::shape_key size, gs::cuda::stream_view stream) {
                                  m(size.batch * size.sequence_length, stream);
                                },
                                *pool_,
                                {}};
  cache.precapture(*stream_);
  EXPECT_EQ(cache.captured_count(), 9U);
  for (gsch::shape_key request : {gsch::shape_key{3, 20, 1}, gsch::shape_key{1, 64, 1},
                                  gsch::shape_key{4, 64, 1}, gsch::shape_key{2, 1, 1}}) {
    clear();
    auto const choice = cache.run(request, *stream_);
    EXPECT_GE(choice.captured.batch, request.batch);
    EXPECT_GE(choice.captured.sequence_length, request.sequence_length);
    int const rows = static_cast<int>(gsch::elements_of(choice.captured));
    EXPECT_EQ(read(rows), expected(rows)) << gsch::describe(choice.captured);
  }
  EXPECT_EQ(cache.statistics().hits, 4U);
  EXPECT_GT(cache.statistics().pad_ratio(), 0.0);
  EXPECT_THROW(static_cast<void>(cache.run({8, 16, 1}, *stream_)), gs::usage_error);
}
