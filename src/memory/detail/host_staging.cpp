// The shells of step_input and host_readback: pinned slots, one event per slot, and the copies
// between them and device memory. Which slot a transfer uses, and what is refused, is decided
// by staging_ring (graphstep_core).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/error.hpp>
#include <graphstep/memory/detail/host_staging.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/detail/relaxed_capture_mode.hpp"
#include "memory/detail/staging_ring.hpp"

namespace graphstep::memory::detail {

namespace {

struct pinned_deleter {
  void operator()(void* pointer) const noexcept {
    // cudaFreeHost may synchronize; Relaxed mode keeps it from breaking another thread's
    // capture (cudaThreadExchangeStreamCaptureMode).
    cuda::detail::relaxed_capture_mode const relaxed;
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFreeHost(pointer));
  }
};
using pinned_memory = std::unique_ptr<void, pinned_deleter>;

pinned_memory allocate_pinned(std::size_t bytes) {
  cuda::detail::relaxed_capture_mode const relaxed;
  void* pointer = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaHostAlloc(&pointer, bytes, cudaHostAllocDefault));
  return pinned_memory{pointer};
}

std::size_t checked_total(std::size_t bytes, std::size_t depth, std::string const& owner) {
  GRAPHSTEP_EXPECTS(bytes > 0, owner + ": zero bytes to stage");
  GRAPHSTEP_EXPECTS(depth == 0 || bytes <= static_cast<std::size_t>(-1) / depth,
                    owner + ": " + std::to_string(depth) + " slots of " + std::to_string(bytes) +
                        " bytes do not fit in memory");
  return bytes * depth;
}

// The slots and their events, shared by both directions.
struct slot_ring {
  slot_ring(std::size_t slot_bytes, std::size_t depth, std::string const& owner)
      : ring{depth, owner}, bytes{slot_bytes} {
    memory = allocate_pinned(checked_total(slot_bytes, depth, owner));
    cuda::detail::relaxed_capture_mode const relaxed;
    events.reserve(depth);
    for (std::size_t i = 0; i < depth; ++i) events.emplace_back();
  }
  slot_ring(slot_ring const&) = delete;
  slot_ring& operator=(slot_ring const&) = delete;
  slot_ring(slot_ring&&) = delete;
  slot_ring& operator=(slot_ring&&) = delete;
  // Pending copies read or write the slots: they complete before the memory goes.
  ~slot_ring() {
    cuda::detail::relaxed_capture_mode const relaxed;
    // An event never recorded counts as complete (cudaEventSynchronize returns at once).
    for (cuda::event const& e : events)
      GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaEventSynchronize(e.get()));
  }

  [[nodiscard]] void* slot(std::size_t index) const {
    return static_cast<unsigned char*>(memory.get()) + index * bytes;
  }

  staging_ring ring;
  std::size_t bytes;
  pinned_memory memory;
  std::vector<cuda::event> events;
};

// `what` follows the owner's name in the message, which is built only on failure.
void expect_not_capturing(cuda::stream_view stream, std::string const& owner, char const* what) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(), owner + what);
}

constexpr char const* upload_while_capturing =
    "::upload on a capturing stream would record the staging slot's address, and every replay "
    "would copy what it holds then: upload between replays, on the replay stream";

}  // namespace

// --- input_staging ---------------------------------------------------------------------------

struct input_staging::state {
  state(std::size_t bytes, std::size_t depth, cuda::stream_view stream,
        cuda::memory_resource& resource, std::string const& owner)
      : name{owner},
        slots{bytes, depth, owner},
        memory{std::in_place, bytes, stream, resource},
        device{memory->data()} {
    // Replays before the first upload read zeros, not whatever the memory held.
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(device, 0, bytes, stream.get()));
  }
  // The caller's memory: nothing allocated, zeroed or freed.
  state(void* adopted, std::size_t bytes, std::size_t depth, std::string const& owner)
      : name{owner}, slots{bytes, depth, owner}, device{adopted} {}
  std::string name;
  slot_ring slots;
  std::optional<cuda::device_buffer> memory;  // none when the memory is adopted
  void* device{};
};

input_staging::input_staging(std::size_t bytes, std::size_t depth, cuda::stream_view stream,
                             cuda::memory_resource& resource, char const* owner) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    std::string{owner} +
                        ": constructed on a capturing stream: construct it before the capture "
                        "(its memory and its zeroing belong outside the graph)");
  state_ = std::make_unique<state>(bytes, depth, stream, resource, owner);
}

input_staging::input_staging(void* device, std::size_t bytes, std::size_t alignment,
                             std::size_t depth, char const* owner) {
  GRAPHSTEP_EXPECTS(device != nullptr, std::string{owner} +
                                           "::adopt: the device memory is a null pointer; pass "
                                           "the address of the buffer kernels read");
  GRAPHSTEP_EXPECTS(reinterpret_cast<std::uintptr_t>(device) % alignment == 0,
                    std::string{owner} + "::adopt: the device memory is not aligned to its " +
                        std::to_string(alignment) +
                        "-byte element type; pass the address of its first element");
  state_ = std::make_unique<state>(device, bytes, depth, owner);
}

input_staging::~input_staging() = default;
input_staging::input_staging(input_staging&& other) noexcept = default;
input_staging& input_staging::operator=(input_staging&& other) noexcept = default;

void* input_staging::device() const noexcept {
  return state_ ? state_->device : nullptr;
}

std::size_t input_staging::bytes() const noexcept {
  return state_ ? state_->slots.bytes : 0;
}

void* input_staging::stage() {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "step_input: moved from: use the input it moved to");
  slot_ring& slots = state_->slots;
  if (slots.ring.previous_ticket_of_next_slot() != 0) {
    cuda::detail::relaxed_capture_mode const relaxed;
    slots.events[slots.ring.next_slot()].synchronize();
  }
  return slots.slot(slots.ring.stage());
}

void input_staging::upload_staged(cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "step_input: moved from: use the input it moved to");
  state_->slots.ring.expect_staged();
  expect_not_capturing(stream, state_->name, upload_while_capturing);
  copy_staged(stream);
}

// The staged slot's copy and its event, once every check has passed: two runtime calls.
void input_staging::copy_staged(cuda::stream_view stream) {
  slot_ring& slots = state_->slots;
  std::size_t const slot = slots.ring.next_slot();
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(state_->device, slots.slot(slot), slots.bytes,
                                     cudaMemcpyHostToDevice, stream.get()));
  slots.events[slot].record(stream);
  static_cast<void>(slots.ring.commit());
}

void input_staging::upload(void const* source, std::size_t count, std::size_t element_bytes,
                           cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "step_input: moved from: use the input it moved to");
  std::size_t const size = state_->slots.bytes / element_bytes;
  GRAPHSTEP_EXPECTS(count == size, state_->name + "::upload: " + std::to_string(count) +
                                       " values given for an input of " + std::to_string(size));
  GRAPHSTEP_EXPECTS(source != nullptr, state_->name + "::upload: the source is null");
  std::size_t const bytes = state_->slots.bytes;
  // Refused before the slot is touched, so a refused upload leaves nothing half done; the one
  // capture query of the upload (copy_staged does not ask again).
  expect_not_capturing(stream, state_->name, upload_while_capturing);
  std::memcpy(stage(), source, bytes);
  copy_staged(stream);
}

void input_staging::set_stream(cuda::stream_view stream) noexcept {
  if (state_ && state_->memory) state_->memory->set_stream(stream);
}

// --- readback_staging ------------------------------------------------------------------------

struct readback_staging::state {
  state(std::size_t bytes, std::size_t depth, std::string const& owner, void const* from)
      : name{owner}, slots{bytes, depth, owner}, source{from} {}
  std::string name;
  slot_ring slots;
  void const* source{};  // the adopted device memory, or null
};

readback_staging::readback_staging(std::size_t bytes, std::size_t depth, char const* owner)
    : state_{std::make_unique<state>(bytes, depth, owner, nullptr)} {}

readback_staging::readback_staging(void const* source, std::size_t bytes, std::size_t alignment,
                                   std::size_t depth, char const* owner) {
  GRAPHSTEP_EXPECTS(source != nullptr, std::string{owner} +
                                           "::adopt: the device memory is a null pointer; pass "
                                           "the address of the buffer to read back");
  GRAPHSTEP_EXPECTS(reinterpret_cast<std::uintptr_t>(source) % alignment == 0,
                    std::string{owner} + "::adopt: the device memory is not aligned to its " +
                        std::to_string(alignment) +
                        "-byte element type; pass the address of its first element");
  state_ = std::make_unique<state>(bytes, depth, owner, source);
}

void const* readback_staging::source() const noexcept {
  return state_ ? state_->source : nullptr;
}

readback_staging::~readback_staging() = default;
readback_staging::readback_staging(readback_staging&& other) noexcept = default;
readback_staging& readback_staging::operator=(readback_staging&& other) noexcept = default;

std::size_t readback_staging::bytes() const noexcept {
  return state_ ? state_->slots.bytes : 0;
}

std::uint64_t readback_staging::enqueue(void const* device_source, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "host_readback: moved from: use the one it moved to");
  GRAPHSTEP_EXPECTS(device_source != nullptr, state_->name + "::enqueue: the source is null");
  expect_not_capturing(stream, state_->name,
                       "::enqueue on a capturing stream would copy into one slot on every replay: "
                       "enqueue the read-back after the replay, on the replay stream");
  slot_ring& slots = state_->slots;
  std::size_t const slot = slots.ring.stage();
  // The copy this one replaces may run on another stream: this one follows it.
  if (slots.ring.previous_ticket_of_next_slot() != 0) stream.wait(slots.events[slot]);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(slots.slot(slot), device_source, slots.bytes,
                                     cudaMemcpyDeviceToHost, stream.get()));
  slots.events[slot].record(stream);
  return slots.ring.commit();
}

bool readback_staging::ready(std::uint64_t ticket) const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "host_readback: moved from: use the one it moved to");
  return state_->slots.events[state_->slots.ring.slot_of(ticket)].query();
}

void readback_staging::read(std::uint64_t ticket, void* destination) const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, "host_readback: moved from: use the one it moved to");
  slot_ring const& slots = state_->slots;
  std::size_t const slot = slots.ring.slot_of(ticket);
  {
    cuda::detail::relaxed_capture_mode const relaxed;
    slots.events[slot].synchronize();
  }
  std::memcpy(destination, slots.slot(slot), slots.bytes);
}

}  // namespace graphstep::memory::detail
