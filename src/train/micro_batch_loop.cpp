#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/conditional.hpp>
#include <graphstep/train/micro_batch_loop.hpp>
#include <graphstep/train/micro_batch_plan.hpp>
#include <string>

#include "train/micro_batch_kernels.hpp"

namespace graphstep::train {
namespace {

device_span checked_gradients(device_span gradients, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(gradients.data() != nullptr && !gradients.empty(),
                    "micro_batch_loop: the gradients to accumulate into are empty or null");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "micro_batch_loop: construct it before the capture; it allocates and "
                    "initializes its state, which a capture cannot record");
  return gradients;
}

device_span all_of(memory::parameter_buffer const& gradients) {
  GRAPHSTEP_EXPECTS(gradients.data() != nullptr,
                    "micro_batch_loop: the gradient buffer was moved from");
  return {gradients.data(), dtype::uint8, gradients.bytes()};
}

}  // namespace

micro_batch_loop::micro_batch_loop(int micro_batches, device_span gradients,
                                   cuda::stream_view stream, cuda::memory_resource& resource)
    : micro_batches_{checked_micro_batches(micro_batches)},
      gradients_{checked_gradients(gradients, stream)},
      state_{sizeof(detail::micro_batch_state), stream, resource} {
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(state_.data(), 0, state_.size(), stream.get()));
}

micro_batch_loop::micro_batch_loop(int micro_batches, memory::parameter_buffer const& gradients,
                                   cuda::stream_view stream, cuda::memory_resource& resource)
    : micro_batch_loop{micro_batches, all_of(gradients), stream, resource} {}

unsigned int const* micro_batch_loop::index() const noexcept {
  return &static_cast<detail::micro_batch_state const*>(state_.data())->index;
}

float const* micro_batch_loop::loss() const noexcept {
  return &static_cast<detail::micro_batch_state const*>(state_.data())->loss;
}

void micro_batch_loop::run(cuda::stream_view stream, float const* micro_batch_loss,
                           std::function<void(cuda::stream_view)> const& body) const {
  issue(stream, micro_batch_loss, body, nullptr);
}

void micro_batch_loop::run(cuda::stream_view stream, float const* micro_batch_loss,
                           std::function<void(cuda::stream_view)> const& body,
                           std::function<void(cuda::stream_view)> const& last) const {
  GRAPHSTEP_EXPECTS(static_cast<bool>(last),
                    "micro_batch_loop::run: the last micro-batch's body is required; without "
                    "one, call run(stream, loss, body)");
  issue(stream, micro_batch_loss, body, &last);
}

void micro_batch_loop::begin(cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(!state_.empty(), "micro_batch_loop::begin: the loop was moved from");
  start(stream, micro_batches_);
}

void micro_batch_loop::start(cuda::stream_view stream, int in_loop) const {
  // Zeroed once per optimizer step; every micro-batch adds into the buffer.
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(gradients_.data(), 0, gradients_.bytes(), stream.get()));
  detail::launch_micro_batch_begin(static_cast<detail::micro_batch_state*>(state_.data()), in_loop,
                                   stream);
}

void micro_batch_loop::pass(cuda::stream_view stream, float const* micro_batch_loss,
                            std::function<void(cuda::stream_view)> const& body) const {
  GRAPHSTEP_EXPECTS(static_cast<bool>(body),
                    "micro_batch_loop::pass: the micro-batch body is "
                    "required");
  GRAPHSTEP_EXPECTS(!state_.empty(), "micro_batch_loop::pass: the loop was moved from");
  body(stream);
  detail::launch_micro_batch_advance(static_cast<detail::micro_batch_state*>(state_.data()),
                                     micro_batch_loss, micro_batches_, micro_batches_, stream);
}

void micro_batch_loop::issue(cuda::stream_view stream, float const* micro_batch_loss,
                             std::function<void(cuda::stream_view)> const& body,
                             std::function<void(cuda::stream_view)> const* last) const {
  GRAPHSTEP_EXPECTS(static_cast<bool>(body),
                    "micro_batch_loop::run: the micro-batch body is "
                    "required");
  GRAPHSTEP_EXPECTS(!state_.empty(), "micro_batch_loop::run: the loop was moved from");
  auto* const state = static_cast<detail::micro_batch_state*>(state_.data());
  int const k = micro_batches_;
  int const in_loop = last != nullptr ? k - 1 : k;
  auto const pass = [&](std::function<void(cuda::stream_view)> const& micro_batch,
                        cuda::stream_view on) {
    micro_batch(on);
    detail::launch_micro_batch_advance(state, micro_batch_loss, k, in_loop, on);
  };
  start(stream, in_loop);
  if (!stream.is_capturing()) {
    for (int i = 0; i < in_loop; ++i) pass(body, stream);  // the same kernels, in the same order
  } else if (in_loop > 0) {
    try {
      graphs::capture_while(stream, &state->more, [&](cuda::stream_view on) { pass(body, on); });
    } catch (usage_error const& error) {
      std::string const what = error.what();
      if (what.find("memory_pool") == std::string::npos) throw;
      throw usage_error(
          "micro_batch_loop::run: the micro-batch body allocated from a memory pool while "
          "captured into the loop's conditional node, which CUDA does not allow; allocate its "
          "buffers before the capture (" +
          what + ")");
    }
  }
  if (last != nullptr) pass(*last, stream);
}

void micro_batch_loop::copy_slice(void const* all, void* into, std::size_t bytes,
                                  cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(into != nullptr, "micro_batch_loop::select: the micro-batch's buffer is null");
  detail::launch_copy_slice(all, into, bytes, index(), stream);
}

}  // namespace graphstep::train
