// The mixed-precision AdamW: fp32 master weights and moments, bf16/fp16/fp32 model weights and
// gradients, one block per chunk of the table planned on the host. The step's values (learning
// rate, bias corrections, loss scale, clip factor, skip) are decided by one block on the device
// and read by the update, so a captured step follows them without re-capture.
//
// The element math uses the _rn intrinsics, which nvcc never contracts into fused multiply-adds:
// the device then computes exactly the operations of reference::mixed_adamw_step, and a replay
// matches the host reference bit for bit.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/loss_scaler_options.hpp>
#include <graphstep/train/mixed_precision.hpp>

#include "detail/element_conversion.cuh"
#include "train/mixed_adamw_kernels.hpp"

namespace graphstep::train::detail {
namespace {

constexpr int block_threads = 256;

// Rounded fp32 operations that are never fused into a multiply-add, so that the update rounds
// as the host reference does.
__device__ __forceinline__ float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ float sub_rn(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ __forceinline__ float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}

__device__ __forceinline__ float load(void const* data, std::int32_t type, std::uint64_t at) {
  switch (static_cast<dtype>(type)) {
    case dtype::float32: return static_cast<float const*>(data)[at];
    case dtype::float16: return graphstep::detail::to_float(static_cast<__half const*>(data)[at]);
    case dtype::bfloat16:
      return graphstep::bfloat16_to_float(static_cast<std::uint16_t const*>(data)[at]);
    case dtype::int32:
    case dtype::uint8: break;  // validate(parameter) refuses integer tensors
  }
  return 0.0F;
}

__device__ __forceinline__ float inverse_loss_scale(float const* loss_scale) {
  return loss_scale != nullptr ? div_rn(1.0F, *loss_scale) : 1.0F;
}

// Sums a block's values in a fixed order: strided per thread, then a tree in shared memory.
__device__ float block_sum(float value) {
  __shared__ float sums[block_threads];
  sums[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = block_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] = add_rn(sums[threadIdx.x], sums[threadIdx.x + half]);
    __syncthreads();
  }
  return sums[0];
}

__global__ void master_init_kernel(mixed_tensor_slot const* slots, tensor_chunk const* chunks) {
  tensor_chunk const chunk = chunks[blockIdx.x];
  mixed_tensor_slot const slot = slots[chunk.tensor];
  for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
    std::uint64_t const at = chunk.begin + i;
    slot.master[at] = load(slot.value, slot.type, at);
  }
}

__global__ void norm_partials_kernel(mixed_tensor_slot const* slots, tensor_chunk const* chunks,
                                     float const* loss_scale, float* partials) {
  tensor_chunk const chunk = chunks[blockIdx.x];
  mixed_tensor_slot const slot = slots[chunk.tensor];
  float const inv_scale = inverse_loss_scale(loss_scale);
  float sum = 0.0F;
  for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
    float const g = mul_rn(load(slot.gradient, slot.type, chunk.begin + i), inv_scale);
    sum = add_rn(sum, mul_rn(g, g));
  }
  float const total = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void finalize_kernel(mixed_adamw_device_state* state, float const* partials,
                                std::uint32_t partial_count, float const* loss_scale,
                                unsigned int const* all_finite,
                                train::mixed_adamw_options options) {
  float sum = 0.0F;
  for (std::uint32_t i = threadIdx.x; i < partial_count; i += blockDim.x) {
    sum = add_rn(sum, partials[i]);
  }
  float const total = block_sum(sum);
  if (threadIdx.x != 0) return;
  float const norm = partial_count > 0 ? sqrt_rn(total) : 0.0F;
  bool const skip = train::skips_step(all_finite == nullptr || *all_finite != 0U, norm,
                                      options.max_grad_norm, options.skip_norm);
  state->apply = skip ? 0U : 1U;
  state->gradient_norm = norm;
  if (skip) {
    state->skipped_steps += 1U;
    return;
  }
  std::int64_t const step = state->step + 1;
  state->step = step;
  state->beta1_power *= static_cast<double>(options.beta1);
  state->beta2_power *= static_cast<double>(options.beta2);
  state->lr = state->learning_rate != nullptr ? *state->learning_rate : state->schedule.at(step);
  state->bias_correction1 = static_cast<float>(1.0 - state->beta1_power);
  state->sqrt_bias_correction2 = sqrt_rn(static_cast<float>(1.0 - state->beta2_power));
  state->inv_loss_scale = inverse_loss_scale(loss_scale);
  state->clip_factor =
      train::gradient_clip_factor(norm, options.max_grad_norm, options.clip_epsilon);
}

__global__ void adamw_kernel(mixed_tensor_slot const* slots, tensor_chunk const* chunks,
                             mixed_adamw_device_state const* state,
                             train::mixed_adamw_options options) {
  if (state->apply == 0U) return;  // eager, or captured where no conditional node skips it
  tensor_chunk const chunk = chunks[blockIdx.x];
  mixed_tensor_slot const slot = slots[chunk.tensor];
  std::uint64_t const step = static_cast<std::uint64_t>(state->step);
  std::uint64_t const seed = state->seed;
  float const inv_scale = state->inv_loss_scale;
  float const clip = state->clip_factor;
  float const sqrt_c2 = state->sqrt_bias_correction2;
  float const lr = mul_rn(state->lr, slot.lr_multiplier);
  float const decay = sub_rn(1.0F, mul_rn(lr, slot.weight_decay));
  float const step_size = div_rn(lr, state->bias_correction1);
  float const one_minus_beta1 = sub_rn(1.0F, options.beta1);
  float const one_minus_beta2 = sub_rn(1.0F, options.beta2);
  for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
    std::uint64_t const at = chunk.begin + i;
    float g = mul_rn(load(slot.gradient, slot.type, at), inv_scale);
    g = mul_rn(g, clip);
    float value = mul_rn(slot.master[at], decay);
    float const m = add_rn(mul_rn(options.beta1, slot.exp_avg[at]), mul_rn(one_minus_beta1, g));
    float const v =
        add_rn(mul_rn(options.beta2, slot.exp_avg_sq[at]), mul_rn(mul_rn(one_minus_beta2, g), g));
    float const denominator = add_rn(div_rn(sqrt_rn(v), sqrt_c2), options.epsilon);
    value = sub_rn(value, mul_rn(step_size, div_rn(m, denominator)));
    slot.exp_avg[at] = m;
    slot.exp_avg_sq[at] = v;
    slot.master[at] = value;
    switch (static_cast<dtype>(slot.type)) {
      case dtype::float32: static_cast<float*>(slot.value)[at] = value; break;
      case dtype::float16:
        static_cast<__half*>(slot.value)[at] = graphstep::detail::from_float<__half>(value);
        break;
      case dtype::bfloat16:
        if (options.stochastic_rounding) {
          std::uint32_t const bits =
              train::stochastic_rounding_bits(seed, step, slot.first_element + at);
          static_cast<std::uint16_t*>(slot.value)[at] = graphstep::bfloat16_stochastic(value, bits);
        } else {
          static_cast<__nv_bfloat16*>(slot.value)[at] =
              graphstep::detail::from_float<__nv_bfloat16>(value);
        }
        break;
      case dtype::int32:
      case dtype::uint8: break;  // validate(parameter) refuses integer tensors
    }
  }
}

}  // namespace

void launch_mixed_master_init(mixed_tensor_slot const* slots, tensor_chunk const* chunks,
                              std::size_t chunk_count, cuda::stream_view stream) {
  master_init_kernel<<<static_cast<unsigned>(chunk_count), block_threads, 0, stream.get()>>>(
      slots, chunks);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_mixed_norm_partials(mixed_tensor_slot const* slots, tensor_chunk const* chunks,
                                std::size_t chunk_count, float const* loss_scale, float* partials,
                                cuda::stream_view stream) {
  norm_partials_kernel<<<static_cast<unsigned>(chunk_count), block_threads, 0, stream.get()>>>(
      slots, chunks, loss_scale, partials);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_mixed_finalize(mixed_adamw_device_state* state, float const* partials,
                           std::size_t partial_count, float const* loss_scale,
                           unsigned int const* all_finite,
                           train::mixed_adamw_options const& options, cuda::stream_view stream) {
  finalize_kernel<<<1, block_threads, 0, stream.get()>>>(
      state, partials, static_cast<std::uint32_t>(partial_count), loss_scale, all_finite, options);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_mixed_adamw(mixed_tensor_slot const* slots, tensor_chunk const* chunks,
                        std::size_t chunk_count, mixed_adamw_device_state const* state,
                        train::mixed_adamw_options const& options, cuda::stream_view stream) {
  adamw_kernel<<<static_cast<unsigned>(chunk_count), block_threads, 0, stream.get()>>>(
      slots, chunks, state, options);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train::detail
