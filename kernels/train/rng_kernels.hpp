#pragma once

/// @file detail/rng_kernels.hpp
/// @brief Launch wrappers of the capture-safe generator's kernels (kernels/rng.cu) that the
/// host code calls directly: the offset advance and the fills (fp32, bytes, fp16 and bf16). Host
/// C++: includable from any .cpp file.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/train/capture_safe_rng.hpp>

namespace graphstep::train::detail {

/// @brief Enqueues the kernel that adds `counters` to the device offset `state[1]`; captured,
/// it advances the offset on every replay.
/// @throws cuda_error (launch failure)
void launch_advance_offset(std::uint64_t* state, std::uint64_t counters, cuda::stream_view stream);

/// @brief Enqueue the fills of `capture_safe_rng` (n > 0, arguments already checked): element
/// 4t + j from word j of the Philox block at the device offset + `rng.base` + t, through the
/// transforms of train/random_fill.hpp.
/// @throws cuda_error (launch failure)
void launch_uniform(float* out, std::size_t n, float low, float high, philox_args rng,
                    cuda::stream_view stream);
void launch_normal(float* out, std::size_t n, float mean, float stddev, philox_args rng,
                   cuda::stream_view stream);
void launch_bernoulli(float* out, std::size_t n, float p, philox_args rng,
                      cuda::stream_view stream);
void launch_bernoulli(std::uint8_t* out, std::size_t n, float p, philox_args rng,
                      cuda::stream_view stream);

/// @brief The same fills into n elements of `type`, float16 or bfloat16: the fp32 fill's values,
/// from the same words, rounded to nearest even (`rounded_transform` of train/random_fill.hpp).
/// @throws cuda_error (launch failure)
void launch_uniform(void* out, dtype type, std::size_t n, float low, float high, philox_args rng,
                    cuda::stream_view stream);
void launch_normal(void* out, dtype type, std::size_t n, float mean, float stddev, philox_args rng,
                   cuda::stream_view stream);
void launch_bernoulli(void* out, dtype type, std::size_t n, float p, philox_args rng,
                      cuda::stream_view stream);

}  // namespace graphstep::train::detail
