#include <graphstep/error.hpp>
#include <graphstep/rng.hpp>

#include <cuda_runtime_api.h>

#include <cstring>
#include <utility>

namespace graphstep {

namespace detail {
void launch_advance_offset(std::uint64_t* state, std::uint64_t counters, stream_view stream);
}

capture_safe_rng::capture_safe_rng(std::uint64_t seed, stream_view stream) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "capture_safe_rng: construct it before the capture; it allocates its state");
  void* state = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&state, 2 * sizeof(std::uint64_t)));
  state_ = static_cast<std::uint64_t*>(state);
  std::uint64_t const initial[2] = {seed, 0};
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(state_, initial, sizeof initial, cudaMemcpyHostToDevice,
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

void capture_safe_rng::end_step(stream_view stream) {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "capture_safe_rng: this generator was moved from");
  detail::launch_advance_offset(state_, step_reserved_, stream);
  step_reserved_ = 0;
}

std::vector<std::byte> capture_safe_rng::save(stream_view stream) const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "capture_safe_rng: this generator was moved from");
  GRAPHSTEP_EXPECTS(step_reserved_ == 0,
                    "capture_safe_rng::save: a step reserved numbers but has not ended; save "
                    "between steps");
  std::vector<std::byte> bytes(2 * sizeof(std::uint64_t));
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(bytes.data(), state_, bytes.size(), cudaMemcpyDeviceToHost,
                                     stream.value()));
  stream.synchronize();
  return bytes;
}

void capture_safe_rng::restore(std::vector<std::byte> const& bytes, stream_view stream) {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "capture_safe_rng: this generator was moved from");
  GRAPHSTEP_EXPECTS(bytes.size() == 2 * sizeof(std::uint64_t),
                    "capture_safe_rng::restore: the saved state has " +
                        std::to_string(bytes.size()) + " bytes, not " +
                        std::to_string(2 * sizeof(std::uint64_t)) +
                        ": restore what save() returned");
  GRAPHSTEP_EXPECTS(step_reserved_ == 0, "capture_safe_rng::restore: restore between steps");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "capture_safe_rng::restore inside a capture would freeze the state into "
                    "the graph; restore between replays");
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(state_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice,
                                     stream.value()));
  stream.synchronize();
}

}  // namespace graphstep
