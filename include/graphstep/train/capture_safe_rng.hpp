#pragma once

/// @file train/capture_safe_rng.hpp
/// @brief Randomness that stays random under replay: a Philox generator whose seed and offset
/// live in device memory and are advanced by the graph itself, its uniform, normal and
/// Bernoulli fills, and dropout built on it.
///
/// A kernel that drew its random numbers from a seed and offset passed by value at capture
/// would draw the same numbers on every replay (the same dropout mask every step). Here each
/// random-consuming kernel reserves a range of Philox counters for the step (`reserve`: a
/// fixed base, the same on every replay) and reads the step's offset from device memory;
/// `end_step` enqueues a kernel that advances that offset by everything the step reserved.
/// Captured, the advance is part of the graph: every replay draws new numbers, and a run is
/// reproducible from its seed — eager and graphed runs with one seed draw the same numbers.
///
/// The fills (`uniform`, `normal`, `bernoulli`: PyTorch's `rand`/`uniform_`, `randn`/`normal_`,
/// `bernoulli`) reserve their counters themselves and draw through the transforms of
/// train/random_fill.hpp, which state each interval's ends and what is exact on a GPU. They
/// write fp32, or fp16 and bf16 (a `void*` and a `dtype`): a 16-bit fill is the fp32 fill of the
/// same state rounded to nearest even, as PyTorch computes these fills in fp32 and casts.

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/memory_resource.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/random_fill.hpp>
#include <string>
#include <vector>

namespace graphstep::train {

/// @brief What a kernel needs to draw its numbers: the device state and its base in the step.
struct philox_args {
  std::uint64_t const* state;  ///< device: {seed, offset}
  std::uint64_t base;          ///< counters reserved before this kernel in the step
};

/// @brief The generator. Construct before capture. Move-only.
///
/// Stream order: the fills and `end_step` are enqueued on the stream given to them and read or
/// advance the device state when they run; `set_seed`, `save` and `restore` synchronize their
/// stream, so work enqueued earlier on other streams must be ordered before them by the caller.
///
/// Its device state comes from `resource` (a `memory::memory_pool` counts it in its budget)
/// and goes back to it on `stream`, the stream given to the constructor: that stream and the
/// resource must outlive the generator (see `cuda::device_buffer`).
class capture_safe_rng {
 public:
  /// @throws usage_error (capturing stream), out_of_memory, no_device_error, cuda_error
  capture_safe_rng(std::uint64_t seed, cuda::stream_view stream,
                   cuda::memory_resource& resource = cuda::default_resource());
  ~capture_safe_rng();
  capture_safe_rng(capture_safe_rng&& other) noexcept;
  capture_safe_rng& operator=(capture_safe_rng&& other) noexcept;
  capture_safe_rng(capture_safe_rng const&) = delete;
  capture_safe_rng& operator=(capture_safe_rng const&) = delete;

  /// @brief Reserves `counters` Philox counters (4 random words each) for one kernel of the
  /// current step. Host bookkeeping only.
  [[nodiscard]] philox_args reserve(std::uint64_t counters);
  /// @brief Enqueues the advance of the device offset by everything reserved in this step,
  /// and starts a new step. Capturable: call it at the end of the captured step.
  void end_step(cuda::stream_view stream);

  /// @brief Fills the elements of `out` (float32, float16 or bfloat16, in device memory) with
  /// values uniform in [low, high) (all `low` when low == high), like `uniform_(low, high)` on a
  /// tensor of that type. Reserves `fill_counters(out.count())` counters of the current step,
  /// only once the arguments are accepted. Capturable: each replay draws new values. An fp16 or
  /// bf16 value is the float32 fill's value (same seed, same offset, same counters reserved)
  /// rounded to nearest even, except that one rounding to `high` is given as `low` (PyTorch's
  /// rule; see `rounded_uniform` in train/random_fill.hpp), so values lie in [low, high) with
  /// both bounds rounded to that type.
  /// @throws usage_error (a null `out`, no dtype or an integer one, `out` not aligned to an
  /// element; bounds not finite, low > high, high − low overflowing, or a bound beyond the
  /// largest finite value of the type), cuda_error
  void uniform(device_span out, float low, float high, cuda::stream_view stream);
  /// @brief Normal values of mean `mean` and standard deviation `stddev` (all `mean` when
  /// stddev == 0), like `normal_(mean, std)`; fp16 and bf16 values are the float32 fill's
  /// rounded to nearest even (beyond the type's range, an infinity). As `uniform` otherwise.
  /// @throws usage_error (as `uniform` for `out`; mean not finite; stddev negative or not
  /// finite), cuda_error
  void normal(device_span out, float mean, float stddev, cuda::stream_view stream);
  /// @brief 1 with probability p, else 0 (p = 0: all 0, p = 1: all 1), like `bernoulli_`:
  /// exactly 1 and 0 in every type, from the float32 fill's draws; `out` may also be a byte
  /// mask (`uint8`), of the same draws. As `uniform` otherwise.
  /// @throws usage_error (as `uniform` for `out`, a uint8 `out` allowed; p outside [0, 1]),
  /// cuda_error
  void bernoulli(device_span out, float p, cuda::stream_view stream);

  /// @brief Starts the generator over with `seed` and offset 0, as a newly constructed one
  /// (`torch.cuda.manual_seed`).
  ///
  /// Outside a capture it writes the device state (synchronizing `stream`), between steps.
  /// Inside a capture of `stream` only the seed already in use is accepted, and then nothing
  /// is recorded and nothing changes: the offset is not reset, so replays go on drawing new
  /// numbers (PyTorch's rule for `manual_seed` during capture). To reseed a graphed run, call
  /// it between replays.
  /// @throws usage_error (a different seed inside a capture, naming both seeds; outside a
  /// capture, between reserve and end_step), cuda_error
  void set_seed(std::uint64_t seed, cuda::stream_view stream);
  /// @brief The seed in use: the constructor's, or the last `set_seed` or `restore_from`.
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }

  /// @brief Adds the state {seed, offset} to `into` as the value `name` (synchronizes
  /// `stream`): for a checkpoint file, or kept in memory to rewind the generator.
  /// @throws usage_error (between reserve and end_step, when the state is mid-step; a name
  /// already in `into`), cuda_error
  void save_to(checkpoint& into, std::string const& name, cuda::stream_view stream) const;
  /// @brief Restores the state `save_to` added as `name`: the numbers drawn next are those
  /// drawn after the save. Between steps and replays (synchronizes `stream`).
  /// @throws usage_error (no such value or one of another size, mid-step, a capturing stream),
  /// cuda_error
  void restore_from(checkpoint const& from, std::string const& name, cuda::stream_view stream);

 private:
  [[nodiscard]] std::uint64_t* state() const;

  cuda::device_buffer state_;  // device: {seed, offset}
  std::uint64_t seed_{};       // the host's copy of the device seed
  std::uint64_t step_reserved_{};
};

/// @brief y = x · keep / (1 − p), keep ~ Bernoulli(1 − p), mask[i] = keep, over float32 spans
/// of one count and a uint8 mask of as many elements; `y` may be `x`. Draws
/// `dropout_counters(x.count())` counters' worth of bits from `rng`.
/// @throws usage_error (p outside [0, 1), a null generator state, a span with elements and a
/// null pointer or misaligned, data not float32 or a mask not uint8, counts that differ),
/// cuda_error
void dropout_forward(device_span y, device_span mask, device_span x, float p, philox_args rng,
                     cuda::stream_view stream);
/// @brief dx = dy · mask / (1 − p), over float32 spans of one count and the forward's mask.
/// @throws as dropout_forward
void dropout_backward(device_span dx, device_span mask, device_span dy, float p,
                      cuda::stream_view stream);

/// @brief Counters a dropout of n elements reserves.
[[nodiscard]] constexpr std::uint64_t dropout_counters(std::size_t n) noexcept {
  return (static_cast<std::uint64_t>(n) + 3) / 4;
}

}  // namespace graphstep::train
