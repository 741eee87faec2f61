// Cooperative groups and integer intrinsics as CUDA trainers write them: a block's sum taken by
// cg::reduce over warps and again over the warps' sums in shared memory, tiles of every size with
// their ranks, shuffles and votes, threads that return before a warp's barrier, coalesced groups
// of the lanes left, and the bit-manipulation intrinsics at their edge cases. Every value is
// computed again on the host: floating-point sums in the order the toolkit's reduction adds them
// (a butterfly of shfl_xor over a tile, a Hillis-Steele scan over a coalesced group). Plain CUDA:
// on the simulated device they check the simulator, on a GPU the tests themselves.

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sim_test.hpp"

namespace cg = cooperative_groups;

namespace {

using cooperative_groups_test = sim_testing::gpu_test;
using sim_testing::read_back;

template <typename T>
T* device_copy(std::vector<T> const& host) {
  T* device = nullptr;
  SIM_TEST_TRY(cudaMalloc(&device, host.size() * sizeof(T)));
  sim_testing::copy_to_device(device, host.data(), host.size() * sizeof(T));
  return device;
}

template <typename T>
T* device_zeros(std::size_t count) {
  T* device = nullptr;
  SIM_TEST_TRY(cudaMalloc(&device, count * sizeof(T)));
  SIM_TEST_TRY(cudaMemset(device, 0, count * sizeof(T)));
  return device;
}

// The toolkit's tile reduction (cooperative_groups/details/coalesced_reduce.h): for mask = 16,
// 8, ..., 1 every lane adds the value of lane ^ mask; every lane ends with lane 0's sum.
float butterfly_sum(std::vector<float> lanes) {
  for (std::size_t mask = lanes.size() / 2; mask > 0; mask /= 2) {
    std::vector<float> next(lanes.size());
    for (std::size_t lane = 0; lane < lanes.size(); ++lane) {
      next[lane] = lanes[lane] + lanes[lane ^ mask];
    }
    lanes = next;
  }
  return lanes[0];
}

// --- a block reduction as llm.c writes it --------------------------------------------------------

__global__ void block_sums(float const* in, float* out, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  __shared__ float warp_sums[32];
  int const i = static_cast<int>(block.group_index().x * block.size() + block.thread_rank());
  float const value = i < n ? in[i] : 0.0F;
  float const warp_sum = cg::reduce(warp, value, cg::plus<float>{});
  if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = warp_sum;
  block.sync();
  if (warp.meta_group_rank() == 0) {
    float const partial =
        warp.thread_rank() < warp.meta_group_size() ? warp_sums[warp.thread_rank()] : 0.0F;
    float const total = cg::reduce(warp, partial, cg::plus<float>{});
    if (block.thread_rank() == 0) out[block.group_index().x] = total;
  }
}

TEST_F(cooperative_groups_test,
       a_block_sum_reduces_warps_then_the_warps_sums_in_the_toolkits_order) {
  constexpr int threads = 256;
  constexpr int blocks = 3;
  constexpr int n = 700;  // the last block is partly past the end
  std::vector<float> values(n);
  for (int i = 0; i < n; ++i) values[i] = 1.0F / static_cast<float>(i + 1) - 0.001F * (i % 7);
  float* in = device_copy(values);
  float* out = device_zeros<float>(blocks);
  block_sums<<<blocks, threads>>>(in, out, n);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<float> const got = read_back(out, blocks);
  for (int b = 0; b < blocks; ++b) {
    std::vector<float> warp_sums(32, 0.0F);
    double exact = 0.0;
    for (int w = 0; w < threads / 32; ++w) {
      std::vector<float> lanes(32);
      for (int lane = 0; lane < 32; ++lane) {
        int const i = b * threads + w * 32 + lane;
        lanes[lane] = i < n ? values[i] : 0.0F;
        exact += lanes[lane];
      }
      warp_sums[w] = butterfly_sum(lanes);
    }
    EXPECT_EQ(got[b], butterfly_sum(warp_sums)) << "block " << b;
    EXPECT_NEAR(got[b], exact, 1e-4) << "block " << b;
  }
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

// --- reductions with every operator, over tiles of 16 and 8 --------------------------------------

struct tile_reductions {
  int sum;
  int min;
  int max;
  unsigned and_bits;
  unsigned or_bits;
  unsigned xor_bits;
  double sum8;  // over the tile of 8
};

__global__ void reduce_tiles(int const* in, tile_reductions* out) {
  auto block = cg::this_thread_block();
  auto tile16 = cg::tiled_partition<16>(block);
  cg::thread_block_tile<8> tile8 = cg::tiled_partition<8>(tile16);
  int const v = in[block.thread_rank()];
  auto const bits = static_cast<unsigned>(v);
  tile_reductions r{};
  r.sum = cg::reduce(tile16, v, cg::plus<int>());
  r.min = cg::reduce(tile16, v, cg::less<int>());
  r.max = cg::reduce(tile16, v, cg::greater<int>());
  r.and_bits = cg::reduce(tile16, bits, cg::bit_and<unsigned>());
  r.or_bits = cg::reduce(tile16, bits, cg::bit_or<unsigned>());
  r.xor_bits = cg::reduce(tile16, bits, cg::bit_xor<unsigned>());
  r.sum8 = cg::reduce(tile8, static_cast<double>(v) / 3.0, cg::plus<double>());
  out[block.thread_rank()] = r;
}

TEST_F(cooperative_groups_test, reduce_takes_every_operator_over_tiles_of_16_and_8) {
  constexpr int threads = 64;
  std::vector<int> values(threads);
  for (int i = 0; i < threads; ++i) values[i] = (i * 37 % 101) * (i % 3 == 0 ? -1 : 1) + (i << 20);
  values[5] = std::numeric_limits<int>::min();
  values[40] = std::numeric_limits<int>::max();
  int* in = device_copy(values);
  tile_reductions* out = device_zeros<tile_reductions>(threads);
  reduce_tiles<<<1, threads>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<tile_reductions> const got = read_back(out, threads);
  for (int i = 0; i < threads; ++i) {
    int const first = i / 16 * 16;
    unsigned sum = 0;  // wraps, as the device's 32-bit adds do
    int lo = values[first];
    int hi = values[first];
    unsigned and_bits = ~0U;
    unsigned or_bits = 0;
    unsigned xor_bits = 0;
    for (int j = first; j < first + 16; ++j) {
      sum += static_cast<unsigned>(values[j]);
      lo = std::min(lo, values[j]);
      hi = std::max(hi, values[j]);
      and_bits &= static_cast<unsigned>(values[j]);
      or_bits |= static_cast<unsigned>(values[j]);
      xor_bits ^= static_cast<unsigned>(values[j]);
    }
    EXPECT_EQ(got[i].sum, static_cast<int>(sum)) << i;
    EXPECT_EQ(got[i].min, lo) << i;
    EXPECT_EQ(got[i].max, hi) << i;
    EXPECT_EQ(got[i].and_bits, and_bits) << i;
    EXPECT_EQ(got[i].or_bits, or_bits) << i;
    EXPECT_EQ(got[i].xor_bits, xor_bits) << i;
    std::vector<double> lanes(8);
    for (int j = 0; j < 8; ++j) lanes[j] = static_cast<double>(values[i / 8 * 8 + j]) / 3.0;
    for (std::size_t mask = 4; mask > 0; mask /= 2) {
      std::vector<double> next(8);
      for (std::size_t lane = 0; lane < 8; ++lane) next[lane] = lanes[lane] + lanes[lane ^ mask];
      lanes = next;
    }
    EXPECT_EQ(got[i].sum8, lanes[i % 8]) << i;
  }
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

// --- ranks and sizes -------------------------------------------------------------------------

constexpr int tile_sizes = 6;  // 32, 16, 8, 4, 2, 1

struct thread_ranks {
  unsigned block_rank;
  unsigned block_size;
  unsigned group_index_x;
  unsigned thread_index_x;
  unsigned thread_index_y;
  unsigned tile_rank[tile_sizes];
  unsigned tile_meta_rank[tile_sizes];
  unsigned tile_meta_size[tile_sizes];
  unsigned tile_size[tile_sizes];
  unsigned sub_tile_meta_rank;  // a tile of 4 of a tile of 16
  unsigned sub_tile_meta_size;
  unsigned long long grid_rank;
  unsigned long long grid_size;
  unsigned long long grid_block_rank;
  int grid_is_valid;
  unsigned this_thread_rank;
  unsigned long long free_rank;  // cg::thread_rank(block)
  unsigned long long free_size;  // cg::group_size(warp)
};

template <unsigned Size>
__device__ void record_tile(cg::thread_block const& block, thread_ranks& r, int slot) {
  cg::thread_block_tile<Size> tile = cg::tiled_partition<Size>(block);
  r.tile_rank[slot] = tile.thread_rank();
  r.tile_meta_rank[slot] = tile.meta_group_rank();
  r.tile_meta_size[slot] = tile.meta_group_size();
  r.tile_size[slot] = tile.size();
}

__global__ void record_ranks(thread_ranks* out) {
  cg::thread_block block = cg::this_thread_block();
  thread_ranks r{};
  r.block_rank = block.thread_rank();
  r.block_size = block.size();
  r.group_index_x = block.group_index().x;
  r.thread_index_x = block.thread_index().x;
  r.thread_index_y = block.thread_index().y;
  record_tile<32>(block, r, 0);
  record_tile<16>(block, r, 1);
  record_tile<8>(block, r, 2);
  record_tile<4>(block, r, 3);
  record_tile<2>(block, r, 4);
  record_tile<1>(block, r, 5);
  auto const tile16 = cg::tiled_partition<16>(block);
  auto const sub = cg::tiled_partition<4>(tile16);
  r.sub_tile_meta_rank = sub.meta_group_rank();
  r.sub_tile_meta_size = sub.meta_group_size();
  cg::grid_group const grid = cg::this_grid();
  r.grid_rank = grid.thread_rank();
  r.grid_size = grid.size();
  r.grid_block_rank = grid.block_rank();
  r.grid_is_valid = grid.is_valid() ? 1 : 0;  // not a cooperative launch
  r.this_thread_rank = cg::this_thread().thread_rank();
  r.free_rank = cg::thread_rank(block);
  r.free_size = cg::group_size(cg::tiled_partition<32>(block));
  cg::sync(block);
  out[grid.thread_rank()] = r;
}

TEST_F(cooperative_groups_test, tiles_of_every_size_know_their_ranks_in_a_two_dimensional_block) {
  dim3 const block(8, 6);  // 48 threads: the second warp has 16
  constexpr unsigned per_block = 48;
  constexpr unsigned blocks = 2;
  thread_ranks* out = device_zeros<thread_ranks>(per_block * blocks);
  record_ranks<<<blocks, block>>>(out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<thread_ranks> const got = read_back(out, per_block * blocks);
  unsigned const sizes[tile_sizes] = {32, 16, 8, 4, 2, 1};
  for (unsigned b = 0; b < blocks; ++b) {
    for (unsigned y = 0; y < 6; ++y) {
      for (unsigned x = 0; x < 8; ++x) {
        unsigned const rank = y * 8 + x;
        thread_ranks const& r = got[b * per_block + rank];
        EXPECT_EQ(r.block_rank, rank);
        EXPECT_EQ(r.block_size, per_block);
        EXPECT_EQ(r.group_index_x, b);
        EXPECT_EQ(r.thread_index_x, x);
        EXPECT_EQ(r.thread_index_y, y);
        for (int s = 0; s < tile_sizes; ++s) {
          EXPECT_EQ(r.tile_rank[s], rank % sizes[s]) << rank << " tile " << sizes[s];
          EXPECT_EQ(r.tile_meta_rank[s], rank / sizes[s]) << rank << " tile " << sizes[s];
          EXPECT_EQ(r.tile_meta_size[s], (per_block + sizes[s] - 1) / sizes[s]) << sizes[s];
          EXPECT_EQ(r.tile_size[s], sizes[s]);
        }
        EXPECT_EQ(r.sub_tile_meta_rank, rank % 16 / 4);
        EXPECT_EQ(r.sub_tile_meta_size, 4U);
        EXPECT_EQ(r.grid_rank, b * per_block + rank);
        EXPECT_EQ(r.grid_size, per_block * blocks);
        EXPECT_EQ(r.grid_block_rank, b);
        EXPECT_EQ(r.grid_is_valid, 0);
        EXPECT_EQ(r.this_thread_rank, 0U);
        EXPECT_EQ(r.free_rank, rank);
        EXPECT_EQ(r.free_size, 32U);
      }
    }
  }
  SIM_TEST_TRY(cudaFree(out));
}

// --- shuffles and votes within tiles -----------------------------------------------------------

struct tile_exchanges {
  int down;
  int up;
  int xor_5;
  int from_3;
  unsigned ballot;
  int any;
  int all;
  int all_true;
};

__global__ void exchange_in_tiles(tile_exchanges* out) {
  auto block = cg::this_thread_block();
  auto tile16 = cg::tiled_partition<16>(block);
  auto tile8 = cg::tiled_partition<8>(block);
  int const v = static_cast<int>(block.thread_rank()) * 10 + 1;
  tile_exchanges r{};
  r.down = tile16.shfl_down(v, 1);
  r.up = tile16.shfl_up(v, 2);
  r.xor_5 = tile16.shfl_xor(v, 5);
  r.from_3 = tile16.shfl(v, 3);
  r.ballot = tile8.ballot(tile8.thread_rank() % 3 == 0);
  r.any = tile8.any(block.thread_rank() == 21);
  r.all = tile8.all(block.thread_rank() < 20);
  r.all_true = tile8.all(1);
  tile16.sync();
  out[block.thread_rank()] = r;
}

TEST_F(cooperative_groups_test, tile_shuffles_and_votes_stay_within_their_tile) {
  constexpr int threads = 64;
  tile_exchanges* out = device_zeros<tile_exchanges>(threads);
  exchange_in_tiles<<<1, threads>>>(out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<tile_exchanges> const got = read_back(out, threads);
  auto value = [](int rank) { return rank * 10 + 1; };
  for (int i = 0; i < threads; ++i) {
    int const rank16 = i % 16;
    int const first16 = i - rank16;
    // A source outside the tile leaves the caller's own value.
    EXPECT_EQ(got[i].down, value(rank16 + 1 < 16 ? i + 1 : i)) << i;
    EXPECT_EQ(got[i].up, value(rank16 >= 2 ? i - 2 : i)) << i;
    EXPECT_EQ(got[i].xor_5, value(first16 + (rank16 ^ 5))) << i;
    EXPECT_EQ(got[i].from_3, value(first16 + 3)) << i;
    EXPECT_EQ(got[i].ballot, 0x49U) << i;  // ranks 0, 3 and 6 of the tile
    int const first8 = i / 8 * 8;
    EXPECT_EQ(got[i].any, first8 == 16 ? 1 : 0) << i;
    EXPECT_EQ(got[i].all, first8 + 8 <= 20 ? 1 : 0) << i;
    EXPECT_EQ(got[i].all_true, 1) << i;
  }
  SIM_TEST_TRY(cudaFree(out));
}

// --- threads that return first
// --------------------------------------------------------------------

struct after_exits {
  unsigned warp_ballot;
  int warp_any;
  int warp_all;  // the toolkit compares the ballot with the whole tile's mask
  unsigned active_size;
  unsigned active_rank;
  int active_sum;
  unsigned block_count;
};

// Threads 40-63 return before the warp's and the block's barriers: those complete with the
// threads left, and cg::coalesced_threads() is the group of them.
__global__ void work_after_exits(after_exits* out, int live) {
  cg::thread_block block = cg::this_thread_block();
  if (static_cast<int>(block.thread_rank()) >= live) return;
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  warp.sync();
  after_exits r{};
  r.warp_ballot = warp.ballot(1);
  r.warp_any = warp.any(1);
  r.warp_all = warp.all(1);
  cg::coalesced_group active = cg::coalesced_threads();
  r.active_size = active.size();
  r.active_rank = active.thread_rank();
  r.active_sum = cg::reduce(active, static_cast<int>(block.thread_rank()) + 1, cg::plus<int>());
  r.block_count = static_cast<unsigned>(__syncthreads_count(1));
  cg::sync(block);
  out[block.thread_rank()] = r;
}

TEST_F(cooperative_groups_test, tiles_and_coalesced_groups_after_threads_return_early) {
  constexpr int threads = 64;
  constexpr int live = 40;
  after_exits* out = device_zeros<after_exits>(threads);
  work_after_exits<<<1, threads>>>(out, live);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<after_exits> const got = read_back(out, threads);
  for (int i = 0; i < live; ++i) {
    bool const full = i < 32;
    int const first = full ? 0 : 32;
    int const last = full ? 32 : live;
    int sum = 0;
    for (int j = first; j < last; ++j) sum += j + 1;
    EXPECT_EQ(got[i].warp_ballot, full ? 0xFFFFFFFFU : 0xFFU) << i;
    EXPECT_EQ(got[i].warp_any, 1) << i;
    EXPECT_EQ(got[i].warp_all, full ? 1 : 0) << i;
    EXPECT_EQ(got[i].active_size, static_cast<unsigned>(last - first)) << i;
    EXPECT_EQ(got[i].active_rank, static_cast<unsigned>(i - first)) << i;
    EXPECT_EQ(got[i].active_sum, sum) << i;
    EXPECT_EQ(got[i].block_count, static_cast<unsigned>(live)) << i;
  }
  for (int i = live; i < threads; ++i) EXPECT_EQ(got[i].active_size, 0U) << i;
  SIM_TEST_TRY(cudaFree(out));
}

struct scattered_group {
  unsigned size;
  unsigned rank;
  float from_2;
  float down;
  float up;
  float sum;
  unsigned ballot;
  int all;
};

// Only every third lane stays: a coalesced group whose lanes are not contiguous, where ranks,
// shuffles and the reduction go by the lanes of its mask.
__global__ void scattered_lanes(float const* in, scattered_group* out) {
  unsigned const lane = threadIdx.x;
  if (lane % 3 != 0) return;
  cg::coalesced_group active = cg::coalesced_threads();
  float const v = in[lane];
  scattered_group r{};
  r.size = active.size();
  r.rank = active.thread_rank();
  r.from_2 = active.shfl(v, 2);
  r.down = active.shfl_down(v, 1);
  r.up = active.shfl_up(v, 1);
  r.sum = cg::reduce(active, v, cg::plus<float>());
  r.ballot = active.ballot(lane >= 15);
  r.all = active.all(lane < 31);
  active.sync();
  out[lane] = r;
}

TEST_F(cooperative_groups_test,
       a_coalesced_group_of_scattered_lanes_ranks_and_reduces_by_its_mask) {
  std::vector<float> values(32);
  for (int i = 0; i < 32; ++i) values[i] = 1.0F / static_cast<float>(i + 3);
  float* in = device_copy(values);
  scattered_group* out = device_zeros<scattered_group>(32);
  scattered_lanes<<<1, 32>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<scattered_group> const got = read_back(out, 32);
  std::vector<float> members;  // by rank: lanes 0, 3, ..., 30
  for (int lane = 0; lane < 32; lane += 3) members.push_back(values[lane]);
  auto const size = static_cast<unsigned>(members.size());
  // The toolkit's inclusive_scan_non_contiguous: step i adds the value i ranks below.
  std::vector<float> scan = members;
  for (unsigned i = 1; i < size; i *= 2) {
    std::vector<float> next = scan;
    for (unsigned r = i; r < size; ++r) next[r] = scan[r] + scan[r - i];
    scan = next;
  }
  for (unsigned rank = 0; rank < size; ++rank) {
    scattered_group const& r = got[rank * 3];
    EXPECT_EQ(r.size, 11U);
    EXPECT_EQ(r.rank, rank);
    EXPECT_EQ(r.from_2, members[2]) << rank;
    EXPECT_EQ(r.down, members[rank + 1 < size ? rank + 1 : rank]) << rank;
    EXPECT_EQ(r.up, members[rank >= 1 ? rank - 1 : rank]) << rank;
    EXPECT_EQ(r.sum, scan[size - 1]) << rank;
    EXPECT_EQ(r.ballot, 0x7E0U) << rank;  // ranks 5-10: lanes 15-30
    EXPECT_EQ(r.all, 1) << rank;
  }
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

// --- integer intrinsics
// ---------------------------------------------------------------------------

struct intrinsic_inputs {
  unsigned lo;
  unsigned hi;
  unsigned shift;
  unsigned selector;
  unsigned long long wide;
  int dp_a;
  int dp_b;
  int dp_c;
};

struct intrinsic_results {
  unsigned funnel_l;
  unsigned funnel_lc;
  unsigned funnel_r;
  unsigned funnel_rc;
  unsigned brev;
  unsigned long long brevll;
  unsigned byte_perm;
  int popc;
  int popcll;
  int clz;
  int clzll;
  int ffs;
  int ffsll;
  int dp4a;
  unsigned dp4a_unsigned;
  int dp4a_char4;
};

__global__ void integer_intrinsics(intrinsic_inputs const* in, intrinsic_results* out, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  intrinsic_inputs const x = in[i];
  intrinsic_results r{};
  __nanosleep(100);
  r.funnel_l = __funnelshift_l(x.lo, x.hi, x.shift);
  r.funnel_lc = __funnelshift_lc(x.lo, x.hi, x.shift);
  r.funnel_r = __funnelshift_r(x.lo, x.hi, x.shift);
  r.funnel_rc = __funnelshift_rc(x.lo, x.hi, x.shift);
  r.brev = __brev(x.lo);
  r.brevll = __brevll(x.wide);
  r.byte_perm = __byte_perm(x.lo, x.hi, x.selector);
  r.popc = __popc(x.lo);
  r.popcll = __popcll(x.wide);
  r.clz = __clz(static_cast<int>(x.lo));
  r.clzll = __clzll(static_cast<long long>(x.wide));
  r.ffs = __ffs(static_cast<int>(x.lo));
  r.ffsll = __ffsll(static_cast<long long>(x.wide));
  r.dp4a = __dp4a(x.dp_a, x.dp_b, x.dp_c);
  r.dp4a_unsigned = __dp4a(static_cast<unsigned>(x.dp_a), static_cast<unsigned>(x.dp_b),
                           static_cast<unsigned>(x.dp_c));
  char4 const a4 =
      make_char4(static_cast<signed char>(x.dp_a), static_cast<signed char>(x.dp_a >> 8),
                 static_cast<signed char>(x.dp_a >> 16), static_cast<signed char>(x.dp_a >> 24));
  char4 const b4 =
      make_char4(static_cast<signed char>(x.dp_b), static_cast<signed char>(x.dp_b >> 8),
                 static_cast<signed char>(x.dp_b >> 16), static_cast<signed char>(x.dp_b >> 24));
  r.dp4a_char4 = __dp4a(a4, b4, x.dp_c);
  out[i] = r;
}

// The host's own reading of each definition (CUDA Math API, "Integer Intrinsics").
unsigned bit(unsigned long long x, unsigned i) {
  return static_cast<unsigned>(x >> i & 1U);
}

intrinsic_results expected_intrinsics(intrinsic_inputs const& x) {
  intrinsic_results r{};
  // Bit k of the shifted hi:lo pair, as a 64-bit field where bit 63 is hi's bit 31.
  auto pair_bit = [&](int k) -> unsigned {
    if (k < 0 || k > 63) return 0;
    return k < 32 ? bit(x.lo, static_cast<unsigned>(k)) : bit(x.hi, static_cast<unsigned>(k - 32));
  };
  unsigned const wrapped = x.shift % 32;
  unsigned const clamped = x.shift > 32 ? 32 : x.shift;
  for (int b = 0; b < 32; ++b) {
    // Left shifts: bit b of the result is bit (32 + b - shift) of the pair.
    r.funnel_l |= pair_bit(32 + b - static_cast<int>(wrapped)) << b;
    r.funnel_lc |= pair_bit(32 + b - static_cast<int>(clamped)) << b;
    r.funnel_r |= pair_bit(b + static_cast<int>(wrapped)) << b;
    r.funnel_rc |= pair_bit(b + static_cast<int>(clamped)) << b;
    r.brev |= bit(x.lo, 31U - static_cast<unsigned>(b)) << b;
  }
  for (unsigned b = 0; b < 64; ++b) {
    r.brevll |= static_cast<unsigned long long>(bit(x.wide, 63U - b)) << b;
    r.popcll += static_cast<int>(bit(x.wide, b));
  }
  unsigned char bytes[8];
  for (unsigned b = 0; b < 4; ++b) {
    bytes[b] = static_cast<unsigned char>(x.lo >> (8 * b));
    bytes[b + 4] = static_cast<unsigned char>(x.hi >> (8 * b));
  }
  for (unsigned b = 0; b < 4; ++b) {
    r.byte_perm |= static_cast<unsigned>(bytes[(x.selector >> (4 * b)) & 7U]) << (8 * b);
  }
  r.clz = 32;
  for (int b = 31; b >= 0; --b) {
    if (bit(x.lo, static_cast<unsigned>(b)) != 0U) {
      r.clz = 31 - b;
      break;
    }
  }
  r.clzll = 64;
  for (int b = 63; b >= 0; --b) {
    if (bit(x.wide, static_cast<unsigned>(b)) != 0U) {
      r.clzll = 63 - b;
      break;
    }
  }
  for (unsigned b = 0; b < 32; ++b) r.popc += static_cast<int>(bit(x.lo, b));
  for (unsigned b = 0; b < 32 && r.ffs == 0; ++b)
    r.ffs = bit(x.lo, b) != 0U ? static_cast<int>(b + 1) : 0;
  for (unsigned b = 0; b < 64 && r.ffsll == 0; ++b)
    r.ffsll = bit(x.wide, b) != 0U ? static_cast<int>(b + 1) : 0;
  long long signed_sum = x.dp_c;
  unsigned long long unsigned_sum = static_cast<unsigned>(x.dp_c);
  for (unsigned b = 0; b < 4; ++b) {
    auto const ua = static_cast<unsigned>(x.dp_a) >> (8 * b) & 0xFFU;
    auto const ub = static_cast<unsigned>(x.dp_b) >> (8 * b) & 0xFFU;
    long long const sa = ua >= 128 ? static_cast<long long>(ua) - 256 : ua;
    long long const sb = ub >= 128 ? static_cast<long long>(ub) - 256 : ub;
    signed_sum += sa * sb;
    unsigned_sum += static_cast<unsigned long long>(ua) * ub;
  }
  // 32-bit accumulation wraps: keep the low 32 bits.
  r.dp4a =
      static_cast<int>(static_cast<std::uint32_t>(static_cast<unsigned long long>(signed_sum)));
  r.dp4a_unsigned = static_cast<unsigned>(unsigned_sum);
  r.dp4a_char4 = r.dp4a;
  return r;
}

TEST_F(cooperative_groups_test, integer_intrinsics_match_their_definitions_at_the_edges) {
  constexpr unsigned max = 0xFFFFFFFFU;
  std::vector<intrinsic_inputs> inputs = {
      {0x89ABCDEFU, 0x01234567U, 0, 0x3210, 0, 0, 0, 0},
      {0x89ABCDEFU, 0x01234567U, 4, 0x7654, 1, 0x01020304, 0x05060708, 10},
      {0x89ABCDEFU, 0x01234567U, 31, 0x0123, 0x8000000000000000ULL, -1, -1, -1},
      {0x89ABCDEFU, 0x01234567U, 32, 0x4444, max, static_cast<int>(0x80808080U),
       static_cast<int>(0x80808080U), std::numeric_limits<int>::max()},
      {0x89ABCDEFU, 0x01234567U, 33, 0x5173, 0xFFFFFFFFFFFFFFFFULL, 0x7F7F7F7F, 0x7F7F7F7F,
       std::numeric_limits<int>::min()},
      {0x00000001U, 0x80000000U, 63, 0x0000, 1ULL << 40, static_cast<int>(0xFF00FF00U), 0x01FF01FF,
       0},
      {0U, 0U, max, 0x7777, 0x0000000100000000ULL, static_cast<int>(max), static_cast<int>(max),
       static_cast<int>(max)},
      {0x80000000U, max, 64, 0x1032, 0x00F0000000000000ULL, 0x12345678, -0x12345678, 7},
      {1U, 0x00000001U, 1, 0x6420, 3, 0x00000080, 0x00000080, -16384}};
  int const n = static_cast<int>(inputs.size());
  intrinsic_inputs* in = device_copy(inputs);
  intrinsic_results* out = device_zeros<intrinsic_results>(inputs.size());
  integer_intrinsics<<<1, 32>>>(in, out, n);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<intrinsic_results> const got = read_back(out, inputs.size());
  for (int i = 0; i < n; ++i) {
    intrinsic_results const want = expected_intrinsics(inputs[i]);
    EXPECT_EQ(got[i].funnel_l, want.funnel_l) << i;
    EXPECT_EQ(got[i].funnel_lc, want.funnel_lc) << i;
    EXPECT_EQ(got[i].funnel_r, want.funnel_r) << i;
    EXPECT_EQ(got[i].funnel_rc, want.funnel_rc) << i;
    EXPECT_EQ(got[i].brev, want.brev) << i;
    EXPECT_EQ(got[i].brevll, want.brevll) << i;
    EXPECT_EQ(got[i].byte_perm, want.byte_perm) << i;
    EXPECT_EQ(got[i].popc, want.popc) << i;
    EXPECT_EQ(got[i].popcll, want.popcll) << i;
    EXPECT_EQ(got[i].clz, want.clz) << i;
    EXPECT_EQ(got[i].clzll, want.clzll) << i;
    EXPECT_EQ(got[i].ffs, want.ffs) << i;
    EXPECT_EQ(got[i].ffsll, want.ffsll) << i;
    EXPECT_EQ(got[i].dp4a, want.dp4a) << i;
    EXPECT_EQ(got[i].dp4a_unsigned, want.dp4a_unsigned) << i;
    EXPECT_EQ(got[i].dp4a_char4, want.dp4a_char4) << i;
  }
  // A few by hand, so that a host reading that agreed with a wrong device would still show.
  EXPECT_EQ(got[0].funnel_l, 0x01234567U);   // shift 0: hi
  EXPECT_EQ(got[0].funnel_r, 0x89ABCDEFU);   // shift 0: lo
  EXPECT_EQ(got[3].funnel_l, 0x01234567U);   // 32 wraps to 0
  EXPECT_EQ(got[3].funnel_lc, 0x89ABCDEFU);  // 32 clamps: all of lo
  EXPECT_EQ(got[3].funnel_rc, 0x01234567U);  // 32 clamps: all of hi
  EXPECT_EQ(got[4].funnel_rc, 0x01234567U);  // 33 clamps to 32
  EXPECT_EQ(got[0].byte_perm, 0x89ABCDEFU);  // 0x3210: x itself
  EXPECT_EQ(got[1].byte_perm, 0x01234567U);  // 0x7654: y itself
  EXPECT_EQ(got[2].byte_perm, 0xEFCDAB89U);  // 0x0123: x's bytes reversed
  EXPECT_EQ(got[8].brev, 0x80000000U);
  EXPECT_EQ(got[6].clz, 32);
  EXPECT_EQ(got[6].ffs, 0);
  EXPECT_EQ(got[2].clzll, 0);
  EXPECT_EQ(got[5].ffsll, 41);
  EXPECT_EQ(got[3].dp4a, std::numeric_limits<int>::min() + 4 * 16384 - 1);  // wraps past max
  EXPECT_EQ(got[6].dp4a, -1 + 4);                         // (-1) * (-1) four times
  EXPECT_EQ(got[6].dp4a_unsigned, 4 * 255U * 255U - 1U);  // 0xFFFFFFFF + 260100 wraps
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

}  // namespace
