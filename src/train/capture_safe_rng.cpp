#include <cuda_runtime_api.h>

#include <array>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/detail/rng_state.hpp>
#include <utility>

#include "train/rng_kernels.hpp"

namespace graphstep::train {

capture_safe_rng::capture_safe_rng(std::uint64_t seed, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "capture_safe_rng: construct it before the capture; it allocates its state");
  void* state = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&state, 2 * sizeof(std::uint64_t)));
  state_ = static_cast<std::uint64_t*>(state);
  std::array<std::uint64_t, 2> const initial = {seed, 0};
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(state_, initial.data(), sizeof initial, cudaMemcpyHostToDevice,
                                     stream.value()));
  stream.synchronize();
}

capture_safe_rng::~capture_safe_rng() {
  if (state_ != nullptr) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(state_));
}

capture_safe_rng::capture_safe_rng(capture_safe_rng&& other) noexcept
    : state_{std::exchange(other.state_, nullptr)},
      step_reserved_{std::exchange(other.step_reserved_, 0)} {}

capture_safe_rng& capture_safe_rng::operator=(capture_safe_rng&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(state_));
    state_ = std::exchange(other.state_, nullptr);
    step_reserved_ = std::exchange(other.step_reserved_, 0);
  }
  return *this;
}

philox_args capture_safe_rng::reserve(std::uint64_t counters) {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "capture_safe_rng: this generator was moved from");
  philox_args const args{state_, step_reserved_};
  step_reserved_ += counters;
  return args;
}

void capture_safe_rng::end_step(cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "capture_safe_rng: this generator was moved from");
  detail::launch_advance_offset(state_, step_reserved_, stream);
  step_reserved_ = 0;
}

std::vector<std::byte> capture_safe_rng::save(cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "capture_safe_rng: this generator was moved from");
  GRAPHSTEP_EXPECTS(step_reserved_ == 0,
                    "capture_safe_rng::save: a step reserved numbers but has not ended; save "
                    "between steps");
  std::array<std::uint64_t, 2> words{};
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(words.data(), state_, sizeof words, cudaMemcpyDeviceToHost, stream.value()));
  stream.synchronize();
  return detail::to_bytes({words[0], words[1]});
}

void capture_safe_rng::restore(std::vector<std::byte> const& bytes, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "capture_safe_rng: this generator was moved from");
  detail::rng_state const state = detail::from_bytes(bytes);  // checks the size
  GRAPHSTEP_EXPECTS(step_reserved_ == 0, "capture_safe_rng::restore: restore between steps");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "capture_safe_rng::restore inside a capture would freeze the state into "
                    "the graph; restore between replays");
  std::array<std::uint64_t, 2> const words = {state.seed, state.offset};
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(state_, words.data(), sizeof words, cudaMemcpyHostToDevice, stream.value()));
  stream.synchronize();
}

}  // namespace graphstep::train
