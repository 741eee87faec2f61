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
// simulator sets before it runs a thread of a kernel (sim/src/launch.cpp).
#ifndef __STORAGE__
#define __STORAGE__ extern thread_local
#endif

// NOLINTEND(bugprone-reserved-identifier,cert-dcl*,readability-non-const-parameter)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <device_launch_parameters.h>  // cuda_runtime.h includes it only for nvcc
#include <math.h>  // NOLINT: device code calls isfinite, isnan, ... unqualified, as the C names

#include <cmath>
#include <cstring>
#include <type_traits>

#include "graphstep/sim/kernel_task.hpp"
#include "graphstep/sim/launch.hpp"

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
unsigned lane_id() noexcept;
void* warp_slot(unsigned lane) noexcept;  // 16 bytes per lane, for warp-level exchanges
void* dynamic_shared_memory() noexcept;
[[noreturn]] void trap(char const* what);
[[noreturn]] void device_assert(char const* expression, char const* file, unsigned line);

template <typename T>
T* dynamic_shared() noexcept {
  return static_cast<T*>(dynamic_shared_memory());
}

// Every lane of the warp writes `value`, then reads the value of the lane `source(lane)` picks.
template <typename T, typename Source>
T warp_exchange(unsigned mask, T value, Source source) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16,
                "warp intrinsics move values of up to 16 bytes");
  unsigned const lane = lane_id();
  std::memcpy(warp_slot(lane), &value, sizeof(T));
  sync_warp(mask);
  T out;
  std::memcpy(&out, warp_slot(source(lane)), sizeof(T));
  sync_warp(mask);  // no lane overwrites its slot before every lane has read
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
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  unsigned const lane = ::graphstep::sim::detail::lane_id();
  unsigned bits = 0;
  for (unsigned other = 0; other < 32; ++other) {
    if ((mask & (1U << other)) == 0U) continue;
    int const vote = ::graphstep::sim::detail::warp_exchange(mask, predicate != 0 ? 1 : 0,
                                                             [&](unsigned) { return other; });
    if (vote != 0) bits |= 1U << other;
  }
  static_cast<void>(lane);
  return bits;
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
template <typename T>
T __ldg(T const* address) {
  return *address;
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
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}

// cudaGraphSetConditional from device code (the runtime API has it for device code only).
inline void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value) {
  ::graphstep::sim::detail::set_conditional_from_device(handle, value);
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
