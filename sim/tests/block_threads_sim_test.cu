// A grid's blocks run on several host threads (graphstep::sim::set_block_threads), and what they
// share comes out as when they run one after another: atomics, volatile accesses and runtime
// calls from kernels in block order, the lowest faulting block's fault, every access seen by
// the race checker. Each test runs its kernels with blocks shared among four host threads and
// compares with one.

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <graphstep/sim/race_report.hpp>
#include <graphstep/sim/sim.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sim_test.hpp"

namespace gs = graphstep::sim;

namespace {

constexpr unsigned blocks = 64;
constexpr unsigned threads = 64;

// Which host thread ran a block: blocks started so far, counted on the host (not device
// memory, so no block waits for another to count).
std::atomic<unsigned> blocks_started{0};

// Some arithmetic between barriers, so that a block takes long enough for blocks to overlap.
__device__ float busy_work(float x) {
  __shared__ float partial[threads];
  for (int round = 0; round < 8; ++round) {
    partial[threadIdx.x] = x * 1.0001F + static_cast<float>(round);
    __syncthreads();
    x = partial[(threadIdx.x + 1) % threads];
    __syncthreads();
  }
  return x;
}

// Each block notes the host thread that ran it; block 0 waits (up to 10 s) until another block
// has started, so that a helper thread has surely joined when blocks are shared.
__global__ void note_host_thread(unsigned long long* owner, bool wait_for_company) {
  if (threadIdx.x == 0) {
    blocks_started.fetch_add(1);
    if (wait_for_company && blockIdx.x == 0) {
      auto const until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
      while (blocks_started.load() < 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
    }
    owner[blockIdx.x] = std::hash<std::thread::id>{}(std::this_thread::get_id());
  }
}

// Every block takes a ticket from one counter and adds a value whose rounding depends on the
// order of the additions; the tickets and the sum come out as when blocks run in order.
__global__ void take_tickets(unsigned* counter, unsigned* order, float* sum, float const* values) {
  float const x = busy_work(static_cast<float>(threadIdx.x));
  if (threadIdx.x == 0) {
    unsigned const ticket = atomicAdd(counter, 1U);
    order[ticket] = blockIdx.x;
    atomicAdd(sum, values[blockIdx.x] + 0.0F * x);
  }
}

// The "last block" reduction: each block writes its partial, fences, and counts itself in; the
// block that counts last adds the partials and says who it is. Block 0 works longest.
__global__ void last_block_sums(float* partial, unsigned* count, float* total, unsigned* last,
                                float const* values) {
  float x = busy_work(values[blockIdx.x]);
  if (blockIdx.x == 0) {
    for (int i = 0; i < 128; ++i) x = busy_work(x);
  }
  if (threadIdx.x != 0) return;
  partial[blockIdx.x] = values[blockIdx.x] * 3.0F + 0.0F * x;
  __threadfence();
  if (atomicInc(count, gridDim.x) == gridDim.x - 1) {
    float s = 0.0F;
    for (unsigned b = 0; b < gridDim.x; ++b) s += partial[b];
    *total = s;
    *last = blockIdx.x;
  }
}

// Block 0 raises a flag after long work; every other block reads it at once through a volatile
// load. One after another, every block after block 0 sees it raised.
__global__ void read_a_volatile_flag(int* flag, int* seen) {
  auto* const shared_flag = static_cast<int volatile*>(flag);
  if (blockIdx.x == 0) {
    float x = 0.0F;
    for (int i = 0; i < 64; ++i) x = busy_work(x);
    if (threadIdx.x == 0) *shared_flag = 1 + static_cast<int>(0.0F * x);
    return;
  }
  if (threadIdx.x == 0) seen[blockIdx.x] = *shared_flag;
}

// Blocks from `first_failing` on trap; the others mark that they ran. The first failing block
// works longest, so later blocks fail before it in time when blocks are shared.
__global__ void fail_from(int* ran, unsigned first_failing) {
  if (blockIdx.x == first_failing) {
    float x = 1.0F;
    for (int i = 0; i < 64; ++i) x = busy_work(x);
  }
  if (blockIdx.x >= first_failing && threadIdx.x == 0) __trap();
  if (threadIdx.x == 0) ran[blockIdx.x] = 1;
}

// Every block writes its own stripe of `out`.
__global__ void write_stripes(float* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(threadIdx.x);
}

// Every block reads the same stripe, the last block's.
__global__ void read_last_stripe(float const* in, float* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = in[(gridDim.x - 1) * blockDim.x + threadIdx.x];
}

// Every block sets the graph's condition; the last block's value stands. The last block works
// least, so it sets the condition first in time when blocks are shared.
__global__ void set_condition_from_every_block(cudaGraphConditionalHandle handle,
                                               unsigned last_value) {
  if (blockIdx.x != gridDim.x - 1) busy_work(1.0F);
  if (threadIdx.x == 0) {
    cudaGraphSetConditional(handle, blockIdx.x == gridDim.x - 1 ? last_value : 1U - last_value);
  }
}

__global__ void add_one(int* value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *value += 1;
}

class block_threads : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    before_ = gs::current_block_threads();
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    gs::set_block_threads(before_);
    for (void* p : allocations_) SIM_TEST_EXPECT_SUCCESS(cudaFree(p));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }

  // Every multi-block grid's blocks on `host_threads` host threads.
  static void share_blocks(unsigned host_threads) {
    gs::set_block_threads(gs::block_threads_setting{host_threads, 1});
  }

  template <typename T>
  T* device_array(std::vector<T> const& values) {
    T* p = nullptr;
    SIM_TEST_TRY(cudaMalloc(&p, values.size() * sizeof(T)));
    allocations_.push_back(p);
    SIM_TEST_TRY(cudaMemcpyAsync(p, values.data(), values.size() * sizeof(T),
                                 cudaMemcpyHostToDevice, stream_));
    return p;
  }

  template <typename T>
  std::vector<T> read(T const* p, std::size_t count) {
    return sim_testing::copy_to_host(p, count, stream_);
  }

  cudaStream_t stream_{};
  std::vector<void*> allocations_;
  gs::block_threads_setting before_{};
};

// Values whose float sum depends on the order they are added in.
std::vector<float> order_sensitive_values() {
  std::vector<float> values(blocks);
  for (unsigned b = 0; b < blocks; ++b) {
    values[b] = (b % 3 == 0 ? 1.0e7F : 0.37F) * (b % 2 == 0 ? 1.0F : -1.0F) + 1.0F / (1.0F + b);
  }
  return values;
}

}  // namespace

TEST_F(block_threads, a_grid_runs_on_several_host_threads_when_shared) {
  share_blocks(4);
  auto* owner = device_array(std::vector<unsigned long long>(blocks, 0));
  blocks_started = 0;
  // Only instrumented kernels share their blocks (elsewhere the simulator cannot keep their
  // atomics in block order): block 0 waits for company only where some will come.
  note_host_thread<<<blocks, threads, 0, stream_>>>(owner, gs::kernel_accesses_instrumented);
  auto const shared = read(owner, blocks);
  EXPECT_EQ(std::set<unsigned long long>(shared.begin(), shared.end()).size() >= 2,
            gs::kernel_accesses_instrumented);

  share_blocks(1);
  blocks_started = 0;
  note_host_thread<<<blocks, threads, 0, stream_>>>(owner, false);
  auto const alone = read(owner, blocks);
  EXPECT_EQ(std::set<unsigned long long>(alone.begin(), alone.end()).size(), 1U);
}

TEST_F(block_threads, small_grids_stay_on_the_launching_thread) {
  gs::set_block_threads(gs::block_threads_setting{4, blocks * threads + 1});
  auto* owner = device_array(std::vector<unsigned long long>(blocks, 0));
  note_host_thread<<<blocks, threads, 0, stream_>>>(owner, false);
  auto const seen = read(owner, blocks);
  EXPECT_EQ(std::set<unsigned long long>(seen.begin(), seen.end()).size(), 1U);
}

TEST_F(block_threads, atomics_come_out_in_block_order) {
  std::vector<float> const values = order_sensitive_values();
  auto const run = [&](unsigned host_threads) {
    share_blocks(host_threads);
    auto* counter = device_array(std::vector<unsigned>{0});
    auto* order = device_array(std::vector<unsigned>(blocks, ~0U));
    auto* sum = device_array(std::vector<float>{0.0F});
    take_tickets<<<blocks, threads, 0, stream_>>>(counter, order, sum, device_array(values));
    return std::make_pair(read(order, blocks), read(sum, 1)[0]);
  };
  auto const [alone_order, alone_sum] = run(1);
  auto const [shared_order, shared_sum] = run(4);
  for (unsigned b = 0; b < blocks; ++b) ASSERT_EQ(alone_order[b], b);
  EXPECT_EQ(shared_order, alone_order);
  EXPECT_EQ(shared_sum, alone_sum);  // bit for bit: the same additions in the same order
}

TEST_F(block_threads, the_last_block_of_a_counted_reduction_sees_every_partial) {
  std::vector<float> const values = order_sensitive_values();
  float expected = 0.0F;
  for (float const v : values) expected += v * 3.0F;
  share_blocks(4);
  auto* partial = device_array(std::vector<float>(blocks, 0.0F));
  auto* count = device_array(std::vector<unsigned>{0});
  auto* total = device_array(std::vector<float>{0.0F});
  auto* last = device_array(std::vector<unsigned>{0});
  last_block_sums<<<blocks, threads, 0, stream_>>>(partial, count, total, last,
                                                   device_array(values));
  EXPECT_EQ(read(total, 1)[0], expected);
  EXPECT_EQ(read(last, 1)[0], blocks - 1);  // one after another, the last block counts last
}

TEST_F(block_threads, volatile_loads_see_what_earlier_blocks_stored) {
  share_blocks(4);
  auto* flag = device_array(std::vector<int>{0});
  auto* seen = device_array(std::vector<int>(blocks, -1));
  read_a_volatile_flag<<<blocks, threads, 0, stream_>>>(flag, seen);
  auto const values = read(seen, blocks);
  for (unsigned b = 1; b < blocks; ++b) EXPECT_EQ(values[b], 1) << "block " << b;
}

TEST_F(block_threads, runtime_calls_from_kernels_on_every_host_thread_keep_block_order) {
  for (unsigned const last_value : {0U, 1U}) {
    share_blocks(4);
    auto* value = device_array(std::vector<int>{0});
    cudaGraph_t graph = nullptr;
    SIM_TEST_TRY(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle{};
    SIM_TEST_TRY(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
    SIM_TEST_TRY(cudaStreamBeginCaptureToGraph(stream_, graph, nullptr, nullptr, 0,
                                               cudaStreamCaptureModeThreadLocal));
    set_condition_from_every_block<<<blocks, threads, 0, stream_>>>(handle, last_value);
    SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
    std::size_t count = 1;
    cudaGraphNode_t setter = nullptr;
    SIM_TEST_TRY(cudaGraphGetNodes(graph, &setter, &count));
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = cudaGraphCondTypeIf;
    params.conditional.size = 1;
    cudaGraphNode_t conditional = nullptr;
    SIM_TEST_TRY(cudaGraphAddNode(&conditional, graph, &setter, nullptr, 1, &params));
    SIM_TEST_TRY(cudaStreamBeginCaptureToGraph(stream_, params.conditional.phGraph_out[0], nullptr,
                                               nullptr, 0, cudaStreamCaptureModeThreadLocal));
    add_one<<<1, 32, 0, stream_>>>(value);
    cudaGraph_t body = nullptr;
    SIM_TEST_TRY(cudaStreamEndCapture(stream_, &body));
    cudaGraphExec_t exec = nullptr;
    SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
    SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
    EXPECT_EQ(read(value, 1)[0], static_cast<int>(last_value))
        << "the last block set " << last_value;
    SIM_TEST_TRY(cudaGraphExecDestroy(exec));
    SIM_TEST_TRY(cudaGraphDestroy(graph));
  }
}

TEST_F(block_threads, accesses_on_every_host_thread_reach_the_race_checker) {
  if (!gs::kernel_accesses_instrumented) {
    GTEST_SKIP() << "this build's kernels are not instrumented (GRAPHSTEP_SIM_WATCH_ACCESSES "
                    "off, or a sanitizer build): the checker sees pointer arguments, and blocks "
                    "run one after another";
  }
  share_blocks(4);
  std::size_t const elements = std::size_t{blocks} * threads;
  auto* stripes = device_array(std::vector<float>(elements, 0.0F));
  auto* copies = device_array(std::vector<float>(elements, 0.0F));
  cudaStream_t other = nullptr;
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  std::vector<std::string> found;
  {
    gs::race_report const report;
    write_stripes<<<blocks, threads, 0, stream_>>>(stripes);
    read_last_stripe<<<blocks, threads, 0, other>>>(stripes, copies);
    found = report.found();
  }
  SIM_TEST_TRY(cudaDeviceSynchronize());
  SIM_TEST_TRY(cudaStreamDestroy(other));
  // Only the last stripe is both written and read: the race begins there, written by the last
  // block, whichever host thread ran it.
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write by kernel write_stripes"), std::string::npos) << found[0];
  char expected[40];
  static_cast<void>(std::snprintf(expected, sizeof expected, "[%p, ",
                                  static_cast<void const*>(stripes + elements - threads)));
  EXPECT_NE(found[0].find(expected), std::string::npos) << found[0] << " should name " << expected;
}

TEST_F(block_threads, the_lowest_failing_block_is_the_grids_fault) {
  EXPECT_EXIT(
      {
        share_blocks(4);
        int* ran = nullptr;
        if (cudaMalloc(&ran, blocks * sizeof(int)) != cudaSuccess) std::exit(100);
        if (cudaMemset(ran, 0, blocks * sizeof(int)) != cudaSuccess) std::exit(101);
        fail_from<<<blocks, threads>>>(ran, 5);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "kernel fail_from faulted: fail_from: thread \\(0,0,0\\) of block \\(5,0,0\\)");
}

// The simulated cuBLASLt matmul shares a large product's rows among the same host threads; each
// row's terms are added in the same order, so D is the same to the bit.
TEST_F(block_threads, a_large_matmul_gives_the_same_bits_on_every_number_of_threads) {
  constexpr int m = 256;
  constexpr int n = 96;
  constexpr int k = 64;
  std::vector<float> a(std::size_t{m} * k);
  std::vector<float> b(std::size_t{k} * n);
  std::vector<float> bias(m);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 1.0F / static_cast<float>(i % 97 + 3);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.37F - 2.0F;
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i) * 0.01F;
  float* da = device_array(a);
  float* db = device_array(b);
  float* dbias = device_array(bias);
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t matmul = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  cublasLtEpilogue_t const epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                           sizeof epilogue),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias,
                                           sizeof dbias),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t la = nullptr;
  cublasLtMatrixLayout_t lb = nullptr;
  cublasLtMatrixLayout_t ld = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m), CUBLAS_STATUS_SUCCESS);
  auto const product = [&](unsigned host_threads) {
    share_blocks(host_threads);
    float* dd = device_array(std::vector<float>(std::size_t{m} * n, 0.0F));
    float const one = 1.0F;
    float const zero = 0.0F;
    EXPECT_EQ(cublasLtMatmul(handle, matmul, &one, da, la, db, lb, &zero, dd, ld, dd, ld, nullptr,
                             nullptr, 0, stream_),
              CUBLAS_STATUS_SUCCESS);
    std::vector<float> const d = read(dd, std::size_t{m} * n);
    std::vector<std::uint32_t> bits(d.size());
    std::memcpy(bits.data(), d.data(), d.size() * sizeof(float));
    return bits;
  };
  std::vector<std::uint32_t> const alone = product(1);
  EXPECT_EQ(product(4), alone);
  EXPECT_EQ(product(3), alone);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(la), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(lb), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(ld), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(matmul), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

TEST_F(block_threads, zero_or_too_many_host_threads_are_refused_by_name) {
  gs::block_threads_setting const now = gs::current_block_threads();
  for (unsigned const bad : {0U, 257U}) {
    try {
      gs::set_block_threads(gs::block_threads_setting{bad, 1});
      ADD_FAILURE() << bad << " host threads were accepted";
    } catch (std::invalid_argument const& e) {
      EXPECT_NE(std::string{e.what()}.find("threads is " + std::to_string(bad)), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(gs::current_block_threads().threads, now.threads);
  gs::set_block_threads(gs::block_threads_setting{3, 100});
  EXPECT_EQ(gs::current_block_threads().threads, 3U);
  EXPECT_EQ(gs::current_block_threads().min_grid_threads, 100U);
}
