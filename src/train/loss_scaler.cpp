#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/detail/multi_tensor.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <string>
#include <vector>

#include "detail/span_checks.hpp"
#include "train/detail/upload_table.hpp"
#include "train/train_kernels.hpp"

namespace graphstep::train {
namespace {

using detail::plan_chunks;
using detail::tensor_chunk;

// Checked before anything is allocated.
std::vector<tensor_chunk> checked_chunks(std::vector<device_span> const& gradients,
                                         loss_scaler_options const& options,
                                         cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!gradients.empty(), "loss_scaler: no gradient was given");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "loss_scaler: construct it before the capture; it allocates and uploads "
                    "its state, which a capture cannot record");
  validate(options);
  std::vector<std::size_t> counts;
  for (std::size_t i = 0; i < gradients.size(); ++i) {
    auto const& g = gradients[i];
    static_cast<void>(::graphstep::detail::floating_operand_type(
        "loss_scaler", "gradient " + std::to_string(i), g));
    counts.push_back(g.count());
  }
  return plan_chunks(counts);  // refuses an empty tensor
}

}  // namespace

loss_scaler::loss_scaler(std::vector<device_span> const& gradients,
                         loss_scaler_options const& options, cuda::stream_view stream,
                         cuda::memory_resource& resource)
    : loss_scaler{gradients, checked_chunks(gradients, options, stream), options, stream,
                  resource} {}

loss_scaler::loss_scaler(std::vector<device_span> const& gradients,
                         std::vector<tensor_chunk> const& chunks,
                         loss_scaler_options const& options, cuda::stream_view stream,
                         cuda::memory_resource& resource)
    : options_{options},
      chunk_count_{chunks.size()},
      state_{sizeof(loss_scaler_state), stream, resource},
      slots_{sizeof(detail::scaled_slot) * gradients.size(), stream, resource},
      chunks_{sizeof(tensor_chunk) * chunks.size(), stream, resource} {
  loss_scaler_state const initial = initial_loss_scaler_state(options);
  detail::upload_table(state_, &initial, 1, stream);
  std::vector<detail::scaled_slot> slots;
  slots.reserve(gradients.size());
  for (device_span const& g : gradients) slots.push_back({g.data(), g.type()});
  detail::upload_table(slots_, slots.data(), slots.size(), stream);
  detail::upload_table(chunks_, chunks.data(), chunks.size(), stream);
  // The host copies go away on return, and every stream may use the memory (its allocation
  // was ordered on `stream`).
  stream.synchronize();
}

void loss_scaler::check(cuda::stream_view stream) const {
  detail::launch_check(static_cast<detail::scaled_slot const*>(slots_.data()),
                       static_cast<tensor_chunk const*>(chunks_.data()), chunk_count_, state(),
                       stream);
}

void loss_scaler::update(cuda::stream_view stream) const {
  detail::launch_update_loss_scaler(state(), options_, stream);
}

float const* loss_scaler::scale() const noexcept {
  return &state()->scale;
}

unsigned int const* loss_scaler::all_finite() const noexcept {
  static_assert(sizeof(unsigned int) == sizeof(std::uint32_t));
  return reinterpret_cast<unsigned int const*>(&state()->all_finite);
}

loss_scaler_state loss_scaler::read(cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "loss_scaler::read inside a capture would record the host address: read "
                    "the state after the replay");
  loss_scaler_state host{};
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(&host, state(), sizeof host, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return host;
}

void loss_scaler::save_to(checkpoint& into, std::string const& name,
                          cuda::stream_view stream) const {
  into.add_value(name, read(stream));
}

void loss_scaler::restore_from(checkpoint const& from, std::string const& name,
                               cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "loss_scaler::restore_from inside a capture would freeze the state into the "
                    "graph; restore between replays");
  auto const saved = from.value<loss_scaler_state>(name);
  GRAPHSTEP_EXPECTS(saved.scale > 0.0F && detail::is_finite(saved.scale),
                    "loss_scaler::restore_from: '" + name + "' holds the scale " +
                        std::to_string(saved.scale) +
                        ", which is not positive and finite; it was not written by save_to");
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(state(), &saved, sizeof saved, cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();  // `saved` is a local
}

loss_scaler_state* loss_scaler::state() const noexcept {
  return static_cast<loss_scaler_state*>(state_.data());
}

}  // namespace graphstep::train
