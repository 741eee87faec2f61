#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "cuda/detail/relaxed_capture_mode.hpp"
#include "cuda/detail/stream_device.hpp"
#include "detail/logger.hpp"
#include "memory/detail/graph_lease.hpp"
#include "memory/detail/pool_state.hpp"

namespace graphstep::memory {
namespace detail {
namespace {

stream_id stream_key(cudaStream_t stream) {
  return static_cast<stream_id>(reinterpret_cast<std::uintptr_t>(stream));
}

cudaStream_t stream_of(stream_id key) {
  return reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(key));
}

// A launch's own completion event (recorded by the graph's last node) as the engine names it.
event_id launch_key(cudaEvent_t launch) {
  return static_cast<event_id>(reinterpret_cast<std::uintptr_t>(launch));
}

cudaEvent_t launch_of(event_id key) {
  return reinterpret_cast<cudaEvent_t>(static_cast<std::uintptr_t>(key));
}

// RAII NVTX range, so growth and captures show up in Nsight Systems.
class nvtx_range {
 public:
  explicit nvtx_range(char const* name) noexcept { nvtxRangePushA(name); }
  ~nvtx_range() { nvtxRangePop(); }
  nvtx_range(nvtx_range const&) = delete;
  nvtx_range& operator=(nvtx_range const&) = delete;
};

std::unique_ptr<memory_backing> make_backing(pool_options const& options, int device) {
  std::string why_not;
  switch (options.backing) {
    case pool_backing::device_malloc:
      return make_device_malloc_backing(device, options.peer_devices);
    case pool_backing::pinned_host:
      GRAPHSTEP_EXPECTS(options.peer_devices.empty(),
                        "pool_options::peer_devices: a pinned_host pool is portable to every "
                        "device already; leave peer_devices empty");
      return make_pinned_host_backing(device);
    case pool_backing::virtual_memory: {
      auto backing =
          make_virtual_memory_backing(device, options.reserve_bytes, options.peer_devices, why_not);
      if (!backing) {
        throw usage_error{"memory_pool: virtual memory backing requested but " + why_not +
                          ": use pool_backing::automatic or pool_backing::device_malloc"};
      }
      return backing;
    }
    case pool_backing::automatic: break;
  }
  auto backing =
      make_virtual_memory_backing(device, options.reserve_bytes, options.peer_devices, why_not);
  if (backing) return backing;
  // Nothing to fix: a note, not a warning.
  graphstep::detail::log_lazily(log_level::info, [&] {
    return "memory_pool falls back to cudaMalloc segments: " + why_not +
           ". Addresses still never move; growth adds segments instead of extending one range";
  });
  return make_device_malloc_backing(device, options.peer_devices);
}

// Each peer a device other than the pool's, named once, and able to reach the pool's device.
void expect_peers_reach(std::vector<int> const& peers, int device) {
  int const count = cuda::device_count();
  for (std::size_t i = 0; i < peers.size(); ++i) {
    int const peer = peers[i];
    std::string const which = "pool_options::peer_devices: device " + std::to_string(peer);
    GRAPHSTEP_EXPECTS(peer >= 0 && peer < count,
                      which + " does not exist (" + std::to_string(count) + " visible)");
    GRAPHSTEP_EXPECTS(peer != device, which + " is the pool's own device; list only others");
    GRAPHSTEP_EXPECTS(std::find(peers.begin(), peers.begin() + static_cast<std::ptrdiff_t>(i),
                                peer) == peers.begin() + static_cast<std::ptrdiff_t>(i),
                      which + " is listed twice");
    int reaches = 0;
    // Whether kernels on the peer (the accessing device) reach the pool's device's memory.
    int const accessing = peer;
    int const holding = device;
    GRAPHSTEP_CUDA_TRY(cudaDeviceCanAccessPeer(&reaches, accessing, holding));
    GRAPHSTEP_EXPECTS(reaches == 1, which + " cannot access device " + std::to_string(device) +
                                        " directly (cudaDeviceCanAccessPeer): copy the data "
                                        "there instead, or use a pool on that device");
  }
}

// The capture `stream` takes part in, if any.
std::optional<capture_id> capture_of(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetCaptureInfo(stream, &status, &id));
  if (status == cudaStreamCaptureStatusNone) return std::nullopt;
  return capture_id{id};
}

}  // namespace

graph_lease::graph_lease(std::shared_ptr<pool_state> pool, std::uint64_t graph) noexcept
    : pool_{std::move(pool)}, graph_{graph} {}

graph_lease::~graph_lease() {
  pool_->release_graph(graph_);
}

void graph_lease::before_replay(cudaStream_t stream) const {
  for (graph_lease const* lease = this; lease != nullptr; lease = lease->also_.get()) {
    lease->pool_->before_replay(lease->graph_, stream);
  }
}

void graph_lease::after_replay(cudaStream_t stream, cudaEvent_t launch) const {
  for (graph_lease const* lease = this; lease != nullptr; lease = lease->also_.get()) {
    lease->pool_->after_replay(lease->graph_, stream, launch, lease->memo_);
  }
}

bool graph_lease::replay_is_settled(cudaStream_t stream, cudaEvent_t launch) const noexcept {
  for (graph_lease const* lease = this; lease != nullptr; lease = lease->also_.get()) {
    if (!lease->pool_->replay_is_settled(lease->memo_, stream, launch)) return false;
  }
  return true;
}

void graph_lease::hold_also(std::shared_ptr<graph_lease> other) noexcept {
  also_ = std::move(other);
}

cuda_pool_device::cuda_pool_device(int device, std::unique_ptr<memory_backing> backing)
    : device_{device}, backing_{std::move(backing)} {}

pool_device::growth_status cuda_pool_device::grow(std::size_t bytes, growth& out) {
  nvtx_range const range{"graphstep::memory::memory_pool grow"};
  // cudaMalloc allocates on the current device, which may be another than the pool's.
  cuda::device_guard const on_device{device_};
  return backing_->grow(bytes, out);
}

std::size_t cuda_pool_device::shrink(std::uintptr_t base, std::size_t region_bytes,
                                     std::size_t free_bytes) {
  nvtx_range const range{"graphstep::memory::memory_pool trim"};
  return backing_->shrink(base, region_bytes, free_bytes);
}

void cuda_pool_device::record(event_id event, stream_id stream) {
  // Events belong to the pool's device: the stream they are recorded on is that device's.
  cuda::device_guard const on_device{device_};
  cuda::event recorded = [&] {
    if (spare_events_.empty()) return cuda::event{};
    cuda::event spare = std::move(spare_events_.back());
    spare_events_.pop_back();
    return spare;
  }();
  recorded.record(stream_of(stream));
  events_.emplace(event, std::move(recorded));
}

bool cuda_pool_device::complete(event_id event) {
  // A query never breaks a capture under way on this or another thread when it runs Relaxed.
  cuda::detail::relaxed_capture_mode const relaxed;
  return events_.at(event).query();
}

void cuda_pool_device::wait(stream_id stream, event_id event) {
  GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(stream_of(stream), events_.at(event).get(), 0));
}

bool cuda_pool_device::launch_complete(event_id launch) {
  cuda::detail::relaxed_capture_mode const relaxed;
  cudaError_t const status = cudaEventQuery(launch_of(launch));
  if (status == cudaErrorNotReady) {
    static_cast<void>(cudaGetLastError());
    return false;
  }
  GRAPHSTEP_CUDA_TRY(status);
  return true;
}

void cuda_pool_device::wait_for_launch(stream_id stream, event_id launch) {
  GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(stream_of(stream), launch_of(launch), 0));
}

void cuda_pool_device::forget(event_id event) noexcept {
  auto found = events_.find(event);
  if (found == events_.end()) return;
  cuda::event spare = std::move(found->second);
  events_.erase(found);
  // Re-recording an event never disturbs a wait already made on it (cudaEventRecord: waits
  // use the state at the time of the call), so it may be reused at once.
  try {
    spare_events_.push_back(std::move(spare));
  } catch (std::bad_alloc const&) {
    // Dropped: the event is destroyed instead of reused.
  }
}

void cuda_pool_device::keep_mapped_forever() noexcept {
  // Never destroyed (the driver may be gone by then), and reachable from here until the process
  // ends, so leak checkers do not count it.
  static std::vector<std::unique_ptr<memory_backing>>* kept = nullptr;
  static std::mutex mutex;
  std::lock_guard const lock{mutex};
  try {
    if (kept == nullptr) {
      kept = new std::vector<std::unique_ptr<memory_backing>>;  // NOLINT(*-owning-memory)
    }
    kept->push_back(std::move(backing_));
  } catch (std::bad_alloc const&) {
    static_cast<void>(backing_.release());  // unreachable then, but still mapped
  }
}

void cuda_pool_device::synchronize(event_id event) {
  cuda::detail::relaxed_capture_mode const relaxed;
  events_.at(event).synchronize();
}

pool_state::pool_state(pool_options const& options) {
  static std::atomic<std::uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  GRAPHSTEP_EXPECTS(options.growth_bytes > 0,
                    "pool_options::growth_bytes must be positive (it is the smallest growth step)");
  GRAPHSTEP_EXPECTS(options.alignment > 0 && (options.alignment & (options.alignment - 1)) == 0,
                    "pool_options::alignment must be a power of two, not " +
                        std::to_string(options.alignment) + "; use 256 (what CUDA guarantees)");
  cuda::require_device();
  int const count = cuda::device_count();
  GRAPHSTEP_EXPECTS(options.device >= -1 && options.device < count,
                    "pool_options::device is " + std::to_string(options.device) +
                        ", but the devices are numbered 0 to " + std::to_string(count - 1) +
                        "; give one of them, or -1 for the current device");
  device_id_ = options.device >= 0 ? options.device : cuda::current_device();
  expect_peers_reach(options.peer_devices, device_id_);
  cuda::device_guard const on_device{device_id_};
  device_ = std::make_unique<cuda_pool_device>(device_id_, make_backing(options, device_id_));
  pool_engine_options engine_options;
  engine_options.alignment = options.alignment;
  engine_options.growth_bytes = options.growth_bytes;
  engine_options.budget_bytes = options.budget_bytes;
  // PyTorch's host allocator never reuses a pinned block a capture used, for the same reason:
  // the host wrote it while capturing, and the replay reads what was written then.
  engine_options.graphs_share_memory = options.backing != pool_backing::pinned_host;
  engine_ = std::make_unique<pool_engine>(engine_options, *device_);
}

pool_state::~pool_state() {
  // Blocks given back eagerly were freed in stream order: the last free on each stream covers
  // them. Graphs' memory is idle too, for each graph_exec waits for its replays before it lets
  // go of its lease.
  try {
    cuda::device_guard const on_device{device_id_};
    for (event_id const event : engine_->pending_free_events()) device_->synchronize(event);
  } catch (std::exception const& e) {
    graphstep::detail::log_lazily(log_level::error, [&] {
      return std::string{"memory_pool: waiting for freed blocks failed, continuing: "} + e.what();
    });
  }
  engine_->drop_next_plan();  // its slab was never used
  std::size_t const never_given_back = engine_->stats().bytes_in_use;
  engine_.reset();
  if (never_given_back == 0) return;
  // A block never given back may still be used by work on any stream, which nothing short of a
  // device-wide wait covers, and that would break every capture under way on the device. The
  // memory stays mapped instead, for the life of the process.
  graphstep::detail::log_lazily(log_level::warning, [&] {
    return "a memory_pool was destroyed with " + std::to_string(never_given_back) +
           " bytes never deallocated; its memory stays mapped, since work on some stream may "
           "still use them. Deallocate every block before the pool's last user goes";
  });
  device_->keep_mapped_forever();
}

void pool_state::expect_own_device(cudaStream_t stream, char const* call) const {
  std::optional<int> const stream_device = cuda::detail::stream_device(stream);
  GRAPHSTEP_EXPECTS(!stream_device || *stream_device == device_id_,
                    std::string{call} + ": the pool is on device " + std::to_string(device_id_) +
                        ", the stream belongs to device " +
                        std::to_string(stream_device.value_or(-1)) + ": use a stream of device " +
                        std::to_string(device_id_) + ", or a pool on device " +
                        std::to_string(stream_device.value_or(-1)) + " (pool_options::device = " +
                        std::to_string(stream_device.value_or(-1)) + ") for that device's work");
}

void* pool_state::allocate(std::size_t bytes, cudaStream_t stream) {
  expect_own_device(stream, "memory_pool::allocate");
  return reinterpret_cast<void*>(engine_->allocate(bytes, stream_key(stream), capture_of(stream)));
}

void pool_state::deallocate(void* pointer, cudaStream_t stream) {
  expect_own_device(stream, "memory_pool::deallocate");
  engine_->deallocate(reinterpret_cast<std::uintptr_t>(pointer), stream_key(stream),
                      capture_of(stream));
}

void pool_state::begin_capture(unsigned long long capture_id, std::uint64_t graph, std::string name,
                               cudaStream_t origin) {
  nvtx_range const range{"graphstep::memory::memory_pool begin_capture"};
  expect_own_device(origin, "memory_pool::open_capture");
  engine_->begin_capture(capture_id, graph, std::move(name), stream_key(origin));
}

void pool_state::join(unsigned long long capture_id, cudaStream_t side, cudaStream_t into) {
  engine_->join(capture_id, stream_key(side), stream_key(into));
}

std::string pool_state::capture_problem(unsigned long long capture_id) const {
  return engine_->capture_problem(capture_id);
}

std::shared_ptr<graph_lease> pool_state::finish_capture(unsigned long long capture_id, bool success) {
  auto const graph = engine_->finish_capture(capture_id, success);
  if (!graph) return nullptr;
  return std::make_shared<graph_lease>(shared_from_this(), *graph);
}

void pool_state::before_replay(std::uint64_t graph, cudaStream_t stream) {
  engine_->before_replay(graph, stream_key(stream));
}

void pool_state::after_replay(std::uint64_t graph, cudaStream_t stream, cudaEvent_t launch,
                              replay_memo& memo) {
  engine_->after_replay(graph, stream_key(stream), launch_key(launch), memo);
}

void pool_state::release_graph(std::uint64_t graph) noexcept {
  engine_->release_graph(graph);
}

pool_statistics pool_state::statistics() const {
  pool_statistics out = engine_->stats();
  out.backing = device_->kind();
  return out;
}

void pool_state::keep_after_graph(void* output) {
  engine_->keep_after_graph(reinterpret_cast<std::uintptr_t>(output));
}

void pool_state::record_use(void* pointer, cudaStream_t stream) {
  GRAPHSTEP_EXPECTS(!capture_of(stream),
                    "memory_pool::record_use: the stream is capturing; inside a capture, order "
                    "a side stream's use with graphs::capture_scope::join (or an event) instead");
  expect_own_device(stream, "memory_pool::record_use");
  cuda::device_guard const on_device{device_id_};
  engine_->record_use(reinterpret_cast<std::uintptr_t>(pointer), stream_key(stream));
}

std::size_t pool_state::trim() {
  cuda::device_guard const on_device{device_id_};
  return engine_->trim();
}

std::vector<pool_segment> pool_state::snapshot() const {
  std::vector<pool_segment> out;
  for (auto const& region : engine_->snapshot()) {
    pool_segment segment;
    segment.base = reinterpret_cast<void*>(region.base);
    segment.bytes = region.bytes;
    for (auto const& b : region.blocks) {
      segment.blocks.push_back(pool_block{reinterpret_cast<void*>(b.address), b.size, !b.free,
                                          b.owner, b.free && b.any_stream, b.touched,
                                          b.kept_after_graph});
    }
    out.push_back(std::move(segment));
  }
  return out;
}

std::size_t pool_state::bytes_held_by(std::uint64_t graph) const {
  return engine_->bytes_held_by(graph);
}

std::size_t pool_state::bytes_pinned_by(std::uint64_t graph) const {
  return engine_->bytes_pinned_by(graph);
}

void pool_state::begin_trace() {
  engine_->begin_trace();
}

memory::allocation_trace pool_state::end_trace() {
  return engine_->end_trace();
}

memory::allocation_plan pool_state::plan_next_capture(memory::allocation_trace trace) {
  return engine_->plan_next_capture(std::move(trace));
}

namespace {
char const* backing_name(pool_backing backing) {
  switch (backing) {
    case pool_backing::virtual_memory: return "virtual_memory";
    case pool_backing::device_malloc: return "device_malloc";
    case pool_backing::pinned_host: return "pinned_host";
    case pool_backing::automatic: break;
  }
  return "automatic";
}
}  // namespace

void pool_state::begin_timeline(std::size_t max_allocations) {
  engine_->begin_timeline(max_allocations);
}

pool_timeline pool_state::timeline() const {
  pool_timeline out = engine_->timeline();
  out.pool = id_;
  out.backing = backing_name(device_->kind());
  return out;
}

pool_timeline pool_state::end_timeline() {
  pool_timeline out = engine_->end_timeline();
  out.pool = id_;
  out.backing = backing_name(device_->kind());
  return out;
}

void pool_state::name_allocation(void* address, std::string name) {
  engine_->name_allocation(reinterpret_cast<std::uintptr_t>(address), std::move(name));
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
  return checked(state_).allocate(bytes, stream.get());
}
void memory_pool::deallocate(void* pointer, cuda::stream_view stream) {
  checked(state_).deallocate(pointer, stream.get());
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
std::vector<pool_segment> memory_pool::snapshot() const {
  return checked(state_).snapshot();
}
std::vector<pool_block> memory_pool::live_allocations() const {
  std::vector<pool_block> live;
  for (auto& segment : checked(state_).snapshot()) {
    for (auto& block : segment.blocks) {
      if (block.live) live.push_back(std::move(block));
    }
  }
  return live;
}
std::size_t memory_pool::bytes_held_by(std::uint64_t graph_id) const {
  return checked(state_).bytes_held_by(graph_id);
}
std::size_t memory_pool::bytes_pinned_by(std::uint64_t graph_id) const {
  return checked(state_).bytes_pinned_by(graph_id);
}
pool_capture memory_pool::open_capture(cuda::stream_view stream, std::uint64_t graph_id,
                                       std::string name) {
  detail::pool_state& state = checked(state_);
  cudaStreamCaptureStatus status{};
  unsigned long long capture_id = 0;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetCaptureInfo(stream.get(), &status, &capture_id));
  GRAPHSTEP_EXPECTS(status == cudaStreamCaptureStatusActive,
                    "memory_pool::open_capture: the stream of '" + name +
                        "' is not capturing; begin the capture first");
  state.begin_capture(capture_id, graph_id, std::move(name), stream.get());
  return pool_capture{state_, capture_id};
}
void memory_pool::keep_after_graph(void* output) {
  checked(state_).keep_after_graph(output);
}
void memory_pool::record_use(void* pointer, cuda::stream_view stream) {
  checked(state_).record_use(pointer, stream.get());
}
std::size_t memory_pool::trim() {
  return checked(state_).trim();
}
std::uint64_t memory_pool::id() const {
  return checked(state_).id();
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
void memory_pool::begin_timeline(std::size_t max_allocations) {
  checked(state_).begin_timeline(max_allocations);
}
pool_timeline memory_pool::timeline() const {
  return checked(state_).timeline();
}
pool_timeline memory_pool::end_timeline() {
  return checked(state_).end_timeline();
}
void memory_pool::name_allocation(void* address, std::string name) {
  checked(state_).name_allocation(address, std::move(name));
}

}  // namespace graphstep::memory
