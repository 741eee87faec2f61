#pragma once

/// @file
/// @brief What a CUDA source needs to run on the simulated device; graphstep::rewrite_launches
/// includes it first in every rewritten .cu file.
///
/// The toolkit's headers compile as host C++ (crt/host_defines.h turns __global__, __device__
/// and __host__ into nothing under a host compiler); this header adds what only nvcc provides:
/// the built-in indices, __shared__ storage per block, barriers, warp intrinsics, atomics, the
/// device math a kernel commonly calls, and the launch route (launch.hpp).

// The names below are CUDA's (double underscores and all), and so are its signatures.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl*,readability-non-const-parameter)

// Under a host compiler crt/host_defines.h defines __shared__ as nothing unless it is defined
// already, which would make a shared array a per-thread local: a block's threads run on one host
// thread, one block at a time, so thread-local storage is per-block storage.
#ifndef __shared__
#define __shared__ static thread_local
#endif
// The built-in variables threadIdx, blockIdx, blockDim, gridDim and warpSize: the toolkit
// declares them in device_launch_parameters.h with this storage class, `extern const` unless it
// is defined first; only nvcc defines them. Here they are variables of each host thread that the
// simulator sets before it runs a thread of a kernel (sim/src/launch.cpp). Kernels see them
// read-only, as on a GPU, and as `__thread` (no C++ initialization wrapper): a read is one load,
// which the access instrumentation of the race checker skips (it skips read-only objects). They
// do not change while a thread runs: the simulator restores them when it resumes a thread.
#ifndef __STORAGE__
#define __STORAGE__ extern __thread const
#endif

// NOLINTEND(bugprone-reserved-identifier,cert-dcl*,readability-non-const-parameter)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <device_launch_parameters.h>  // cuda_runtime.h includes it only for nvcc
#include <math.h>  // NOLINT: device code calls isfinite, isnan, ... unqualified, as the C names

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "graphstep/sim/kernel_task.hpp"
#include "graphstep/sim/launch.hpp"
#include "graphstep/sim/symbol.hpp"

// A hint for nvcc's code generation means nothing to the host compiler: __launch_bounds__
// (defined by crt/host_defines.h only for nvcc) expands to nothing, and the build compiles
// rewritten sources with -Wno-unknown-pragmas for `#pragma unroll`.
#ifndef __launch_bounds__
// NOLINTNEXTLINE(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp)
#define __launch_bounds__(...)
#endif

namespace graphstep::sim::detail {

void sync_block();
int sync_block_count(int predicate);
void sync_warp(unsigned mask);
// A shuffled value's bytes, passed and returned in registers: no address of a kernel's local
// escapes, so the race checker's instrumentation has no access of it to record.
struct warp_value {
  std::uint64_t low;
  std::uint64_t high;
};
// The warp barrier of a shuffle: this lane gives `value` and, once every lane of `mask` has come,
// receives what lane `from` gave. A kernel fault if lane `from`, other than the caller, has exited.
warp_value exchange_in_warp(unsigned mask, warp_value value, unsigned from);
// The warp barrier of a vote: the lanes of `mask` whose predicate is not 0 (exited lanes vote 0).
unsigned ballot_in_warp(unsigned mask, int predicate);
unsigned lane_id() noexcept;
void* dynamic_shared_memory() noexcept;
[[noreturn]] void trap(char const* what);
[[noreturn]] void device_assert(char const* expression, char const* file, unsigned line);

template <typename T>
T* dynamic_shared() noexcept {
  return static_cast<T*>(dynamic_shared_memory());
}

// Every lane of the warp gives `value`, then gets the value of the lane `source(lane)` picks.
template <typename T, typename Source>
T warp_exchange(unsigned mask, T value, Source source) {
  // The value's bytes move: the toolkit's __half2 and __nv_bfloat162 declare their own copy
  // assignment, so they are not trivially copyable, yet CUDA shuffles them (CUDA Programming
  // Guide, "Warp Shuffle Functions": "T can also be __half or __half2", "__nv_bfloat16 or
  // __nv_bfloat162").
  static_assert(std::is_trivially_destructible_v<T> && sizeof(T) <= 16,
                "warp intrinsics move values of up to 16 bytes");
  warp_value given{};
  std::memcpy(&given, static_cast<void const*>(&value), sizeof(T));
  warp_value const received = exchange_in_warp(mask, given, source(lane_id()));
  T out;
  std::memcpy(static_cast<void*>(&out), &received, sizeof(T));
  return out;
}

// `*address = update(*address, operand)` as one atomic step; returns the old value. Floating
// point goes through its bits (the builtins take integers and pointers only).
template <typename T>
T atomic_update(T* address, T (*update)(T, T), T operand) {
  if constexpr (std::is_floating_point_v<T>) {
    using bits = std::conditional_t<sizeof(T) == 4, unsigned, unsigned long long>;
    auto* const word = reinterpret_cast<bits*>(address);
    bits expected = __atomic_load_n(word, __ATOMIC_RELAXED);
    for (;;) {
      T old;
      std::memcpy(&old, &expected, sizeof(T));
      T const next = update(old, operand);
      bits desired;
      std::memcpy(&desired, &next, sizeof(T));
      if (__atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_RELAXED)) {
        return old;
      }
    }
  } else {
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(address, &old, update(old, operand), false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
    return old;
  }
}

// `*address = update(*address)` as one atomic step on a 16- or 32-bit value that is not an
// arithmetic type (__half, __nv_bfloat16 and their pairs); returns the old value.
template <typename T, typename Update>
T atomic_update_bits(T* address, Update update) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16- or 32-bit values only");
  using bits = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned>;
  auto* const word = reinterpret_cast<bits*>(address);
  bits expected = __atomic_load_n(word, __ATOMIC_RELAXED);
  for (;;) {
    T old{};  // the CUDA types define their copy assignment: copied as bytes
    std::memcpy(static_cast<void*>(&old), &expected, sizeof(T));
    T const next = update(old);
    bits desired;
    std::memcpy(&desired, static_cast<void const*>(&next), sizeof(T));
    if (__atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED)) {
      return old;
    }
  }
}

}  // namespace graphstep::sim::detail

// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl*,readability-non-const-parameter)

// --- synchronization -------------------------------------------------------------------------
inline void __syncthreads() {
  ::graphstep::sim::detail::sync_block();
}
inline int __syncthreads_count(int predicate) {
  return ::graphstep::sim::detail::sync_block_count(predicate);
}
inline int __syncthreads_and(int predicate) {
  return ::graphstep::sim::detail::sync_block_count(predicate != 0 ? 0 : 1) == 0 ? 1 : 0;
}
inline int __syncthreads_or(int predicate) {
  return ::graphstep::sim::detail::sync_block_count(predicate) != 0 ? 1 : 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffU) {
  ::graphstep::sim::detail::sync_warp(mask);
}
// Fences order a thread's own memory operations; threads here never run at the same time.
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
inline void __trap() {
  ::graphstep::sim::detail::trap("__trap() called");
}

// --- warp intrinsics (CUDA Programming Guide, "Warp Shuffle Functions", "Warp Vote
// Functions"): lanes are consecutive linear thread indices of the block, 32 to a warp ----------
template <typename T>
T __shfl_sync(unsigned mask, T value, int source_lane, int width = warpSize) {
  auto const w = static_cast<unsigned>(width);
  return ::graphstep::sim::detail::warp_exchange(mask, value, [&](unsigned lane) {
    return (lane & ~(w - 1U)) + (static_cast<unsigned>(source_lane) & (w - 1U));
  });
}
template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
  auto const w = static_cast<unsigned>(width);
  return ::graphstep::sim::detail::warp_exchange(
      mask, value, [&](unsigned lane) { return (lane & (w - 1U)) >= delta ? lane - delta : lane; });
}
template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
  auto const w = static_cast<unsigned>(width);
  return ::graphstep::sim::detail::warp_exchange(mask, value, [&](unsigned lane) {
    return (lane & (w - 1U)) + delta < w ? lane + delta : lane;
  });
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
  auto const w = static_cast<unsigned>(width);
  return ::graphstep::sim::detail::warp_exchange(mask, value, [&](unsigned lane) {
    unsigned const other = lane ^ static_cast<unsigned>(lane_mask);
    return (other & ~(w - 1U)) == (lane & ~(w - 1U)) ? other : lane;
  });
}
// Every lane named in mask that has not exited takes part ("all non-exited threads named in mask
// must execute the same intrinsic with the same mask", "Warp Vote Functions"); an exited lane
// votes 0.
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::graphstep::sim::detail::ballot_in_warp(mask, predicate);
}
inline int __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == (__ballot_sync(mask, 1)) ? 1 : 0;
}
inline int __any_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) != 0U ? 1 : 0;
}
inline unsigned __activemask() {
  return __ballot_sync(0xffffffffU, 1);
}

// --- atomics (CUDA Programming Guide, "Atomic Functions"): real atomics ----------------------
template <typename T>
T atomicAdd(T* address, T value) {
  return ::graphstep::sim::detail::atomic_update<T>(
      address, [](T a, T b) { return a + b; }, value);
}
template <typename T>
T atomicSub(T* address, T value) {
  return ::graphstep::sim::detail::atomic_update<T>(
      address, [](T a, T b) { return a - b; }, value);
}
template <typename T>
T atomicExch(T* address, T value) {
  return ::graphstep::sim::detail::atomic_update<T>(
      address, [](T, T b) { return b; }, value);
}
template <typename T>
T atomicMin(T* address, T value) {
  return ::graphstep::sim::detail::atomic_update<T>(
      address, [](T a, T b) { return b < a ? b : a; }, value);
}
template <typename T>
T atomicMax(T* address, T value) {
  return ::graphstep::sim::detail::atomic_update<T>(
      address, [](T a, T b) { return a < b ? b : a; }, value);
}
template <typename T>
T atomicAnd(T* address, T value) {
  return ::graphstep::sim::detail::atomic_update<T>(
      address, [](T a, T b) { return a & b; }, value);
}
template <typename T>
T atomicOr(T* address, T value) {
  return ::graphstep::sim::detail::atomic_update<T>(
      address, [](T a, T b) { return a | b; }, value);
}
template <typename T>
T atomicXor(T* address, T value) {
  return ::graphstep::sim::detail::atomic_update<T>(
      address, [](T a, T b) { return a ^ b; }, value);
}
inline unsigned atomicInc(unsigned* address, unsigned limit) {
  unsigned old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(address, &old, old >= limit ? 0U : old + 1U, false,
                                      __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}
inline unsigned atomicDec(unsigned* address, unsigned limit) {
  unsigned old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(address, &old, (old == 0U || old > limit) ? limit : old - 1U,
                                      false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}
// Half-precision additions (cuda_fp16.h and cuda_bf16.h, atomicAdd): the sum rounded to nearest
// even in the element type (fp32 holds the exact sum of two such values, so one rounding). For a
// pair, "the atomicity ... is guaranteed separately for each of the two elements"; here the
// pair is updated as one 32-bit word, which is atomic for each element too.
inline __half atomicAdd(__half* address, __half value) {
  return ::graphstep::sim::detail::atomic_update_bits(address, [value](__half old) {
    return __float2half_rn(__half2float(old) + __half2float(value));
  });
}
// NOLINTNEXTLINE(performance-unnecessary-value-param): CUDA's signature
inline __half2 atomicAdd(__half2* address, __half2 value) {
  return ::graphstep::sim::detail::atomic_update_bits(address, [value](__half2 const& old) {
    return __floats2half2_rn(__low2float(old) + __low2float(value),
                             __high2float(old) + __high2float(value));
  });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 value) {
  return ::graphstep::sim::detail::atomic_update_bits(address, [value](__nv_bfloat16 old) {
    return __float2bfloat16_rn(__bfloat162float(old) + __bfloat162float(value));
  });
}
// NOLINTNEXTLINE(performance-unnecessary-value-param): CUDA's signature
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* address, __nv_bfloat162 value) {
  return ::graphstep::sim::detail::atomic_update_bits(address, [value](__nv_bfloat162 const& old) {
    return __floats2bfloat162_rn(__low2float(old) + __low2float(value),
                                 __high2float(old) + __high2float(value));
  });
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
  return compare;
}

// --- device math the host headers lack --------------------------------------------------------
inline float rsqrtf(float x) {
  return 1.0F / std::sqrt(x);
}
inline double rsqrt(double x) {
  return 1.0 / std::sqrt(x);
}
inline float __expf(float x) {
  return std::exp(x);
}
inline float __logf(float x) {
  return std::log(x);
}
inline float __fdividef(float x, float y) {
  return x / y;
}
inline float __saturatef(float x) {
  return x < 0.0F ? 0.0F : (x > 1.0F ? 1.0F : x);
}
inline float __fmaf_rn(float a, float b, float c) {
  return std::fma(a, b, c);
}
// The rounded operations nvcc never merges into a multiply-add ("\note_nofma",
// crt/device_functions.h): kept out of line, so that each rounds on its own wherever it is
// called from a kernel compiled with contraction on (GRAPHSTEP_SIM_FMA).
[[gnu::noinline]] inline float __fadd_rn(float a, float b) {
  return a + b;
}
[[gnu::noinline]] inline float __fsub_rn(float a, float b) {
  return a - b;
}
[[gnu::noinline]] inline float __fmul_rn(float a, float b) {
  return a * b;
}
[[gnu::noinline]] inline float __fdiv_rn(float a, float b) {
  return a / b;
}
[[gnu::noinline]] inline float __fsqrt_rn(float a) {
  return std::sqrt(a);
}
// --- cache-hinted loads and stores (CUDA Programming Guide, "Read-Only Data Cache Load
// Function" and "Load Functions Using Cache Hints", "Store Functions Using Cache Hints"): a
// cache hint changes where a GPU keeps the line, never the value, so each is a plain access
// here. Declared for the types sm_32_intrinsics.h declares them for (every integer and floating
// type, their 2- and 4-vectors up to 16 bytes) and those cuda_fp16.h and cuda_bf16.h add
// (__half, __half2, __nv_bfloat16, __nv_bfloat162); another type is a compile error, as it is
// for nvcc. __ldg reads through the read-only cache: the data must not change while the kernel
// runs, which nothing here checks.
namespace graphstep::sim::detail {
template <typename T, typename... Types>
constexpr bool one_of = (std::is_same_v<T, Types> || ...);
template <typename T>
constexpr bool cache_hinted =
    one_of<T, char, signed char, unsigned char, short, unsigned short, int, unsigned, long,
           unsigned long, long long, unsigned long long, float, double, char2, char4, uchar2,
           uchar4, short2, short4, ushort2, ushort4, int2, int4, uint2, uint4, longlong2,
           ulonglong2, float2, float4, double2, __half, __half2, __nv_bfloat16, __nv_bfloat162>;
template <typename T>
using cache_hinted_t = std::enable_if_t<cache_hinted<std::remove_cv_t<T>>, std::remove_cv_t<T>>;
template <typename T>
struct identity {
  using type = T;
};
}  // namespace graphstep::sim::detail

#define GRAPHSTEP_SIM_CACHE_HINTED_LOAD(name)                          \
  template <typename T>                                                \
  ::graphstep::sim::detail::cache_hinted_t<T> name(T const* address) { \
    return *address;                                                   \
  }
#define GRAPHSTEP_SIM_CACHE_HINTED_STORE(name)                                        \
  template <typename T, typename = ::graphstep::sim::detail::cache_hinted_t<T>>       \
  void name(T* address, typename ::graphstep::sim::detail::identity<T>::type value) { \
    *address = value;                                                                 \
  }
GRAPHSTEP_SIM_CACHE_HINTED_LOAD(__ldg)    // ld.global.nc
GRAPHSTEP_SIM_CACHE_HINTED_LOAD(__ldcg)   // ld.global.cg: cache in L2, not L1
GRAPHSTEP_SIM_CACHE_HINTED_LOAD(__ldca)   // ld.global.ca: cache at all levels
GRAPHSTEP_SIM_CACHE_HINTED_LOAD(__ldcs)   // ld.global.cs: streaming, likely accessed once
GRAPHSTEP_SIM_CACHE_HINTED_LOAD(__ldlu)   // ld.global.lu: last use
GRAPHSTEP_SIM_CACHE_HINTED_LOAD(__ldcv)   // ld.global.cv: do not cache, fetch again
GRAPHSTEP_SIM_CACHE_HINTED_STORE(__stwb)  // st.global.wb: write back
GRAPHSTEP_SIM_CACHE_HINTED_STORE(__stcg)  // st.global.cg: cache in L2, not L1
GRAPHSTEP_SIM_CACHE_HINTED_STORE(__stcs)  // st.global.cs: streaming
GRAPHSTEP_SIM_CACHE_HINTED_STORE(__stwt)  // st.global.wt: write through to system memory
#undef GRAPHSTEP_SIM_CACHE_HINTED_LOAD
#undef GRAPHSTEP_SIM_CACHE_HINTED_STORE

// --- min and max (CUDA Math API, "Integer Mathematical Functions" and the overloads of
// crt/math_functions.hpp, which nvcc provides in device and host code): a mixed signed and
// unsigned pair compares as the unsigned type, a float with a double as doubles. The host
// compiler has only std::min and std::max, which refuse mixed types. --------------------------
#define GRAPHSTEP_SIM_MIN_MAX(result, a_type, b_type)                                \
  inline result min(a_type a, b_type b) {                                            \
    return static_cast<result>(a) < static_cast<result>(b) ? static_cast<result>(a)  \
                                                           : static_cast<result>(b); \
  }                                                                                  \
  inline result max(a_type a, b_type b) {                                            \
    return static_cast<result>(a) < static_cast<result>(b) ? static_cast<result>(b)  \
                                                           : static_cast<result>(a); \
  }
GRAPHSTEP_SIM_MIN_MAX(int, int, int)
GRAPHSTEP_SIM_MIN_MAX(unsigned, unsigned, unsigned)
GRAPHSTEP_SIM_MIN_MAX(unsigned, int, unsigned)
GRAPHSTEP_SIM_MIN_MAX(unsigned, unsigned, int)
GRAPHSTEP_SIM_MIN_MAX(long, long, long)
GRAPHSTEP_SIM_MIN_MAX(unsigned long, unsigned long, unsigned long)
GRAPHSTEP_SIM_MIN_MAX(unsigned long, long, unsigned long)
GRAPHSTEP_SIM_MIN_MAX(unsigned long, unsigned long, long)
GRAPHSTEP_SIM_MIN_MAX(long long, long long, long long)
GRAPHSTEP_SIM_MIN_MAX(unsigned long long, unsigned long long, unsigned long long)
GRAPHSTEP_SIM_MIN_MAX(unsigned long long, long long, unsigned long long)
GRAPHSTEP_SIM_MIN_MAX(unsigned long long, unsigned long long, long long)
#undef GRAPHSTEP_SIM_MIN_MAX
// Floating point as fminf/fmin and fmaxf/fmax: a NaN operand gives the other operand.
inline float min(float a, float b) {
  return std::fmin(a, b);
}
inline double min(double a, double b) {
  return std::fmin(a, b);
}
inline double min(float a, double b) {
  return std::fmin(static_cast<double>(a), b);
}
inline double min(double a, float b) {
  return std::fmin(a, static_cast<double>(b));
}
inline float max(float a, float b) {
  return std::fmax(a, b);
}
inline double max(double a, double b) {
  return std::fmax(a, b);
}
inline double max(float a, double b) {
  return std::fmax(static_cast<double>(a), b);
}
inline double max(double a, float b) {
  return std::fmax(a, static_cast<double>(b));
}

// --- clocks (CUDA Programming Guide, "Time Function"): a per-multiprocessor counter that only
// grows; here the host's steady clock in nanoseconds. clock() is the C library's, which also
// only grows within a thread. ----------------------------------------------------------------
inline long long clock64() {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count());
}

inline int __float_as_int(float x) {
  int bits{};
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
inline unsigned __float_as_uint(float x) {
  unsigned bits{};
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
inline float __int_as_float(int bits) {
  float x{};
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
inline float __uint_as_float(unsigned bits) {
  float x{};
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
// --- integer intrinsics (CUDA Math API, "Integer Intrinsics"; crt/device_functions.h,
// sm_30_intrinsics.h, sm_32_intrinsics.h, sm_61_intrinsics.h, crt/sm_70_rt.h) ----------------
// "Returns a value between 0 and 32 inclusive representing the number of set bits."
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
// "Count the number of consecutive leading zero bits, starting at the most significant bit":
// 32 (64) for 0, where the builtin is undefined.
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
// "the least significant bit position is 1 ... __ffs(0) returns 0."
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
inline int __ffsll(long long x) {
  return __builtin_ffsll(x);
}
// "bit N of the return value corresponds to bit 31-N of x" (63-N for __brevll).
inline unsigned __brev(unsigned x) {
  unsigned out = 0;
  for (int bit = 0; bit < 32; ++bit, x >>= 1U) out = (out << 1U) | (x & 1U);
  return out;
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32U) |
         __brev(static_cast<unsigned>(x >> 32U));
}
// The 64-bit value hi:lo shifted, "by the wrapped value of shift (shift & 31)" for _l and _r,
// "by the clamped value of shift (min(shift, 32))" for _lc and _rc; _l and _lc return "the most
// significant 32 bits", _r and _rc "the least significant 32 bits".
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  unsigned long long const joined = (static_cast<unsigned long long>(hi) << 32U) | lo;
  return static_cast<unsigned>((joined << (shift & 31U)) >> 32U);
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
  unsigned long long const joined = (static_cast<unsigned long long>(hi) << 32U) | lo;
  return static_cast<unsigned>((joined << (shift < 32U ? shift : 32U)) >> 32U);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  unsigned long long const joined = (static_cast<unsigned long long>(hi) << 32U) | lo;
  return static_cast<unsigned>(joined >> (shift & 31U));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
  unsigned long long const joined = (static_cast<unsigned long long>(hi) << 32U) | lo;
  return static_cast<unsigned>(joined >> (shift < 32U ? shift : 32U));
}
// "tmp64 = ((uint64_t)y << 32) | x; selector0 = (s >> 0) & 0x7; ... res[07:00] =
// tmp64[selector0]" and so on for the four bytes of the result.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long const bytes = (static_cast<unsigned long long>(y) << 32U) | x;
  unsigned out = 0;
  for (unsigned i = 0; i < 4; ++i) {
    unsigned const selector = (s >> (4U * i)) & 0x7U;
    out |= static_cast<unsigned>((bytes >> (8U * selector)) & 0xFFU) << (8U * i);
  }
  return out;
}
// "find the n-th (given by offset) set bit in mask from the base bit. If not found, return
// 0xFFFFFFFF": the PTX ISA's fns counts base itself, upwards for a positive offset, downwards for
// a negative one; offset 0 is base if that bit is set.
inline unsigned __fns(unsigned mask, unsigned base, int offset) {
  if (offset == 0) return (mask >> base & 1U) != 0U ? base : 0xFFFFFFFFU;
  int const step = offset > 0 ? 1 : -1;
  int left = offset > 0 ? offset : -offset;
  for (int bit = static_cast<int>(base); bit >= 0 && bit < 32; bit += step) {
    if ((mask >> static_cast<unsigned>(bit) & 1U) != 0U && --left == 0) {
      return static_cast<unsigned>(bit);
    }
  }
  return 0xFFFFFFFFU;
}
// Four products of byte pairs added to c, in 32-bit arithmetic that wraps: signed bytes with an
// int, unsigned bytes with an unsigned ("Four-way signed int8 dot product with int32
// accumulate").
inline int __dp4a(int a, int b, int c) {
  auto sum = static_cast<unsigned>(c);
  for (unsigned i = 0; i < 4; ++i) {
    auto const x = static_cast<signed char>(static_cast<unsigned>(a) >> (8U * i) & 0xFFU);
    auto const y = static_cast<signed char>(static_cast<unsigned>(b) >> (8U * i) & 0xFFU);
    sum += static_cast<unsigned>(x * y);
  }
  return static_cast<int>(sum);
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (unsigned i = 0; i < 4; ++i) c += (a >> (8U * i) & 0xFFU) * (b >> (8U * i) & 0xFFU);
  return c;
}
inline int __dp4a(char4 a, char4 b, int c) {
  unsigned packed_a = 0;
  unsigned packed_b = 0;
  std::memcpy(&packed_a, &a, sizeof a);
  std::memcpy(&packed_b, &b, sizeof b);
  return __dp4a(static_cast<int>(packed_a), static_cast<int>(packed_b), c);
}
inline unsigned __dp4a(uchar4 a, uchar4 b, unsigned c) {
  unsigned packed_a = 0;
  unsigned packed_b = 0;
  std::memcpy(&packed_a, &a, sizeof a);
  std::memcpy(&packed_b, &b, sizeof b);
  return __dp4a(packed_a, packed_b, c);
}
// The PTX ISA's nanosleep: "The sleep duration is approximated, but guaranteed to be in the
// interval [0, 2*t]": here 0, the thread goes on at once.
inline void __nanosleep(unsigned /*ns*/) {}

// cudaGraphSetConditional from device code (the runtime API has it for device code only).
inline void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value) {
  ::graphstep::sim::detail::set_conditional_from_device(handle, value);
}

// The C++ forms of kernel attribute calls, which cuda_runtime.h declares only for nvcc (`#if
// defined __CUDACC__`): a kernel passed as itself, cast to the C form's const void* as the
// toolkit's templates do.
template <class T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, T* entry) {
  return ::cudaFuncGetAttributes(attributes, reinterpret_cast<void const*>(entry));
}
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<void const*>(entry), attribute, value);
}
template <class T>
cudaError_t cudaFuncGetName(char const** name, T* entry) {
  return ::cudaFuncGetName(name, reinterpret_cast<void const*>(entry));
}
// And of the symbol calls: a __device__, __constant__ or __managed__ variable passed as itself,
// its address taken as the toolkit's templates take it, with their default offset and kind.
template <class T>
cudaError_t cudaMemcpyToSymbol(T const& symbol, void const* src, std::size_t count,
                               std::size_t offset = 0,
                               cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  return ::cudaMemcpyToSymbol(static_cast<void const*>(&symbol), src, count, offset, kind);
}
template <class T>
cudaError_t cudaMemcpyToSymbolAsync(T const& symbol, void const* src, std::size_t count,
                                    std::size_t offset = 0,
                                    cudaMemcpyKind kind = cudaMemcpyHostToDevice,
                                    cudaStream_t stream = nullptr) {
  return ::cudaMemcpyToSymbolAsync(static_cast<void const*>(&symbol), src, count, offset, kind,
                                   stream);
}
template <class T>
cudaError_t cudaMemcpyFromSymbol(void* dst, T const& symbol, std::size_t count,
                                 std::size_t offset = 0,
                                 cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  return ::cudaMemcpyFromSymbol(dst, static_cast<void const*>(&symbol), count, offset, kind);
}
template <class T>
cudaError_t cudaMemcpyFromSymbolAsync(void* dst, T const& symbol, std::size_t count,
                                      std::size_t offset = 0,
                                      cudaMemcpyKind kind = cudaMemcpyDeviceToHost,
                                      cudaStream_t stream = nullptr) {
  return ::cudaMemcpyFromSymbolAsync(dst, static_cast<void const*>(&symbol), count, offset, kind,
                                     stream);
}
template <class T>
cudaError_t cudaGetSymbolAddress(void** devPtr, T const& symbol) {
  return ::cudaGetSymbolAddress(devPtr, static_cast<void const*>(&symbol));
}
template <class T>
cudaError_t cudaGetSymbolSize(std::size_t* size, T const& symbol) {
  return ::cudaGetSymbolSize(size, static_cast<void const*>(&symbol));
}
template <class T>
cudaError_t cudaGraphAddMemcpyNodeToSymbol(cudaGraphNode_t* node, cudaGraph_t graph,
                                           cudaGraphNode_t const* pDependencies,
                                           std::size_t numDependencies, T const& symbol,
                                           void const* src, std::size_t bytes, std::size_t offset,
                                           cudaMemcpyKind kind) {
  return ::cudaGraphAddMemcpyNodeToSymbol(node, graph, pDependencies, numDependencies,
                                          static_cast<void const*>(&symbol), src, bytes, offset,
                                          kind);
}
template <class T>
cudaError_t cudaGraphAddMemcpyNodeFromSymbol(cudaGraphNode_t* node, cudaGraph_t graph,
                                             cudaGraphNode_t const* pDependencies,
                                             std::size_t numDependencies, void* dst,
                                             T const& symbol, std::size_t bytes, std::size_t offset,
                                             cudaMemcpyKind kind) {
  return ::cudaGraphAddMemcpyNodeFromSymbol(node, graph, pDependencies, numDependencies, dst,
                                            static_cast<void const*>(&symbol), bytes, offset, kind);
}
template <class T>
cudaError_t cudaGraphMemcpyNodeSetParamsToSymbol(cudaGraphNode_t node, T const& symbol,
                                                 void const* src, std::size_t count,
                                                 std::size_t offset, cudaMemcpyKind kind) {
  return ::cudaGraphMemcpyNodeSetParamsToSymbol(node, static_cast<void const*>(&symbol), src, count,
                                                offset, kind);
}
template <class T>
cudaError_t cudaGraphMemcpyNodeSetParamsFromSymbol(cudaGraphNode_t node, void* dst, T const& symbol,
                                                   std::size_t count, std::size_t offset,
                                                   cudaMemcpyKind kind) {
  return ::cudaGraphMemcpyNodeSetParamsFromSymbol(node, dst, static_cast<void const*>(&symbol),
                                                  count, offset, kind);
}
template <class T>
cudaError_t cudaGraphExecMemcpyNodeSetParamsToSymbol(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                     T const& symbol, void const* src,
                                                     std::size_t count, std::size_t offset,
                                                     cudaMemcpyKind kind) {
  return ::cudaGraphExecMemcpyNodeSetParamsToSymbol(exec, node, static_cast<void const*>(&symbol),
                                                    src, count, offset, kind);
}
template <class T>
cudaError_t cudaGraphExecMemcpyNodeSetParamsFromSymbol(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                       void* dst, T const& symbol,
                                                       std::size_t count, std::size_t offset,
                                                       cudaMemcpyKind kind) {
  return ::cudaGraphExecMemcpyNodeSetParamsFromSymbol(
      exec, node, dst, static_cast<void const*>(&symbol), count, offset, kind);
}

// nvcc contracts a floating-point multiply and add into one fused multiply-add by default
// (nvcc --help: "--fmad ... enables (disables) the contraction of floating-point multiplies and
// adds/subtracts into floating-point multiply-add operations ... Default value: true"), and
// host code is compiled without it. Kernels here are compiled for the
// host's FMA unit with contraction on, so that a test expecting separately rounded arithmetic
// fails here as it does on a GPU (0.5 - 0.1f * 5 is -7.45e-09 fused, 0 unfused). GCC contracts
// inside a kernel and what it inlines there, in optimized builds; elsewhere a result may round
// as without FMA, which the GPU would not do.
#if defined(GRAPHSTEP_SIM_FMA)
#undef __global__
#if defined(__x86_64__)
#define __global__ __attribute__((target("fma"), optimize("fp-contract=fast")))
#else
#define __global__ __attribute__((optimize("fp-contract=fast")))
#endif
#endif

// NOLINTEND(bugprone-reserved-identifier,cert-dcl*,readability-non-const-parameter)
