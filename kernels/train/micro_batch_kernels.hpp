#pragma once

// Launch wrappers of the gradient-accumulation loop (kernels/train/micro_batch_loop.cu) and the
// state they share with the host. Plain C++: host code includes it without nvcc.

#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>

namespace graphstep::train::detail {

/// The loop's device state: the micro-batch index, the flag the conditional loop reads, the
/// running loss sum and the last step's mean loss.
struct micro_batch_state {
  unsigned int index{0};
  unsigned int more{0};
  float loss_sum{0.0F};
  float loss{0.0F};
};

/// index = 0, more = (in_loop > 0), loss_sum = 0. `in_loop`: the micro-batches the device loop
/// runs (K, or K - 1 when the last runs after the loop).
void launch_micro_batch_begin(micro_batch_state* state, int in_loop, cuda::stream_view stream);
/// loss_sum += *micro_batch_loss (when not null); ++index; more = index < in_loop; after the
/// last of all K, loss = loss_sum / K.
void launch_micro_batch_advance(micro_batch_state* state, float const* micro_batch_loss,
                                int micro_batches, int in_loop, cuda::stream_view stream);
/// into[0, bytes) = all[index · bytes, (index + 1) · bytes).
void launch_copy_slice(void const* all, void* into, std::size_t bytes, unsigned int const* index,
                       cuda::stream_view stream);

}  // namespace graphstep::train::detail
