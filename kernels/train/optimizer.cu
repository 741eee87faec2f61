// Multi-tensor SGD and Adam: one launch updates every parameter tensor, one block per chunk of
// the table planned on the host. Step count, schedule (or the learning rate the host writes),
// loss scale and whether the step is skipped are read from device memory, so a captured step
// follows them without re-capture.

#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>

#include "train/train_kernels.hpp"

namespace graphstep::train::detail {
namespace {

constexpr int update_threads = 256;

__global__ void advance_step_kernel(optimizer_device_state* state, float const* loss_scale,
                                    unsigned int const* all_finite) {
  bool const skip = all_finite != nullptr && *all_finite == 0;
  state->skipped = skip ? 1U : 0U;
  if (skip) return;  // as GradScaler skips optimizer.step(): the step count stays
  state->inv_loss_scale = loss_scale != nullptr ? 1.0F / *loss_scale : 1.0F;
  state->step += 1;
}

__global__ void sgd_kernel(tensor_slot const* slots, tensor_chunk const* chunks,
                           optimizer_device_state const* state, train::sgd_options options) {
  if (state->skipped != 0) return;
  tensor_chunk const chunk = chunks[blockIdx.x];
  tensor_slot const slot = slots[chunk.tensor];
  std::int64_t const step = state->step;
  float const lr =
      state->learning_rate != nullptr ? *state->learning_rate : state->schedule.at(step);
  float const inv_scale = state->inv_loss_scale;
  for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
    std::uint64_t const at = chunk.begin + i;
    float value = slot.value[at];
    float g = slot.gradient[at] * inv_scale + options.weight_decay * value;
    if (options.momentum != 0.0F) {
      float const buffer =
          step == 1 ? g : options.momentum * slot.state1[at] + (1.0F - options.dampening) * g;
      slot.state1[at] = buffer;
      g = options.nesterov ? g + options.momentum * buffer : buffer;
    }
    value -= lr * g;
    slot.value[at] = value;
  }
}

__global__ void adam_kernel(tensor_slot const* slots, tensor_chunk const* chunks,
                            optimizer_device_state const* state, train::adam_options options) {
  if (state->skipped != 0) return;
  tensor_chunk const chunk = chunks[blockIdx.x];
  tensor_slot const slot = slots[chunk.tensor];
  std::int64_t const step = state->step;
  float const lr =
      state->learning_rate != nullptr ? *state->learning_rate : state->schedule.at(step);
  float const inv_scale = state->inv_loss_scale;
  float const correction1 = 1.0F - powf(options.beta1, static_cast<float>(step));
  float const correction2 = 1.0F - powf(options.beta2, static_cast<float>(step));
  for (std::uint32_t i = threadIdx.x; i < chunk.count; i += blockDim.x) {
    std::uint64_t const at = chunk.begin + i;
    float value = slot.value[at];
    float const g = slot.gradient[at] * inv_scale + options.weight_decay * value;
    float const m = options.beta1 * slot.state1[at] + (1.0F - options.beta1) * g;
    float const v = options.beta2 * slot.state2[at] + (1.0F - options.beta2) * g * g;
    slot.state1[at] = m;
    slot.state2[at] = v;
    value -= lr * (m / correction1) / (sqrtf(v / correction2) + options.epsilon);
    slot.value[at] = value;
  }
}

}  // namespace

void launch_advance_step(optimizer_device_state* state, float const* loss_scale,
                         unsigned int const* all_finite, cuda::stream_view stream) {
  advance_step_kernel<<<1, 1, 0, stream.get()>>>(state, loss_scale, all_finite);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_sgd(tensor_slot const* slots, tensor_chunk const* chunks, std::size_t chunk_count,
                optimizer_device_state const* state, train::sgd_options const& options,
                cuda::stream_view stream) {
  sgd_kernel<<<static_cast<unsigned>(chunk_count), update_threads, 0, stream.get()>>>(
      slots, chunks, state, options);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_adam(tensor_slot const* slots, tensor_chunk const* chunks, std::size_t chunk_count,
                 optimizer_device_state const* state, train::adam_options const& options,
                 cuda::stream_view stream) {
  adam_kernel<<<static_cast<unsigned>(chunk_count), update_threads, 0, stream.get()>>>(
      slots, chunks, state, options);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train::detail
