// The gradient-accumulation loop's kernels: its state reset, the advance that ends each
// micro-batch (and feeds the conditional loop its flag), and the copy of one micro-batch's slice
// of an input that holds all of them. One thread each for the first two: they touch a few words.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/check.hpp>

#include "train/micro_batch_kernels.hpp"

namespace graphstep::train::detail {
namespace {

constexpr int copy_threads = 256;
constexpr std::size_t max_copy_blocks = 1024;

__global__ void begin_kernel(micro_batch_state* state, unsigned int in_loop) {
  state->index = 0U;
  state->more = in_loop > 0U ? 1U : 0U;
  state->loss_sum = 0.0F;
}

__global__ void advance_kernel(micro_batch_state* state, float const* micro_batch_loss,
                               unsigned int micro_batches, unsigned int in_loop) {
  if (micro_batch_loss != nullptr) state->loss_sum = __fadd_rn(state->loss_sum, *micro_batch_loss);
  unsigned int const next = state->index + 1U;
  state->index = next;
  state->more = next < in_loop ? 1U : 0U;
  if (next == micro_batches) {
    state->loss = __fdiv_rn(state->loss_sum, static_cast<float>(micro_batches));
  }
}

// Four bytes at a time where both ends and the size allow it, else one.
__global__ void copy_slice_kernel(unsigned char const* all, unsigned char* into, std::size_t bytes,
                                  unsigned int const* index) {
  unsigned char const* from = all + static_cast<std::size_t>(*index) * bytes;
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t const first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool const words = (reinterpret_cast<std::uintptr_t>(from) % 4 == 0) &&
                     (reinterpret_cast<std::uintptr_t>(into) % 4 == 0) && bytes % 4 == 0;
  if (words) {
    auto const* source = reinterpret_cast<std::uint32_t const*>(from);
    auto* target = reinterpret_cast<std::uint32_t*>(into);
    for (std::size_t i = first; i < bytes / 4; i += stride) target[i] = source[i];
  } else {
    for (std::size_t i = first; i < bytes; i += stride) into[i] = from[i];
  }
}

}  // namespace

void launch_micro_batch_begin(micro_batch_state* state, int in_loop, cuda::stream_view stream) {
  begin_kernel<<<1, 1, 0, stream.get()>>>(state, static_cast<unsigned int>(in_loop));
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_micro_batch_advance(micro_batch_state* state, float const* micro_batch_loss,
                                int micro_batches, int in_loop, cuda::stream_view stream) {
  advance_kernel<<<1, 1, 0, stream.get()>>>(state, micro_batch_loss,
                                            static_cast<unsigned int>(micro_batches),
                                            static_cast<unsigned int>(in_loop));
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void launch_copy_slice(void const* all, void* into, std::size_t bytes, unsigned int const* index,
                       cuda::stream_view stream) {
  std::size_t const units = bytes % 4 == 0 ? bytes / 4 : bytes;
  std::size_t blocks = (units + copy_threads - 1) / copy_threads;
  if (blocks > max_copy_blocks) blocks = max_copy_blocks;
  copy_slice_kernel<<<static_cast<unsigned>(blocks), copy_threads, 0, stream.get()>>>(
      static_cast<unsigned char const*>(all), static_cast<unsigned char*>(into), bytes, index);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train::detail
