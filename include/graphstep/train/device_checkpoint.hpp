#pragma once

/// @file train/device_checkpoint.hpp
/// @brief Device memory into a `train::checkpoint` and back: the tensors a captured step keeps
/// at fixed addresses, copied between replays without touching the graphs.

#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/tensor.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <string>

namespace graphstep::train {

/// @brief Adds `tensor` to `into` under its name, of its dtype and shape: its elements copied
/// after the work enqueued on `stream` so far (synchronizes `stream`). Not inside a capture.
/// @throws usage_error (an unnamed view, a null or misaligned pointer, a capturing stream, what
/// `checkpoint::add_tensor` refuses), cuda_error
void add_device_tensor(checkpoint& into, tensor_view const& tensor, cuda::stream_view stream);

/// @brief Copies the tensor of `from` named as `tensor`, checked to be of its dtype and shape,
/// into it in the order of `stream` (synchronizes `stream`, so `from` may go away on return).
/// Not inside a capture: graphs captured before it read the loaded values at their next replay.
/// @throws usage_error (an unnamed view, a null or misaligned pointer, a capturing stream, a
/// missing tensor or one of another dtype or shape, named with both layouts), cuda_error
void load_device_tensor(checkpoint const& from, tensor_view const& tensor,
                        cuda::stream_view stream);

/// @brief Adds every tensor of `buffer` to `into` as `<prefix>/<name>`, of its dtype and shape
/// (a model's weights, or its gradients): one copy of the whole buffer after the work enqueued
/// on `stream` so far (synchronizes `stream`). Not inside a capture. Nothing is added when a
/// name is taken already.
/// @throws usage_error (a moved-from buffer, a capturing stream, a name already in `into`),
/// cuda_error
void add_device_tensors(checkpoint& into, std::string const& prefix,
                        memory::parameter_buffer const& buffer, cuda::stream_view stream);

/// @brief Copies every tensor of `buffer`'s layout from `<prefix>/<name>` of `from` to its
/// slot of `buffer`, in the order of `stream` (synchronizes `stream`). Every entry is checked
/// before any is copied: a checkpoint of another layout (a tensor missing, of another dtype or
/// shape) is refused naming that tensor and both layouts, and the buffer is left as it was.
/// The gaps between slots are not written. Not inside a capture: graphs captured before it
/// read the loaded values at their next replay.
/// @throws usage_error (a moved-from buffer, a capturing stream, a missing or mismatched
/// tensor), cuda_error
void load_device_tensors(checkpoint const& from, std::string const& prefix,
                         memory::parameter_buffer const& buffer, cuda::stream_view stream);

}  // namespace graphstep::train
