#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/device_guard.hpp>
#include <graphstep/error.hpp>
#include <sstream>

#include "cuda/detail/device_wide_wait.hpp"
#include "cuda/detail/relaxed_capture_mode.hpp"
#include "detail/address_text.hpp"
#include "memory/detail/pool_state.hpp"

namespace graphstep::memory {
namespace detail {
namespace {

std::string bytes_text(std::size_t bytes) {
  std::ostringstream out;
  out << bytes << " B";
  if (bytes >= (std::size_t{1} << 20)) {
    out.precision(1);
    out << std::fixed << " (" << static_cast<double>(bytes) / (1 << 20) << " MiB)";
  }
  return out.str();
}

detail::stream_id stream_key(cudaStream_t stream) {
  return static_cast<detail::stream_id>(reinterpret_cast<std::uintptr_t>(stream));
}

// Keeps a graph's pool memory alive and hands it back when the graph dies.
class graph_lease {
 public:
  graph_lease(std::shared_ptr<pool_state> pool, std::uint64_t graph)
      : pool_{std::move(pool)}, graph_{graph} {}
  ~graph_lease() { pool_->release_graph(graph_); }
  graph_lease(graph_lease const&) = delete;
  graph_lease& operator=(graph_lease const&) = delete;

 private:
  std::shared_ptr<pool_state> pool_;
  std::uint64_t graph_;
};

// RAII NVTX range, so growth and captures show up in Nsight Systems.
class nvtx_range {
 public:
  explicit nvtx_range(char const* name) noexcept { nvtxRangePushA(name); }
  ~nvtx_range() { nvtxRangePop(); }
  nvtx_range(nvtx_range const&) = delete;
  nvtx_range& operator=(nvtx_range const&) = delete;
};

}  // namespace

pool_state::pool_state(pool_options const& options)
    : options_{options}, blocks_{options.alignment} {
  GRAPHSTEP_EXPECTS(options.growth_bytes > 0,
                    "pool_options::growth_bytes must be positive (it is the smallest growth step)");
  cuda::require_device();
  device_ = options.device >= 0 ? options.device : cuda::current_device();
  cuda::device_guard const on_device{device_};
  std::string why_not;
  switch (options.backing) {
    case pool_backing::device_malloc: backing_ = make_device_malloc_backing(device_); break;
    case pool_backing::virtual_memory:
      backing_ = make_virtual_memory_backing(device_, options.reserve_bytes, why_not);
      if (!backing_) {
        throw usage_error{"memory_pool: virtual memory backing requested but " + why_not +
                          ": use pool_backing::automatic or pool_backing::device_malloc"};
      }
      break;
    case pool_backing::automatic:
      backing_ = make_virtual_memory_backing(device_, options.reserve_bytes, why_not);
      if (!backing_) {
        static_cast<void>(std::fprintf(
            stderr,
            "graphstep: memory_pool falls back to cudaMalloc segments: %s. Addresses still never "
            "move; growth adds segments instead of extending one range\n",
            why_not.c_str()));
        backing_ = make_device_malloc_backing(device_);
      }
      break;
  }
}

pool_state::~pool_state() {
  // Blocks given back eagerly were freed in stream order: the last free on each stream covers
  // them. Graphs' memory is idle too, for each graph_exec waits for its replays before it lets
  // go of its lease. A block never given back may still be used on any stream: only a
  // device-wide wait covers it, deferred while a capture is under way on the device.
  try {
    cuda::device_guard const on_device{device_};
    cuda::detail::relaxed_capture_mode const relaxed;
    for (auto const& entry : free_events_) entry.second.synchronize();
  } catch (std::exception const& e) {
    static_cast<void>(std::fprintf(
        stderr, "graphstep: memory_pool: waiting for freed blocks failed, continuing: %s\n",
        e.what()));
  }
  if (blocks_.stats().bytes_in_use == 0) return;
  std::shared_ptr<memory_backing> backing{std::move(backing_)};
  cuda::detail::after_device_idle(device_, [backing]() mutable { backing.reset(); });
}

pool_state::capture_state* pool_state::capture_of(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetCaptureInfo(stream, &status, &id));
  if (status == cudaStreamCaptureStatusNone) return nullptr;
  auto found = captures_.find(id);
  GRAPHSTEP_EXPECTS(
      found != captures_.end(),
      "memory_pool: stream " + graphstep::detail::pointer_text(stream) +
          " is being captured, but not by a graphs::capture_scope given this pool. Pass "
          "this pool to the graphs::capture_scope, or allocate before the capture");
  return &found->second;
}

void* pool_state::allocate(std::size_t bytes, cudaStream_t stream) {
  GRAPHSTEP_EXPECTS(bytes > 0, "memory_pool::allocate: a request of 0 bytes; ask for at least 1");
  std::lock_guard const lock{mutex_};
  capture_state* capture = capture_of(stream);
  if (capture != nullptr) {
    capture->streams.insert(stream);
    if (capture->plan) {
      std::size_t const offset = capture->plan->next_allocate(bytes);
      return reinterpret_cast<void*>(capture->slab + offset);
    }
    return reinterpret_cast<void*>(allocate_block(bytes, stream, capture->graph));
  }
  auto const address = allocate_block(bytes, stream, detail::no_graph);
  if (trace_) traced_ids_[address] = trace_->record_allocate(bytes);
  return reinterpret_cast<void*>(address);
}

std::uintptr_t pool_state::allocate_block(std::size_t bytes, cudaStream_t stream,
                                          std::uint64_t owner) {
  auto const key = stream_key(stream);
  if (auto found = blocks_.allocate(bytes, key, owner)) return found->address;
  // Blocks freed eagerly on other streams become usable once their work has finished; never
  // wait inside a capture, where waiting is not allowed.
  if (owner == detail::no_graph && release_other_streams(stream)) {
    if (auto found = blocks_.allocate(bytes, key, owner)) return found->address;
  }
  if (!grow(bytes + blocks_.alignment(), bytes)) {
    throw_out_of_memory(bytes, "the device has no memory left for the pool to grow");
  }
  if (auto found = blocks_.allocate(bytes, key, owner)) return found->address;
  throw_out_of_memory(bytes, "no block fits after growing the pool");
}

bool pool_state::release_other_streams(cudaStream_t stream) {
  bool released = false;
  // Never breaks a capture another thread has under way.
  cuda::detail::relaxed_capture_mode const relaxed;
  for (auto& [other, last_free] : free_events_) {
    if (other == stream) continue;
    last_free.synchronize();
    blocks_.release_stream(stream_key(other));
    released = true;
  }
  free_events_.clear();
  return released;
}

bool pool_state::grow(std::size_t bytes, std::size_t requested) {
  nvtx_range const range{"graphstep::memory::memory_pool grow"};
  std::size_t step = std::max(bytes, options_.growth_bytes);
  std::size_t const granularity = backing_->granularity();
  step = (step + granularity - 1) / granularity * granularity;
  std::size_t const mapped = backing_->mapped_bytes();
  if (options_.budget_bytes > 0) {
    std::size_t const room = options_.budget_bytes > mapped ? options_.budget_bytes - mapped : 0;
    if (step > room) step = room / granularity * granularity;
    if (step < bytes) {
      throw_out_of_memory(requested, "the pool's budget of " + bytes_text(options_.budget_bytes) +
                                         " would be exceeded");
    }
  }
  memory_backing::growth grown;
  switch (backing_->grow(step, grown)) {
    case memory_backing::growth_status::grown: break;
    case memory_backing::growth_status::address_range_full:
      throw_out_of_memory(requested, "the pool's reserved address range of " +
                                         bytes_text(backing_->reserved_bytes()) +
                                         " is full; create it with a larger "
                                         "pool_options::reserve_bytes");
    case memory_backing::growth_status::device_out_of_memory: return false;
  }
  ++growths_;
  if (grown.extends_region) {
    blocks_.extend_region(grown.base, grown.bytes);
  } else {
    blocks_.add_region(grown.base, grown.bytes);
  }
  return true;
}

void pool_state::throw_out_of_memory(std::size_t requested, std::string const& reason) const {
  auto const stats = blocks_.stats();
  out_of_memory::details const sizes{requested, stats.bytes_in_use, backing_->reserved_bytes(),
                                     options_.budget_bytes, stats.largest_free_block};
  std::ostringstream message;
  message << "memory_pool: cannot allocate " << bytes_text(requested) << ": " << reason
          << ". In use " << bytes_text(stats.bytes_in_use) << ", mapped "
          << bytes_text(backing_->mapped_bytes()) << ", reserved "
          << bytes_text(backing_->reserved_bytes()) << ", budget "
          << (options_.budget_bytes > 0 ? bytes_text(options_.budget_bytes) : "none")
          << ", largest free block " << bytes_text(stats.largest_free_block)
          << ". Free memory you no longer need, destroy graphs you no longer replay, raise the "
             "budget, or let graphs that never run at once share one pool";
  throw out_of_memory{sizes, message.str()};
}

void pool_state::deallocate(void* pointer, cudaStream_t stream) {
  GRAPHSTEP_EXPECTS(pointer != nullptr, "memory_pool::deallocate: a null pointer was passed");
  std::lock_guard const lock{mutex_};
  auto const address = reinterpret_cast<std::uintptr_t>(pointer);
  capture_state* capture = capture_of(stream);
  if (capture != nullptr) {
    capture->streams.insert(stream);
    if (capture->plan) {
      GRAPHSTEP_EXPECTS(stream == capture->origin,
                        "memory_pool: planned capture '" + capture->name +
                            "' freed a block on a side stream; in planned mode free blocks on "
                            "the capturing stream, after joining the side stream");
      GRAPHSTEP_EXPECTS(address >= capture->slab, "memory_pool: planned capture '" + capture->name +
                                                      "' freed " +
                                                      graphstep::detail::pointer_text(pointer) +
                                                      ", which it did not allocate");
      capture->plan->deallocate(address - capture->slab);
      return;
    }
    blocks_.deallocate(address, stream_key(stream));
    return;
  }
  blocks_.deallocate(address, stream_key(stream));
  if (trace_) {
    if (auto traced = traced_ids_.find(address); traced != traced_ids_.end()) {
      trace_->record_deallocate(traced->second);
      traced_ids_.erase(traced);
    }
  }
  auto found = free_events_.find(stream);
  if (found == free_events_.end()) found = free_events_.emplace(stream, cuda::event{}).first;
  found->second.record(stream);
}

void pool_state::begin_capture(unsigned long long capture_id, std::uint64_t graph, std::string name,
                               cudaStream_t origin) {
  nvtx_range const range{"graphstep::memory::memory_pool begin_capture"};
  std::lock_guard const lock{mutex_};
  capture_state state;
  state.graph = graph;
  state.name = std::move(name);
  state.origin = origin;
  state.streams.insert(origin);
  if (next_plan_) {
    auto plan = memory::plan_allocations(*next_plan_, blocks_.alignment());
    std::size_t const slab_bytes = std::max<std::size_t>(plan.slab_bytes, 1);
    state.slab = allocate_block(slab_bytes, origin, graph);
    state.plan.emplace(std::move(*next_plan_), std::move(plan));
    next_plan_.reset();
  }
  captures_.emplace(capture_id, std::move(state));
}

std::string pool_state::capture_problem(unsigned long long capture_id) const {
  std::lock_guard const lock{mutex_};
  auto found = captures_.find(capture_id);
  if (found == captures_.end() || !found->second.plan || found->second.plan->complete()) return {};
  return "memory_pool: planned capture '" + found->second.name +
         "' made fewer allocations than its warm-up step did; the captured step must allocate "
         "exactly as the traced warm-up (trace a step that takes the same path as the capture)";
}

std::shared_ptr<void> pool_state::finish_capture(unsigned long long capture_id, bool success) {
  std::unique_lock lock{mutex_};
  auto found = captures_.find(capture_id);
  if (found == captures_.end()) return nullptr;
  capture_state const state = std::move(found->second);
  captures_.erase(found);
  // Everything issued in the capture is joined into its origin stream before it ends, and
  // replays run whole: blocks freed on any captured stream are now free for any stream.
  for (cudaStream_t stream : state.streams) blocks_.release_stream(stream_key(stream));
  if (!success) {
    blocks_.release_graph(state.graph);
    return nullptr;
  }
  live_graphs_.insert(state.graph);
  lock.unlock();
  return std::make_shared<graph_lease>(shared_from_this(), state.graph);
}

void pool_state::release_graph(std::uint64_t graph) noexcept {
  std::lock_guard const lock{mutex_};
  blocks_.release_graph(graph);
  live_graphs_.erase(graph);
}

pool_statistics pool_state::statistics() const {
  std::lock_guard const lock{mutex_};
  auto const stats = blocks_.stats();
  pool_statistics out;
  out.backing = backing_->kind();
  out.reserved_bytes = backing_->reserved_bytes();
  out.mapped_bytes = backing_->mapped_bytes();
  out.bytes_in_use = stats.bytes_in_use;
  out.peak_bytes_in_use = stats.peak_bytes_in_use;
  out.free_bytes = stats.free_bytes;
  out.largest_free_block = stats.largest_free_block;
  out.fragmentation = stats.fragmentation;
  out.growths = growths_;
  out.live_graphs = live_graphs_.size();
  return out;
}

std::size_t pool_state::bytes_held_by(std::uint64_t graph) const {
  std::lock_guard const lock{mutex_};
  return blocks_.bytes_in_use_by(graph);
}

void pool_state::begin_trace() {
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(!trace_,
                    "memory_pool::begin_trace: a trace is already being recorded; "
                    "call end_trace first");
  trace_.emplace();
  traced_ids_.clear();
}

memory::allocation_trace pool_state::end_trace() {
  std::lock_guard const lock{mutex_};
  GRAPHSTEP_EXPECTS(trace_,
                    "memory_pool::end_trace: no trace is being recorded; call "
                    "begin_trace before the warm-up step");
  memory::allocation_trace trace = std::move(*trace_);
  trace_.reset();
  traced_ids_.clear();
  return trace;
}

memory::allocation_plan pool_state::plan_next_capture(memory::allocation_trace trace) {
  GRAPHSTEP_EXPECTS(trace.allocation_count() > 0,
                    "memory_pool::plan_next_capture: the trace holds no allocation; record a "
                    "warm-up step between begin_trace and end_trace");
  auto plan = memory::plan_allocations(trace, options_.alignment);
  std::lock_guard const lock{mutex_};
  next_plan_ = std::move(trace);
  return plan;
}

}  // namespace detail

namespace {
detail::pool_state& checked(std::shared_ptr<detail::pool_state> const& state) {
  GRAPHSTEP_EXPECTS(state != nullptr,
                    "this memory_pool was moved from: use the pool it was moved to");
  return *state;
}
}  // namespace

memory_pool::memory_pool(pool_options const& options)
    : state_{std::make_shared<detail::pool_state>(options)} {}
memory_pool::memory_pool(memory_pool&&) noexcept = default;
memory_pool& memory_pool::operator=(memory_pool&&) noexcept = default;
memory_pool::~memory_pool() = default;

void* memory_pool::allocate(std::size_t bytes, cuda::stream_view stream) {
  return checked(state_).allocate(bytes, stream.value());
}
void memory_pool::deallocate(void* pointer, cuda::stream_view stream) {
  checked(state_).deallocate(pointer, stream.value());
}
void* memory_pool::do_allocate(std::size_t bytes, cuda::stream_view stream) {
  return allocate(bytes, stream);
}
void memory_pool::do_deallocate(void* pointer, std::size_t /*bytes*/, cuda::stream_view stream) {
  deallocate(pointer, stream);  // the pool records each block's size itself
}
pool_statistics memory_pool::statistics() const {
  return checked(state_).statistics();
}
std::size_t memory_pool::bytes_held_by(std::uint64_t graph_id) const {
  return checked(state_).bytes_held_by(graph_id);
}
pool_capture memory_pool::open_capture(cuda::stream_view stream, std::uint64_t graph_id,
                                       std::string name) {
  detail::pool_state& state = checked(state_);
  cudaStreamCaptureStatus status{};
  unsigned long long capture_id = 0;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetCaptureInfo(stream.value(), &status, &capture_id));
  GRAPHSTEP_EXPECTS(status == cudaStreamCaptureStatusActive,
                    "memory_pool::open_capture: the stream of '" + name +
                        "' is not capturing; begin the capture first");
  state.begin_capture(capture_id, graph_id, std::move(name), stream.value());
  return pool_capture{state_, capture_id};
}
pool_backing memory_pool::backing() const {
  return checked(state_).backing();
}
void memory_pool::begin_trace() {
  checked(state_).begin_trace();
}
memory::allocation_trace memory_pool::end_trace() {
  return checked(state_).end_trace();
}
memory::allocation_plan memory_pool::plan_next_capture(memory::allocation_trace trace) {
  return checked(state_).plan_next_capture(std::move(trace));
}

}  // namespace graphstep::memory
