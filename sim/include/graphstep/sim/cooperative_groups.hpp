#pragma once

/// @file
/// @brief Cooperative groups (CUDA C++ Programming Guide, "Cooperative Groups") for kernels on
/// the simulated device: `<cooperative_groups.h>` and `<cooperative_groups/reduce.h>` reach this
/// header (sim/include/cooperative_groups.h says how).
///
/// Each group and collective is written as the toolkit's cooperative_groups.h and
/// cooperative_groups/details/ write it, on the warp primitives of device.hpp (__syncwarp,
/// shuffles, __ballot_sync, __syncthreads): exited lanes and divergence behave as they do there.
/// Reductions take the toolkit's order of operations (a butterfly of shfl_xor over a tile), so
/// a floating-point sum rounds as on a GPU.

#include <type_traits>

#include "graphstep/sim/device.hpp"

// CUDA's names: `cooperative_groups`, `cg::details` and the collectives' signatures.
// NOLINTBEGIN(readability-identifier-naming,bugprone-reserved-identifier,cert-dcl37-c)

namespace cooperative_groups {

namespace details {

inline unsigned laneid() noexcept {
  return ::graphstep::sim::detail::lane_id();
}
// %lanemask_lt: the lanes below the caller's.
inline unsigned lanemask32_lt() noexcept {
  return (1U << laneid()) - 1U;
}
// The thread's linear index in its block and the block's size ("thread_rank ... of the calling
// thread within [0, num_threads)").
inline unsigned cta_thread_rank() noexcept {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
inline unsigned cta_num_threads() noexcept {
  return blockDim.x * blockDim.y * blockDim.z;
}

template <unsigned Size>
constexpr bool is_valid_tile_size = Size != 0U && Size <= 32U && (Size & (Size - 1U)) == 0U;

// Tiles of Size lanes start at lanes that are multiples of Size ("a one-dimensional, row-major,
// tiling"): the mask of the caller's tile.
template <unsigned Size>
unsigned tile_mask() noexcept {
  if constexpr (Size == 32U) {
    return 0xFFFFFFFFU;
  } else {
    return ((1U << Size) - 1U) << (laneid() & ~(Size - 1U));
  }
}

}  // namespace details

/// The thread block: "Every GPU kernel is executed by a grid of thread blocks"
/// (cooperative_groups.h, class thread_block). Constructed by this_thread_block().
class thread_block {
 public:
  struct arrival_token {};

  static void sync() { __syncthreads(); }
  [[nodiscard]] static arrival_token barrier_arrive() { return {}; }
  // NOLINTNEXTLINE(cppcoreguidelines-rvalue-reference-param-not-moved): CUDA's signature
  static void barrier_wait(arrival_token&& /*token*/) { __syncthreads(); }
  static unsigned size() { return details::cta_num_threads(); }
  static unsigned num_threads() { return details::cta_num_threads(); }
  static unsigned thread_rank() { return details::cta_thread_rank(); }
  static dim3 group_index() { return {blockIdx.x, blockIdx.y, blockIdx.z}; }
  static dim3 thread_index() { return {threadIdx.x, threadIdx.y, threadIdx.z}; }
  static dim3 group_dim() { return blockDim; }
  static dim3 dim_threads() { return blockDim; }

 private:
  friend thread_block this_thread_block();
  thread_block() = default;
};

inline thread_block this_thread_block() {
  return {};
}

/// The grid. Its collectives need a cooperative launch: "To use this group, the kernel must have
/// been launched with cuLaunchCooperativeKernel (or the CUDA Runtime equivalent)"
/// (cooperative_groups.h, class grid_group). The simulated device accepts such a launch but runs
/// the grid's blocks one after another, so a grid-wide barrier cannot be kept: is_valid() is false
/// and sync() is the toolkit's abort (`__trap()`): a kernel fault, cudaErrorLaunchFailure.
/// The indices need no such launch.
class grid_group {
 public:
  static bool is_valid() { return false; }
  static void sync() {
    ::graphstep::sim::detail::trap(
        "grid_group::sync() needs a cooperative launch (cudaLaunchCooperativeKernel) whose blocks "
        "run together; the simulated device runs a grid's blocks one after another");
  }
  static unsigned long long num_blocks() {
    return static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z;
  }
  static unsigned long long block_rank() {
    return blockIdx.x + static_cast<unsigned long long>(gridDim.x) *
                            (blockIdx.y + static_cast<unsigned long long>(gridDim.y) * blockIdx.z);
  }
  static unsigned long long num_threads() { return num_blocks() * details::cta_num_threads(); }
  static unsigned long long size() { return num_threads(); }
  static unsigned long long thread_rank() {
    return block_rank() * details::cta_num_threads() + details::cta_thread_rank();
  }
  static dim3 dim_blocks() { return gridDim; }
  static dim3 group_dim() { return gridDim; }
  static dim3 block_index() { return {blockIdx.x, blockIdx.y, blockIdx.z}; }
  static dim3 dim_threads() {
    return {gridDim.x * blockDim.x, gridDim.y * blockDim.y, gridDim.z * blockDim.z};
  }
  static dim3 thread_index() {
    return {blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y * blockDim.y + threadIdx.y,
            blockIdx.z * blockDim.z + threadIdx.z};
  }

 private:
  friend grid_group this_grid();
  grid_group() = default;
};

inline grid_group this_grid() {
  return {};
}

/// A tile of Size consecutive threads of a block (Size 1, 2, 4, 8, 16 or 32, "the only
/// specializations currently supported are those with native hardware support"), made by
/// tiled_partition<Size>(parent). The collectives pass the tile's lanes as the mask of the warp
/// intrinsic they call, with Size as its width, as the toolkit's build_mask() does.
template <unsigned Size, typename ParentT = void>
class thread_block_tile {
  static_assert(details::is_valid_tile_size<Size>, "Size must be one of 1/2/4/8/16/32");

 public:
  // A tile converts to the tile of the same size with no parent type (operator
  // thread_block_tile<Size, void>), which is how `cg::thread_block_tile<32> warp =
  // cg::tiled_partition<32>(block)` compiles.
  template <typename OtherParentT>
  // NOLINTNEXTLINE(google-explicit-constructor,hicpp-explicit-conversions): as the toolkit's
  thread_block_tile(thread_block_tile<Size, OtherParentT> const& other)
      : meta_rank_{other.meta_group_rank()}, meta_size_{other.meta_group_size()} {}

  static void sync() { __syncwarp(details::tile_mask<Size>()); }
  static unsigned thread_rank() { return details::cta_thread_rank() & (Size - 1U); }
  static constexpr unsigned num_threads() { return Size; }
  static constexpr unsigned size() { return Size; }
  // "Rank of this group in the upper level of the hierarchy" and the number of tiles the parent
  // was partitioned into.
  [[nodiscard]] unsigned meta_group_rank() const { return meta_rank_; }
  [[nodiscard]] unsigned meta_group_size() const { return meta_size_; }

  template <typename T>
  [[nodiscard]] T shfl(T value, int source_rank) const {
    return __shfl_sync(details::tile_mask<Size>(), value, source_rank, Size);
  }
  template <typename T>
  [[nodiscard]] T shfl_down(T value, unsigned delta) const {
    return __shfl_down_sync(details::tile_mask<Size>(), value, delta, Size);
  }
  template <typename T>
  [[nodiscard]] T shfl_up(T value, unsigned delta) const {
    return __shfl_up_sync(details::tile_mask<Size>(), value, delta, Size);
  }
  template <typename T>
  [[nodiscard]] T shfl_xor(T value, unsigned lane_mask) const {
    return __shfl_xor_sync(details::tile_mask<Size>(), value, static_cast<int>(lane_mask), Size);
  }
  [[nodiscard]] int any(int predicate) const {
    return __ballot_sync(details::tile_mask<Size>(), predicate) != 0U ? 1 : 0;
  }
  // As the toolkit writes it: the ballot against the whole tile's mask, so a tile with a lane
  // that has exited (or that the block lacks) is not `all`.
  [[nodiscard]] int all(int predicate) const {
    unsigned const mask = details::tile_mask<Size>();
    return __ballot_sync(mask, predicate) == mask ? 1 : 0;
  }
  // Bit i for the tile's thread of rank i.
  [[nodiscard]] unsigned ballot(int predicate) const {
    return __ballot_sync(details::tile_mask<Size>(), predicate) >>
           (details::laneid() & ~(Size - 1U));
  }

 private:
  template <unsigned, typename>
  friend class thread_block_tile;
  template <unsigned TileSize, typename Parent>
  friend thread_block_tile<TileSize, Parent> tiled_partition(Parent const& parent);
  friend thread_block_tile<1, void> this_thread();

  thread_block_tile(unsigned meta_rank, unsigned meta_size)
      : meta_rank_{meta_rank}, meta_size_{meta_size} {}

  unsigned meta_rank_;
  unsigned meta_size_;
};

/// "The tiled_partition<tilesz>(parent) method is a collective operation that partitions the
/// parent group into a one-dimensional, row-major, tiling of subgroups", the parent a
/// thread_block or a larger thread_block_tile: the tile of the caller's rank / Size, one of
/// (size(parent) + Size - 1) / Size.
template <unsigned Size, typename ParentT>
thread_block_tile<Size, ParentT> tiled_partition(ParentT const& parent) {
  return thread_block_tile<Size, ParentT>(parent.thread_rank() / Size,
                                          (parent.size() + Size - 1U) / Size);
}

/// "Constructs a generic thread_group containing only the calling thread".
inline thread_block_tile<1, void> this_thread() {
  return {0, 1};  // a tile of one, the only tile of its parent tile
}

/// "A group representing the current set of converged threads in a warp" (cooperative_groups.h,
/// class coalesced_group), made by coalesced_threads() from __activemask(). Ranks count the
/// lanes of its mask from the lowest; each collective is the toolkit's.
class coalesced_group {
 public:
  [[nodiscard]] unsigned num_threads() const { return static_cast<unsigned>(__popc(mask_)); }
  [[nodiscard]] unsigned size() const { return num_threads(); }
  [[nodiscard]] unsigned thread_rank() const {
    return static_cast<unsigned>(__popc(mask_ & details::lanemask32_lt()));
  }
  static unsigned meta_group_rank() { return 0; }
  static unsigned meta_group_size() { return 1; }
  void sync() const { __syncwarp(mask_); }

  template <typename T>
  [[nodiscard]] T shfl(T value, int source_rank) const {
    unsigned const lane = source_rank == 0
                              ? static_cast<unsigned>(__ffs(static_cast<int>(mask_))) - 1U
                          : size() == 32U ? static_cast<unsigned>(source_rank)
                                          : __fns(mask_, 0, source_rank + 1);
    return __shfl_sync(mask_, value, static_cast<int>(lane), 32);
  }
  template <typename T>
  [[nodiscard]] T shfl_down(T value, unsigned delta) const {
    if (size() == 32U) return __shfl_down_sync(0xFFFFFFFFU, value, delta, 32);
    unsigned lane = __fns(mask_, details::laneid(), static_cast<int>(delta) + 1);
    if (lane >= 32U) lane = details::laneid();
    return __shfl_sync(mask_, value, static_cast<int>(lane), 32);
  }
  template <typename T>
  [[nodiscard]] T shfl_up(T value, int delta) const {
    if (size() == 32U) return __shfl_up_sync(0xFFFFFFFFU, value, static_cast<unsigned>(delta), 32);
    unsigned lane = __fns(mask_, details::laneid(), -(delta + 1));
    if (lane >= 32U) lane = details::laneid();
    return __shfl_sync(mask_, value, static_cast<int>(lane), 32);
  }
  [[nodiscard]] int any(int predicate) const {
    return __ballot_sync(mask_, predicate) != 0U ? 1 : 0;
  }
  [[nodiscard]] int all(int predicate) const {
    return __ballot_sync(mask_, predicate) == mask_ ? 1 : 0;
  }
  // Bit i for the group's thread of rank i.
  [[nodiscard]] unsigned ballot(int predicate) const {
    unsigned const lanes = __ballot_sync(mask_, predicate);
    unsigned packed = 0;
    unsigned rank = 0;
    for (unsigned lane = 0; lane < 32U; ++lane) {
      if ((mask_ >> lane & 1U) == 0U) continue;
      if ((lanes >> lane & 1U) != 0U) packed |= 1U << rank;
      ++rank;
    }
    return packed;
  }

  [[nodiscard]] unsigned get_mask() const { return mask_; }

 private:
  friend coalesced_group coalesced_threads();
  explicit coalesced_group(unsigned mask) : mask_{mask} {}
  unsigned mask_;
};

/// The lanes of the warp that run this call. __activemask() here is every lane of the warp that
/// has not exited: `if (i >= n) return; auto active = cg::coalesced_threads();` is the group
/// a GPU forms; inside a branch that lanes still running skip it is not modelled.
inline coalesced_group coalesced_threads() {
  return coalesced_group(__activemask());
}

/// Outer-level calls: "void sync(GroupT) - see <group_type>.sync()".
template <class GroupT>
void sync(GroupT const& group) {
  group.sync();
}
template <class GroupT>
auto thread_rank(GroupT const& group) -> decltype(group.thread_rank()) {
  return group.thread_rank();
}
template <class GroupT>
auto group_size(GroupT const& group) -> decltype(group.num_threads()) {
  return group.num_threads();
}

// --- cooperative_groups/reduce.h ---------------------------------------------------------------

/// The operators of cooperative_groups/details/functional.h: less and greater keep the first
/// operand on a tie.
template <typename Ty>
struct plus {
  Ty operator()(Ty arg1, Ty arg2) const {
    // The device's integer adds wrap (PTX add.s32); a host's signed overflow is undefined.
    if constexpr (std::is_integral_v<Ty> && std::is_signed_v<Ty>) {
      using bits = std::make_unsigned_t<Ty>;
      return static_cast<Ty>(static_cast<bits>(arg1) + static_cast<bits>(arg2));
    } else {
      return arg1 + arg2;
    }
  }
};
template <typename Ty>
struct less {
  Ty operator()(Ty arg1, Ty arg2) const { return (arg2 < arg1) ? arg2 : arg1; }
};
template <typename Ty>
struct greater {
  Ty operator()(Ty arg1, Ty arg2) const { return (arg1 < arg2) ? arg2 : arg1; }
};
template <typename Ty>
struct bit_and {
  Ty operator()(Ty arg1, Ty arg2) const { return arg1 & arg2; }
};
template <typename Ty>
struct bit_xor {
  Ty operator()(Ty arg1, Ty arg2) const { return arg1 ^ arg2; }
};
template <typename Ty>
struct bit_or {
  Ty operator()(Ty arg1, Ty arg2) const { return arg1 | arg2; }
};

namespace details {

template <typename Group>
struct reduce_group_supported : std::false_type {};
template <unsigned Size, typename ParentT>
struct reduce_group_supported<thread_block_tile<Size, ParentT>> : std::true_type {};
template <>
struct reduce_group_supported<coalesced_group> : std::true_type {};

// coalesced_reduce over a tile: a butterfly, every lane ends with the same value. (On sm_80 the
// toolkit takes the redux instruction for 32-bit integers with plus, less, greater and the bit
// operators, whose result does not depend on the order.)
template <unsigned Size, typename ParentT, typename T, typename Op>
T reduce_group(thread_block_tile<Size, ParentT> const& group, T value, Op& op) {
  T out = value;
  for (unsigned mask = Size >> 1U; mask > 0U; mask >>= 1U) out = op(out, group.shfl_xor(out, mask));
  return out;
}

// coalesced_reduce over a coalesced group: a full warp as a tile of 32; otherwise the toolkit's
// inclusive_scan_non_contiguous (Hillis-Steele, step i adding the value of the member i ranks
// below), then the last member's sum to every member.
template <typename T, typename Op>
T reduce_group(coalesced_group const& group, T value, Op& op) {
  unsigned const mask = group.get_mask();
  if (group.size() == 32U) {
    T out = value;
    for (unsigned step = 16U; step > 0U; step >>= 1U) {
      out = op(out, __shfl_xor_sync(0xFFFFFFFFU, out, static_cast<int>(step), 32));
    }
    return out;
  }
  unsigned const rank = group.thread_rank();
  T out = value;
  for (unsigned i = 1; i < group.size(); i <<= 1U) {
    unsigned const source = i <= rank ? __fns(mask, 0, static_cast<int>(rank - i) + 1) : laneid();
    T const other = __shfl_sync(mask, out, static_cast<int>(source), 32);
    if (i <= rank) out = op(out, other);
  }
  unsigned const last = 31U - static_cast<unsigned>(__clz(static_cast<int>(mask)));
  return __shfl_sync(mask, out, static_cast<int>(last), 32);
}

}  // namespace details

/// cg::reduce(group, value, op): "performs a reduction operation on the data provided by each
/// thread named in the group passed in", for tiles and coalesced groups ("This group does not
/// exclusively represent a tile" otherwise, as the toolkit's static_assert says).
template <typename TyGroup, typename TyVal, typename TyFn>
auto reduce(TyGroup const& group, TyVal&& value, TyFn&& op) -> decltype(op(value, value)) {
  static_assert(details::reduce_group_supported<std::remove_cv_t<TyGroup>>::value,
                "This group does not exclusively represent a tile");
  using value_type = std::remove_cv_t<std::remove_reference_t<TyVal>>;
  static_assert(std::is_same_v<value_type, std::decay_t<decltype(op(value, value))>>,
                "Operator input and output types differ");
  return details::reduce_group(group, static_cast<value_type>(value), op);
}

/// reduce_store_async(group, dst, value, op): the reduction, stored by the group's first thread.
template <typename TyGroup, typename TyVal, typename TyInputVal, typename TyFn>
void reduce_store_async(TyGroup const& group, TyVal* dst, TyInputVal&& value, TyFn&& op) {
  auto const result = reduce(group, static_cast<TyInputVal&&>(value), op);
  if (group.thread_rank() == 0) *dst = result;
}

}  // namespace cooperative_groups

// NOLINTEND(readability-identifier-naming,bugprone-reserved-identifier,cert-dcl37-c)
