#include <cuda_runtime_api.h>

#include <array>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/random_fill.hpp>
#include <string>
#include <utility>

#include "train/detail/rng_state.hpp"
#include "train/rng_kernels.hpp"

namespace graphstep::train {

namespace {
// The check comes first, so that nothing is allocated on a capturing stream.
cuda::device_buffer state_buffer(cuda::stream_view stream, cuda::memory_resource& resource) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "capture_safe_rng: construct it before the capture; it allocates its state");
  return cuda::device_buffer{2 * sizeof(std::uint64_t), stream, resource};
}
}  // namespace

capture_safe_rng::capture_safe_rng(std::uint64_t seed, cuda::stream_view stream,
                                   cuda::memory_resource& resource)
    : state_{state_buffer(stream, resource)}, seed_{seed} {
  std::array<std::uint64_t, 2> const initial = {seed, 0};
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(state(), initial.data(), sizeof initial,
                                     cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();  // also makes the stream-ordered allocation usable on every stream
}

capture_safe_rng::~capture_safe_rng() = default;
capture_safe_rng::capture_safe_rng(capture_safe_rng&& other) noexcept
    : state_{std::move(other.state_)},
      seed_{other.seed_},
      step_reserved_{std::exchange(other.step_reserved_, 0)} {}
capture_safe_rng& capture_safe_rng::operator=(capture_safe_rng&& other) noexcept {
  state_ = std::move(other.state_);
  seed_ = other.seed_;
  step_reserved_ = std::exchange(other.step_reserved_, 0);
  return *this;
}

std::uint64_t* capture_safe_rng::state() const {
  GRAPHSTEP_EXPECTS(!state_.empty(), "capture_safe_rng: this generator was moved from");
  return static_cast<std::uint64_t*>(state_.data());
}

philox_args capture_safe_rng::reserve(std::uint64_t counters) {
  philox_args const args{state(), step_reserved_};
  step_reserved_ += counters;
  return args;
}

void capture_safe_rng::end_step(cuda::stream_view stream) {
  detail::launch_advance_offset(state(), step_reserved_, stream);
  step_reserved_ = 0;
}

// Every fill checks its output and arguments, then reserves the counters of a float32 fill of
// as many elements, so that a 16-bit fill draws the float32 fill's words.
void capture_safe_rng::uniform(device_span out, float low, float high, cuda::stream_view stream) {
  detail::check_fill_output("uniform", out.data(), out.type());
  detail::check_uniform_arguments(low, high, out.type());
  std::size_t const n = out.count();
  philox_args const args = reserve(fill_counters(n));
  if (n == 0) return;
  if (out.type() == dtype::float32) {
    detail::launch_uniform(static_cast<float*>(out.data()), n, low, high, args, stream);
  } else {
    detail::launch_uniform(out.data(), out.type(), n, low, high, args, stream);
  }
}

void capture_safe_rng::normal(device_span out, float mean, float stddev, cuda::stream_view stream) {
  detail::check_fill_output("normal", out.data(), out.type());
  detail::check_normal_arguments(mean, stddev);
  std::size_t const n = out.count();
  philox_args const args = reserve(fill_counters(n));
  if (n == 0) return;
  if (out.type() == dtype::float32) {
    detail::launch_normal(static_cast<float*>(out.data()), n, mean, stddev, args, stream);
  } else {
    detail::launch_normal(out.data(), out.type(), n, mean, stddev, args, stream);
  }
}

void capture_safe_rng::bernoulli(device_span out, float p, cuda::stream_view stream) {
  detail::check_fill_output("bernoulli", out.data(), out.type());
  detail::check_bernoulli_arguments(p);
  std::size_t const n = out.count();
  philox_args const args = reserve(fill_counters(n));
  if (n == 0) return;
  if (out.type() == dtype::uint8) {
    detail::launch_bernoulli(static_cast<std::uint8_t*>(out.data()), n, p, args, stream);
  } else if (out.type() == dtype::float32) {
    detail::launch_bernoulli(static_cast<float*>(out.data()), n, p, args, stream);
  } else {
    detail::launch_bernoulli(out.data(), out.type(), n, p, args, stream);
  }
}

void capture_safe_rng::set_seed(std::uint64_t seed, cuda::stream_view stream) {
  std::uint64_t* const device = state();
  if (stream.is_capturing()) {
    GRAPHSTEP_EXPECTS(seed == seed_, "capture_safe_rng::set_seed: seed " + std::to_string(seed) +
                                         " differs from the seed in use, " + std::to_string(seed_) +
                                         ", inside a capture; set it before the capture or "
                                         "between replays");
    return;  // the seed in use: nothing to record (the offset is not reset)
  }
  GRAPHSTEP_EXPECTS(step_reserved_ == 0,
                    "capture_safe_rng::set_seed: a step reserved numbers but has not ended; set "
                    "the seed between steps");
  std::array<std::uint64_t, 2> const words = {seed, 0};
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(device, words.data(), sizeof words, cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();
  seed_ = seed;
}

void capture_safe_rng::save_to(checkpoint& into, std::string const& name,
                               cuda::stream_view stream) const {
  std::uint64_t const* const device = state();
  GRAPHSTEP_EXPECTS(step_reserved_ == 0,
                    "capture_safe_rng::save_to: a step reserved numbers but has not ended; save "
                    "between steps");
  std::array<std::uint64_t, 2> words{};
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(words.data(), device, sizeof words, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  into.add_value(name, detail::rng_state{words[0], words[1]});
}

void capture_safe_rng::restore_from(checkpoint const& from, std::string const& name,
                                    cuda::stream_view stream) {
  std::uint64_t* const device = state();
  auto const state = from.value<detail::rng_state>(name);  // checks the size
  GRAPHSTEP_EXPECTS(step_reserved_ == 0, "capture_safe_rng::restore_from: restore between steps");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "capture_safe_rng::restore_from inside a capture would freeze the state into "
                    "the graph; restore between replays");
  std::array<std::uint64_t, 2> const words = {state.seed, state.offset};
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(device, words.data(), sizeof words, cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();
  seed_ = state.seed;
}

}  // namespace graphstep::train
