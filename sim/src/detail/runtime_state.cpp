#include "detail/runtime_state.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "detail/environment.hpp"
#include "detail/guarded_memory.hpp"
#include "detail/kernel_accesses.hpp"
#include "detail/symbol_table.hpp"

namespace graphstep::sim::detail {

namespace {

// How many operations deferred execution keeps queued before the host waits for the oldest
// (a GPU's queue of pending launches holds about a thousand).
constexpr std::size_t queued_work_limit = 1024;

void fill_properties(cudaDeviceProp& p, int ordinal) {
  static_cast<void>(std::snprintf(p.name, sizeof p.name, "graphstep simulated device %d", ordinal));
  // An H100-like device, so that code choosing paths by capability takes the sm_90 ones.
  p.major = 9;
  p.minor = 0;
  p.totalGlobalMem = simulated_memory_bytes();
  p.sharedMemPerBlock = std::size_t{48} << 10;
  p.sharedMemPerBlockOptin = std::size_t{227} << 10;
  p.sharedMemPerMultiprocessor = std::size_t{228} << 10;
  p.regsPerBlock = 65536;
  p.regsPerMultiprocessor = 65536;
  p.warpSize = 32;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsDim[0] = 1024;
  p.maxThreadsDim[1] = 1024;
  p.maxThreadsDim[2] = 64;
  p.maxGridSize[0] = 0x7fffffff;
  p.maxGridSize[1] = 65535;
  p.maxGridSize[2] = 65535;
  p.multiProcessorCount = 132;
  p.maxThreadsPerMultiProcessor = 2048;
  p.totalConstMem = std::size_t{64} << 10;
  p.memPitch = 0x7fffffff;
  p.textureAlignment = 512;
  p.l2CacheSize = 50 * 1024 * 1024;
  p.concurrentKernels = 1;
  p.asyncEngineCount = 2;
  p.unifiedAddressing = 1;
  p.memoryBusWidth = 5120;
  // One device per PCI bus, as GPUs sit on a node (cudaDeviceGetPCIBusId reads these).
  p.pciDomainID = 0;
  p.pciBusID = ordinal + 1;
  p.pciDeviceID = 0;
  p.maxBlocksPerMultiProcessor = 32;
  p.reservedSharedMemPerBlock = std::size_t{1} << 10;  // sm_80 and later reserve 1 KiB a block
  p.persistingL2CacheMaxSize = p.l2CacheSize / 4 * 3;
  p.accessPolicyMaxWindowSize = 134213632;  // an H100's (cudaDevAttrMaxAccessPolicyWindowSize)
  p.memoryPoolsSupported = 1;
  p.managedMemory = 1;  // cudaMallocManaged; an H100 also migrates pages concurrently
  p.concurrentManagedAccess = 1;
  p.pageableMemoryAccess = 0;
  p.canMapHostMemory = 1;
  p.integrated = 0;
  p.cooperativeLaunch = 1;  // cudaLaunchCooperativeKernel, as on an H100
}

void populate(platform& p) {
  p.race_checking = initial_race_mode();
  p.block_threads = initial_block_threads();
  execution_setting const execution = initial_execution();
  p.execution = execution.mode;
  p.interleaving.seed(execution.seed);
  int const count = simulated_device_count();
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    auto device = std::make_unique<device_state>();
    device->ordinal = ordinal;
    fill_properties(device->properties, ordinal);
    // cudaDeviceGetLimit's defaults on sm_90 (the thread stack, the printf FIFO, the malloc
    // heap, the device runtime's pending launches; the L2 fetch granularity and no persisting
    // L2). cudaLimitDevRuntimeSyncDepth is not supported on compute capability 9.0.
    device->limits = {{cudaLimitStackSize, 1024},
                      {cudaLimitPrintfFifoSize, std::size_t{1} << 20},
                      {cudaLimitMallocHeapSize, std::size_t{8} << 20},
                      {cudaLimitDevRuntimePendingLaunchCount, 2048},
                      {cudaLimitMaxL2FetchGranularity, 64},
                      {cudaLimitPersistingL2CacheSize, 0}};
    device->legacy_stream = std::make_unique<stream_state>();
    device->legacy_stream->device = ordinal;
    device->legacy_stream->legacy = true;
    device->legacy_stream->id = p.next_stream_id++;
    // "The default mempool of a device contains device memory from that device"
    // (cudaDeviceGetDefaultMemPool); "By default, a device's current memory pool is its default
    // memory pool" (cudaDeviceSetMemPool).
    auto pool = std::make_unique<mem_pool_state>();
    pool->device = ordinal;
    pool->is_default = true;
    device->default_pool = device->current_pool = pool.get();
    p.pools.emplace(pool.get(), std::move(pool));
    p.devices.push_back(std::move(device));
  }
}

}  // namespace

platform& state() {
  // Never destroyed: static destructors of other libraries may still call CUDA at exit.
  static platform* const instance = [] {
    auto* created = new platform;
    populate(*created);
    return created;
  }();
  return *instance;
}

namespace {
// Read by threads as they start, outside the state's mutex.
std::atomic<int> first_valid_device{0};
}  // namespace

int implicit_device() noexcept {
  return first_valid_device.load();
}

void set_implicit_device(int device) noexcept {
  first_valid_device.store(device);
}

thread_state& this_thread() {
  thread_local thread_state instance = [] {
    thread_state initial;
    initial.device = implicit_device();
    return initial;
  }();
  return instance;
}

cudaError_t fail(cudaError_t error) noexcept {
  if (error != cudaSuccess) this_thread().last_error = error;
  return error;
}

cudaError_t enter_runtime_call() {
  if (this_thread().in_host_function) return fail(cudaErrorNotPermitted);
  if (cudaError_t const sticky = sticky_error(); sticky != cudaSuccess) return fail(sticky);
  progress();
  return cudaSuccess;
}

namespace {

// Records, once per thread and device, that the thread used the device's primary context.
void record_context_use(thread_state& me, device_state& device) noexcept {
  if (device.ordinal >= 32) return;  // beyond the mask (the platform has at most 16 devices)
  std::uint32_t const bit = 1U << static_cast<std::uint32_t>(device.ordinal);
  if ((me.contexts_used & bit) != 0) return;
  try {
    std::lock_guard<std::mutex> const lock{device.context_mutex};
    device.context_threads.insert(std::this_thread::get_id());
    me.contexts_used |= bit;
  } catch (...) {
    // Not recorded; the next call tries again.
  }
}

}  // namespace

device_state* current_device() {
  auto& devices = state().devices;
  thread_state& me = this_thread();
  if (me.device < 0 || static_cast<std::size_t>(me.device) >= devices.size()) return nullptr;
  device_state* const device = devices[static_cast<std::size_t>(me.device)].get();
  record_context_use(me, *device);
  return device;
}

void use_primary_context() noexcept {
  static_cast<void>(current_device());
}

void use_primary_context_of(device_state& device) noexcept {
  record_context_use(this_thread(), device);
}

cudaError_t sticky_error() noexcept {
  device_state const* device = current_device();
  return device == nullptr ? cudaSuccess : device->sticky_error;
}

stream_state* find_stream(cudaStream_t stream) {
  auto& p = state();
  if (stream == nullptr || stream == cudaStreamLegacy) {
    device_state* device = current_device();
    return device == nullptr ? nullptr : device->legacy_stream.get();
  }
  if (stream == cudaStreamPerThread) {
    int const device = this_thread().device;
    auto& slot = p.per_thread_streams[{std::this_thread::get_id(), device}];
    if (!slot) {
      // The per-thread default stream is blocking: it synchronizes with the legacy stream
      // (cudaStreamPerThread in driver_types.h; CUDA Programming Guide, "Default Stream").
      slot = std::make_unique<stream_state>();
      slot->device = device;
      slot->per_thread = true;
      slot->id = p.next_stream_id++;
    }
    return slot.get();
  }
  auto* candidate = reinterpret_cast<stream_state*>(stream);
  return p.streams.count(candidate) != 0 ? candidate : nullptr;
}

event_state* find_event(cudaEvent_t event) {
  auto* candidate = reinterpret_cast<event_state*>(event);
  return state().events.count(candidate) != 0 ? candidate : nullptr;
}

graph_state* find_graph(cudaGraph_t graph) {
  auto* candidate = reinterpret_cast<graph_state*>(graph);
  return state().graphs.count(candidate) != 0 ? candidate : nullptr;
}

exec_state* find_exec(cudaGraphExec_t exec) {
  auto* candidate = reinterpret_cast<exec_state*>(exec);
  return state().execs.count(candidate) != 0 ? candidate : nullptr;
}

namespace {

template <typename Enumeration>
int as_int(Enumeration const& value) noexcept {
  static_assert(sizeof(Enumeration) == sizeof(int));
  int read = 0;
  std::memcpy(&read, &value, sizeof read);
  return read;
}

}  // namespace

bool cache_config_valid(cudaFuncCache const& config) noexcept {
  int const value = as_int(config);
  return value >= cudaFuncCachePreferNone && value <= cudaFuncCachePreferEqual;
}

bool shared_mem_config_valid(cudaSharedMemConfig const& config) noexcept {
  int const value = as_int(config);
  return value >= cudaSharedMemBankSizeDefault && value <= cudaSharedMemBankSizeEightByte;
}

mem_pool_state* find_pool(cudaMemPool_t pool) {
  auto const& pools = state().pools;
  auto const it = pools.find(reinterpret_cast<mem_pool_state const*>(pool));
  return it == pools.end() || it->second->destroyed ? nullptr : it->second.get();
}

bool pool_take(mem_pool_state& pool, std::size_t bytes) {
  device_state& device = *state().devices[static_cast<std::size_t>(pool.device)];
  if (pool.max_size != 0 && bytes > pool.max_size - std::min(pool.used, pool.max_size)) {
    return false;
  }
  std::size_t const free_reserve = pool.reserved - pool.used;
  std::size_t const growth = bytes > free_reserve ? bytes - free_reserve : 0;
  if (growth > device.properties.totalGlobalMem - device.used_bytes) return false;
  device.used_bytes += growth;
  pool.reserved += growth;
  pool.used += bytes;
  pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
  pool.used_high = std::max(pool.used_high, pool.used);
  return true;
}

void trim_pool(mem_pool_state& pool, std::size_t keep) {
  std::size_t const kept = std::max(pool.used, keep);
  if (pool.reserved <= kept) return;
  state().devices[static_cast<std::size_t>(pool.device)]->used_bytes -= pool.reserved - kept;
  pool.reserved = kept;
}

void pool_give_back(mem_pool_state& pool, std::size_t bytes) {
  pool.used -= std::min(pool.used, bytes);
  if (pool.destroyed && pool.used == 0) {
    // "the resources associated with the pool will be released automatically once there are
    // no more outstanding allocations" (cudaMemPoolDestroy).
    trim_pool(pool, 0);
    state().pools.erase(&pool);
  }
}

void release_pool_memory(int device) {
  for (auto const& [handle, pool] : state().pools) {
    if (pool->device == device && pool->reserved > pool->release_threshold) {
      trim_pool(*pool, static_cast<std::size_t>(pool->release_threshold));
    }
  }
}

allocation const* find_allocation(void const* address) {
  auto const& allocations = state().allocations;
  auto const where = reinterpret_cast<std::uintptr_t>(address);
  auto it = allocations.upper_bound(where);
  if (it == allocations.begin()) return nullptr;
  --it;
  allocation const& candidate = it->second;
  return where < candidate.base + candidate.bytes ? &candidate : nullptr;
}

// A device range a copy or memset touches must lie inside live memory: one allocation, or
// virtual memory mapped without a gap (cuMemMap of adjacent chunks makes one range). A GPU faults
// or corrupts memory otherwise; here the call fails with cudaErrorInvalidValue.
bool device_range_valid(void const* address, std::size_t bytes) {
  allocation const* owner = find_allocation(address);
  if (owner == nullptr) return symbol_holds(address, bytes);
  std::uintptr_t const end = reinterpret_cast<std::uintptr_t>(address) + bytes;
  while (end > owner->base + owner->bytes) {
    if (owner->kind != memory_kind::virtual_reservation) return false;
    allocation const* next =
        find_allocation(reinterpret_cast<void const*>(owner->base + owner->bytes));
    if (next == nullptr || next->kind != memory_kind::virtual_reservation) return false;
    owner = next;
  }
  return true;
}

void invalidate(capture_state& capture, cudaError_t reason, char const* call) {
  if (capture.invalidated_by != cudaSuccess) return;
  capture.invalidated_by = reason;
  capture.invalidating_call = call;
  capture.invalidating_library_call = this_thread().library_call;
}

library_call_scope::library_call_scope(char const* name) noexcept
    : outer_{this_thread().library_call} {
  // The outermost entry point is the one the user called.
  if (outer_ == nullptr) this_thread().library_call = name;
}

library_call_scope::~library_call_scope() { this_thread().library_call = outer_; }

cudaError_t fail_leaving_capture_valid(capture_state& capture, char const* call,
                                       cudaError_t error) noexcept {
  if (capture.failed_call == nullptr) {
    capture.failed_call = call;
    capture.failed_call_error = error;
  }
  return fail(error);
}

cudaError_t check_unsafe_call(char const* call) {
  // cudaThreadExchangeStreamCaptureMode (cuda_runtime_api.h): under Global, a thread may not make
  // potentially unsafe calls while it has a capture not begun in Relaxed mode, or while another
  // thread has a capture begun in Global mode; under ThreadLocal only its own captures count;
  // under Relaxed nothing is prohibited. The offending captures are invalidated.
  auto const& me = this_thread();
  if (me.capture_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  std::thread::id const thread = std::this_thread::get_id();
  bool prohibited = false;
  for (capture_state* capture : state().captures) {
    bool const own = capture->thread == thread && capture->mode != cudaStreamCaptureModeRelaxed;
    bool const others = me.capture_mode == cudaStreamCaptureModeGlobal &&
                        capture->thread != thread && capture->mode == cudaStreamCaptureModeGlobal;
    if (own || others) {
      invalidate(*capture, cudaErrorStreamCaptureUnsupported, call);
      prohibited = true;
    }
  }
  return prohibited ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t check_device_wide_sync(int device, char const* call) {
  bool any = false;
  for (capture_state* capture : state().captures) {
    if (capture->device != device) continue;
    invalidate(*capture, cudaErrorStreamCaptureUnsupported, call);
    any = true;
  }
  return any ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

double now_ms() noexcept {
  using clock = std::chrono::steady_clock;
  static clock::time_point const origin = clock::now();
  return std::chrono::duration<double, std::milli>(clock::now() - origin).count();
}

// The legacy stream waits for, and is waited for by, every blocking stream of its device; a
// blocking stream that is capturing cannot be waited for, so the call fails and the capture is
// invalidated (cudaErrorStreamCaptureImplicit in driver_types.h; CUDA Programming Guide,
// "Prohibited and Unhandled Operations": "any attempted use of the legacy stream is invalid").
cudaError_t check_legacy_use(stream_state const& stream, char const* call) {
  if (!stream.legacy) return cudaSuccess;
  bool implicit = false;
  for (capture_state* capture : state().captures) {
    if (capture->device != stream.device) continue;
    for (stream_state const* member : capture->streams) {
      if (member->blocking()) {
        invalidate(*capture, cudaErrorStreamCaptureImplicit, call);
        implicit = true;
        break;
      }
    }
  }
  return implicit ? cudaErrorStreamCaptureImplicit : cudaSuccess;
}

namespace {

// Host code run as stream work: host functions (cudaLaunchHostFunc, host nodes) and stream
// callbacks. It must not call CUDA (cudaLaunchHostFunc in cuda_runtime_api.h): the simulator
// refuses every call made from it with cudaErrorNotPermitted. Device memory is closed to it. Its
// reads and writes of pinned and managed memory are the operation's for the race checker, seen
// as a kernel's are (kernel_accesses.hpp) where its source was built instrumented.
template <class Call>
void run_host_code(Call const& call) {
  auto& me = this_thread();
  bool const outer = me.in_host_function;
  me.in_host_function = true;
  std::optional<kernel_accesses> accesses;
  if (state().race_checking != race_mode::off && kernel_accesses_hooked()) accesses.emplace();
  {
    host_code_inside_device_work const closed;
    std::optional<watching_kernel> watching;
    if (accesses) watching.emplace(*accesses);
    call();
  }
  me.in_host_function = outer;
  if (accesses) accesses->report_to(state().races);
}

void run_host_function(cudaHostFn_t function, void* data) {
  run_host_code([&] { function(data); });
}

// cudaStreamAddCallback: "The callback may be passed cudaSuccess or an error code. In the event
// of a device error, all subsequently executed callbacks will receive an appropriate
// cudaError_t"; it runs as a host function does.
void run_stream_callback(node_state const& node, cudaError_t status) {
  run_host_code([&] { node.stream_callback(node.callback_stream, status, node.host_data); });
}

// Whether the race checker sees the kernel's own accesses (kernel_accesses.hpp), rather than its
// pointer arguments.
bool watched(kernel_task const& task) {
  return state().race_checking != race_mode::off && task.accesses_instrumented() &&
         kernel_accesses_hooked();
}

void run_kernel(kernel_task const& task, int device) {
  std::optional<kernel_accesses> accesses;
  if (watched(task)) accesses.emplace();
  try {
    // Names the kernel in fault reports; closes memory its device may not access.
    running_kernel const named{task.name(), device};
    std::optional<watching_kernel> watching;
    if (accesses) watching.emplace(*accesses);
    task.run();
  } catch (kernel_fault const& fault) {
    // A fault in a kernel corrupts the context: every later call returns the error
    // (cudaErrorLaunchFailure and cudaErrorIllegalAddress in driver_types.h).
    static_cast<void>(std::fprintf(stderr, "graphstep simulated device: kernel %s faulted: %s\n",
                                   task.name(), fault.what()));
    state().devices[static_cast<std::size_t>(device)]->sticky_error = fault.code();
  }
  if (accesses) accesses->report_to(state().races);
}

}  // namespace

namespace {

// Calls `row(destination, source)` for each row a copy moves, slice by slice.
template <typename Row>
void for_each_row(memcpy_params const& copy, Row const& row) {
  if (copy.bytes == 0) return;
  for (std::size_t z = 0; z < copy.depth; ++z) {
    auto* destination =
        static_cast<unsigned char*>(copy.destination) + z * copy.destination_slice_pitch;
    auto const* source =
        static_cast<unsigned char const*>(copy.source) + z * copy.source_slice_pitch;
    for (std::size_t y = 0; y < copy.height; ++y) {
      row(destination, source);
      destination += copy.destination_pitch;
      source += copy.source_pitch;
    }
  }
}

bool tracked(void const* address) {
  return find_allocation(address) != nullptr || symbol_holds(address, 1);
}

void record_accesses(node_state const& node) {
  auto& p = state();
  if (p.race_checking == race_mode::off) return;
  switch (node.type) {
    case cudaGraphNodeTypeKernel:
      if (watched(*node.kernel)) break;  // recorded as the kernel runs
      for (pointer_argument const& argument : node.kernel->pointer_arguments()) {
        if (tracked(argument.address)) {
          p.races.access(argument.address, std::max<std::size_t>(argument.bytes, 1),
                         argument.read_only ? access_kind::read : access_kind::write);
        }
      }
      break;
    case cudaGraphNodeTypeMemset: {
      auto const* row = static_cast<unsigned char const*>(node.memset.dst);
      for (std::size_t y = 0; y < std::max<std::size_t>(node.memset.height, 1); ++y) {
        p.races.access(row, node.memset.width * node.memset.elementSize, access_kind::write);
        row += node.memset.pitch;
      }
      break;
    }
    case cudaGraphNodeTypeMemFree:
      // cudaFreeAsync outside a graph writes the whole allocation, on its stream: another
      // stream's unordered use of the memory before it is handed out again is a race.
      if (node.owner == nullptr) {
        p.races.access(node.memory, node.memory_bytes, access_kind::write);
      }
      break;
    case cudaGraphNodeTypeMemcpy: {
      bool const source_tracked = tracked(node.copy.source);
      bool const destination_tracked = tracked(node.copy.destination);
      std::size_t const bytes = node.copy.bytes;
      for_each_row(node.copy, [&](unsigned char const* destination, unsigned char const* source) {
        if (source_tracked) p.races.access(source, bytes, access_kind::read);
        if (destination_tracked) p.races.access(destination, bytes, access_kind::write);
      });
      break;
    }
    default: break;
  }
}

// The runtime call that issues work of the node's kind to a stream, to name it when the legacy
// stream's use breaks a capture.
char const* api_call_of(node_state const& node) noexcept {
  switch (node.type) {
    case cudaGraphNodeTypeKernel: return "cudaLaunchKernel";
    case cudaGraphNodeTypeMemset: return "cudaMemsetAsync";
    case cudaGraphNodeTypeMemcpy: return "cudaMemcpyAsync";
    case cudaGraphNodeTypeHost: return "cudaLaunchHostFunc";
    case cudaGraphNodeTypeEventRecord: return "cudaEventRecord";
    case cudaGraphNodeTypeMemFree: return "cudaFreeAsync";
    case cudaGraphNodeTypeGraph: return "cudaGraphLaunch";
    default: return "a call issuing work to the legacy stream";
  }
}

std::string describe(node_state const& node) {
  switch (node.type) {
    case cudaGraphNodeTypeKernel: return std::string{"kernel "} + node.kernel->name();
    case cudaGraphNodeTypeMemset:
      return "memset of " + std::to_string(node.memset.width) + " bytes";
    case cudaGraphNodeTypeMemcpy:
      if (node.copy.depth > 1) {
        return "3-D memcpy of " + std::to_string(node.copy.depth) + " slices of " +
               std::to_string(node.copy.height) + " rows of " + std::to_string(node.copy.bytes) +
               " bytes";
      }
      if (node.copy.height > 1) {
        return "2-D memcpy of " + std::to_string(node.copy.height) + " rows of " +
               std::to_string(node.copy.bytes) + " bytes";
      }
      return "memcpy of " + std::to_string(node.copy.bytes) + " bytes";
    case cudaGraphNodeTypeHost: return "host function";
    case cudaGraphNodeTypeEventRecord: return "event record";
    case cudaGraphNodeTypeMemFree: return "cudaFreeAsync";
    default: return "operation";
  }
}

}  // namespace

namespace {

// Writes `count` copies of the low `Bytes` bytes of `value` from `row`. Each copy has a size
// known here, so the compiler writes it in place: a copy of a size known only at run time is a
// call to the C library's memcpy, which this library's link wraps (kernel_accesses.cpp), one
// call per element.
template <std::size_t Bytes>
void fill_row(unsigned char* row, std::size_t count, unsigned value) {
  std::array<unsigned char, Bytes> element{};
  std::memcpy(element.data(), &value, Bytes);  // the low bytes on a little-endian host, as CUDA
  for (std::size_t i = 0; i < count; ++i) std::memcpy(row + i * Bytes, element.data(), Bytes);
}

// A memset node: `value` in elements of 1, 2 or 4 bytes (checked when the node was made), row
// by row.
void run_memset(cudaMemsetParams const& memset) {
  auto* row = static_cast<unsigned char*>(memset.dst);
  for (std::size_t y = 0; y < std::max<std::size_t>(memset.height, 1); ++y) {
    switch (memset.elementSize) {
      case 1: std::memset(row, static_cast<int>(memset.value & 0xFFU), memset.width); break;
      case 2: fill_row<2>(row, memset.width, memset.value); break;
      default: fill_row<4>(row, memset.width, memset.value); break;
    }
    row += memset.pitch;
  }
}

// What a launch's record nodes recorded has run: work waiting for those events may go on.
void mark_recorded(launch_ordering const& ordering) {
  for (auto const& [line, tick] : ordering.recorded) {
    unsigned long long& done = state().completed[line];
    done = std::max(done, tick);
  }
}

}  // namespace

// Graphs nest (child graphs, conditional bodies): execution recurses with them.
void execute(node_state const& node) {  // NOLINT(misc-no-recursion)
  if (node.disabled) return;            // an empty node (cudaGraphNodeSetEnabled)
  device_work const running;
  record_accesses(node);
  int const device = node.owner != nullptr ? node.owner->device : node.device;
  cudaError_t const device_error = state().devices[static_cast<std::size_t>(device)]->sticky_error;
  if (node.stream_callback != nullptr) {
    run_stream_callback(node, device_error);  // also after a device error
    return;
  }
  if (device_error != cudaSuccess) {
    // A launch skipped after a device fault still ends: work waiting for its events goes on.
    if (node.ordering != nullptr) mark_recorded(*node.ordering);
    return;
  }
  switch (node.type) {
    case cudaGraphNodeTypeKernel: run_kernel(*node.kernel, device); break;
    case cudaGraphNodeTypeMemset: run_memset(node.memset); break;
    case cudaGraphNodeTypeMemcpy: {
      std::size_t const bytes = node.copy.bytes;
      for_each_row(node.copy, [bytes](unsigned char* destination, unsigned char const* source) {
        std::memmove(destination, source, bytes);
      });
      break;
    }
    case cudaGraphNodeTypeHost: run_host_function(node.host_function, node.host_data); break;
    case cudaGraphNodeTypeEventRecord:
      // Whether the event is a capture's was decided when the record was issued (cudaEventRecord,
      // cudaGraphLaunch): a capture may have recorded it since.
      node.event->recorded = true;
      node.event->milliseconds = now_ms();
      break;
    case cudaGraphNodeTypeGraph: execute_graph(*node.child, node.ordering.get()); break;
    case cudaGraphNodeTypeConditional: {
      auto const& handle = state().conditionals.at(node.conditional.handle);
      auto const& bodies = node.conditional.bodies;
      switch (node.conditional.type) {
        case cudaGraphCondTypeIf:
          if (handle->value != 0) {
            execute_graph(*bodies[0]);
          } else if (bodies.size() > 1) {
            execute_graph(*bodies[1]);
          }
          break;
        case cudaGraphCondTypeWhile:
          // The body runs while the value is non-zero, checked before each pass.
          while (handle->value != 0 &&
                 state().devices[static_cast<std::size_t>(device)]->sticky_error == cudaSuccess) {
            execute_graph(*bodies[0]);
          }
          break;
        case cudaGraphCondTypeSwitch:
          if (handle->value < bodies.size()) execute_graph(*bodies[handle->value]);
          break;
        default: break;
      }
      break;
    }
    case cudaGraphNodeTypeWaitEvent:
    case cudaGraphNodeTypeEmpty:
    case cudaGraphNodeTypeMemAlloc:
    case cudaGraphNodeTypeMemFree:
    default: break;
  }
  if (node.completion) node.completion();
}

namespace {

// Each node's ancestors in the graph, one bit per node index.
std::vector<std::vector<std::uint64_t>> ancestors_of(
    graph_state const& graph, std::unordered_map<node_state const*, std::size_t> const& index) {
  std::size_t const words = (graph.nodes.size() + 63) / 64;
  std::vector<std::vector<std::uint64_t>> ancestors(graph.nodes.size(),
                                                    std::vector<std::uint64_t>(words));
  // In topological order: a node's dependencies have their ancestors before it is reached.
  for (node_state const* node : topological_order(graph)) {
    std::size_t const i = index.at(node);
    for (node_state const* dependency : node->dependencies) {
      std::size_t const d = index.at(dependency);
      for (std::size_t w = 0; w < words; ++w) ancestors[i][w] |= ancestors[d][w];
      ancestors[i][d / 64] |= std::uint64_t{1} << (d % 64);
    }
  }
  return ancestors;
}

// The order a launch runs its nodes in: creation order, or in interleaved mode a topological
// order drawn from the seeded generator, since a GPU runs the branches of a graph in any order
// or at once.
std::vector<std::size_t> run_order(
    graph_state const& graph, std::unordered_map<node_state const*, std::size_t> const& index) {
  std::size_t const count = graph.nodes.size();
  std::vector<std::size_t> order;
  order.reserve(count);
  auto& p = state();
  if (p.execution != execution_mode::interleaved) {
    for (node_state const* node : topological_order(graph)) order.push_back(index.at(node));
    return order;
  }
  std::vector<std::size_t> waiting_on(count);
  std::vector<std::vector<std::size_t>> dependents(count);
  for (std::size_t i = 0; i < count; ++i) {
    for (node_state const* dependency : graph.nodes[i]->dependencies) {
      ++waiting_on[i];
      dependents[index.at(dependency)].push_back(i);
    }
  }
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < count; ++i) {
    if (waiting_on[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    std::size_t const pick =
        std::uniform_int_distribution<std::size_t>{0, ready.size() - 1}(p.interleaving);
    std::size_t const next = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    order.push_back(next);
    for (std::size_t const dependent : dependents[next]) {
      if (--waiting_on[dependent] == 0) ready.push_back(dependent);
    }
  }
  return order;
}

}  // namespace

namespace {

// NOLINTNEXTLINE(misc-no-recursion): graphs nest
void run_nodes(graph_state const& graph, launch_ordering const* ordering) {
  // Nodes are stored in creation order, a topological order unless cudaGraphAddDependencies
  // added an edge against it (topological_order then gives one).
  for (auto const& handle : graph.conditionals) {
    if (handle->assign_default) handle->value = handle->default_value;
  }
  device_work const running;  // open once for the whole launch, not once per node
  auto& p = state();
  // The nodes of a launch are operations of their own, ordered by the graph's edges; a child
  // graph or a conditional body runs as part of its node.
  bool const own_operations = p.race_checking != race_mode::off && !p.races.in_graph_launch();
  if (!own_operations && p.execution != execution_mode::interleaved) {
    if (graph.edges_follow_creation_order) {
      for (auto const& node : graph.nodes) execute(*node);  // creation order, nothing to track
    } else {
      for (node_state const* node : topological_order(graph)) execute(*node);
    }
    return;
  }
  std::unordered_map<node_state const*, std::size_t> index;
  index.reserve(graph.nodes.size());
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) index.emplace(graph.nodes[i].get(), i);
  std::vector<std::size_t> const order = run_order(graph, index);
  if (!own_operations) {
    for (std::size_t const i : order) execute(*graph.nodes[i]);
    return;
  }
  std::vector<std::vector<std::uint64_t>> const ancestors = ancestors_of(graph, index);
  race_checker::graph_launch launch{graph.nodes.size()};
  p.races.begin_graph_launch(launch);
  for (std::size_t const i : order) {
    node_state const& node = *graph.nodes[i];
    p.races.begin_node(launch, i, ancestors[i],
                       describe(node) + " (node " + std::to_string(i) + ")",
                       ordering != nullptr ? &ordering->after_events[i] : nullptr);
    execute(node);
  }
  p.races.end_graph_launch(launch, ordering != nullptr ? &ordering->stamps : nullptr);
}

// The events a node waits for or records, in child graphs and conditional bodies too.
// NOLINTNEXTLINE(misc-no-recursion): graphs nest
void events_of(node_state const& node, cudaGraphNodeType type, std::vector<event_state*>& out) {
  if (node.type == type && node.event != nullptr) out.push_back(node.event);
  auto const of_graph = [&](graph_state const& graph) {  // NOLINT(misc-no-recursion)
    for (auto const& inner : graph.nodes) events_of(*inner, type, out);
  };
  if (node.child) of_graph(*node.child);
  for (auto const& body : node.conditional.bodies) of_graph(*body);
}

}  // namespace

bool named_by_a_graph(event_state const* event) {
  auto const names = [event](node_state const& node) {
    std::vector<event_state*> events;
    events_of(node, cudaGraphNodeTypeEventRecord, events);
    events_of(node, cudaGraphNodeTypeWaitEvent, events);
    return std::find(events.begin(), events.end(), event) != events.end();
  };
  auto const in = [&names](graph_state const& graph) {
    return std::any_of(graph.nodes.begin(), graph.nodes.end(),
                       [&names](auto const& node) { return names(*node); });
  };
  auto& p = state();
  return std::any_of(p.graphs.begin(), p.graphs.end(),
                     [&in](graph_state const* graph) { return in(*graph); }) ||
         std::any_of(p.execs.begin(), p.execs.end(),
                     [&in](exec_state const* exec) { return in(*exec->graph); }) ||
         std::any_of(p.queued.begin(), p.queued.end(),
                     [&names](queued_work const& work) { return work.node && names(*work.node); });
}

void release_orphaned_events() {
  auto& orphans = state().orphaned_events;
  auto const released = std::remove_if(orphans.begin(), orphans.end(), [](event_state* event) {
    if (named_by_a_graph(event) || !complete(event->clock)) return false;
    delete event;
    return true;
  });
  orphans.erase(released, orphans.end());
}

void execute_graph(graph_state const& graph,  // NOLINT(misc-no-recursion)
                   launch_ordering const* ordering) {
  run_nodes(graph, ordering);
  if (ordering != nullptr) mark_recorded(*ordering);
}

// cudaGraphAddEventWaitNode: "The graph node will wait for all work captured in event"; a node
// runs after its dependencies ("dependencies ... must be complete before the node can run",
// cudaGraphAddNode), so only the wait node and the nodes behind it follow the event's work.
// cudaGraphAddEventRecordNode: "Each launch of the graph will record event to capture execution
// of the node's dependencies": the event names the record node's ancestors, not the launch.
// An event node inside a child graph is taken as its top-level node's: a wait orders all of the
// child graph, a record records the child node and its ancestors (looser than a GPU, never
// stricter).
std::shared_ptr<launch_ordering> launch_event_ordering(exec_state& exec) {
  graph_state const& graph = *exec.graph;
  std::size_t const count = graph.nodes.size();
  auto ordering = std::make_shared<launch_ordering>();
  ordering->after_events.resize(count);
  ordering->stamps.resize(count);
  std::vector<std::size_t> recorders;
  bool waits = false;
  for (std::size_t i = 0; i < count; ++i) {
    std::vector<event_state*> events;
    events_of(*graph.nodes[i], cudaGraphNodeTypeWaitEvent, events);
    for (event_state const* event : events) merge(ordering->after_events[i], event->clock);
    waits = waits || !events.empty();
    std::vector<event_state*> recorded;
    events_of(*graph.nodes[i], cudaGraphNodeTypeEventRecord, recorded);
    if (!recorded.empty()) recorders.push_back(i);
  }
  if (!waits && recorders.empty()) return nullptr;  // the launch is one operation
  std::unordered_map<node_state const*, std::size_t> index;
  index.reserve(count);
  for (std::size_t i = 0; i < count; ++i) index.emplace(graph.nodes[i].get(), i);
  if (waits) {
    // In topological order: a node's dependencies have theirs before it is reached.
    for (node_state const* node : topological_order(graph)) {
      std::size_t const i = index.at(node);
      for (node_state const* dependency : node->dependencies) {
        merge(ordering->after_events[i], ordering->after_events[index.at(dependency)]);
      }
      merge(ordering->waited, ordering->after_events[i]);
    }
  }
  if (recorders.empty()) return ordering;
  std::vector<std::vector<std::uint64_t>> const ancestors = ancestors_of(graph, index);
  auto const is_ancestor = [&](std::size_t node, std::size_t of) {
    return ((ancestors[of][node / 64] >> (node % 64)) & 1U) != 0;
  };
  // Nodes recorded by the same record nodes share a timeline; launches of one executable are
  // ordered, so each launch is one tick of it.
  unsigned long long const tick = ++exec.launch_count;
  for (std::size_t i = 0; i < count; ++i) {
    std::vector<std::size_t> recorded_by;
    for (std::size_t const r : recorders) {
      bool const nested = graph.nodes[r]->type != cudaGraphNodeTypeEventRecord;
      if (is_ancestor(i, r) || (nested && i == r)) recorded_by.push_back(r);
    }
    if (recorded_by.empty()) continue;
    auto [it, added] = exec.recorded_timelines.try_emplace(recorded_by, timeline{});
    if (added) it->second = state().next_recorded_timeline++;
    ordering->stamps[i] = {it->second, tick};
    ordering->recorded[it->second] = tick;
  }
  return ordering;
}

void record_launch_events(exec_state const& exec, launch_ordering const& ordering,
                          vector_clock const& launched, timeline stream) {
  graph_state const& graph = *exec.graph;
  for (std::size_t r = 0; r < graph.nodes.size(); ++r) {
    std::vector<event_state*> recorded;
    events_of(*graph.nodes[r], cudaGraphNodeTypeEventRecord, recorded);
    if (recorded.empty()) continue;
    // The work before the launch (a record node without dependencies records the launch's
    // start), the events it waits for, and the timelines of the nodes it records.
    vector_clock clock = launched;
    --clock[stream];
    merge(clock, ordering.after_events[r]);
    for (auto const& [recorded_by, line] : exec.recorded_timelines) {
      if (std::find(recorded_by.begin(), recorded_by.end(), r) != recorded_by.end()) {
        auto const tick = ordering.recorded.find(line);
        if (tick != ordering.recorded.end()) clock[line] = tick->second;
      }
    }
    for (event_state* event : recorded) {
      // Recorded as cudaEventRecord would at the launch: later waits and queries see this
      // launch's work ("the most recently captured state at the time of the API call").
      event->clock = clock;
      event->captured = false;
      event->capture = nullptr;
      event->capture_nodes.clear();
    }
  }
}

cudaError_t submit(stream_state& stream, std::unique_ptr<node_state> node,
                   std::string description, vector_clock const& runs_after) {
  if (this_thread().in_host_function) return fail(cudaErrorNotPermitted);
  if (cudaError_t const sticky = sticky_error(); sticky != cudaSuccess) return fail(sticky);
  if (capture_state* capture = stream.capture; capture != nullptr) {
    if (capture->invalidated_by != cudaSuccess) return fail(cudaErrorStreamCaptureInvalidated);
    node->owner = capture->graph;
    node->dependencies = stream.capture_dependencies;
    node_state* added = node.get();
    capture->graph->nodes.push_back(std::move(node));
    stream.capture_dependencies.assign(1, added);
    return cudaSuccess;
  }
  if (cudaError_t const implicit = check_legacy_use(stream, api_call_of(*node));
      implicit != cudaSuccess) {
    return fail(implicit);
  }
  node->owner = nullptr;
  node->device = stream.device;
  begin_operation(stream, description.empty() ? describe(*node) : std::move(description));
  if (defers(stream) || waits_for_other_processes(*node)) {
    auto& queued = state().queued;
    queued.push_back(
        queued_work{std::move(node), state().races.current_operation(), runs_after, nullptr});
    if (state().execution == execution_mode::immediate) progress();
    // A GPU's launch queue is bounded: when it is full the host waits for room.
    run_until_at_most(queued_work_limit);
  } else {
    execute(*node);
    report_races();
    unsigned long long& done = state().completed[stream.id];
    done = std::max(done, stream.clock[stream.id]);
  }
  if (cudaError_t const sticky = sticky_error(); sticky != cudaSuccess) return fail(sticky);
  return cudaSuccess;
}

namespace {

// Kahn's algorithm, the earliest-created ready node first; the nodes it reached, in order (fewer
// than the graph's when a cycle holds the rest back).
std::vector<node_state const*> ordered_nodes(graph_state const& graph) {
  std::size_t const count = graph.nodes.size();
  std::unordered_map<node_state const*, std::size_t> index;
  index.reserve(count);
  for (std::size_t i = 0; i < count; ++i) index.emplace(graph.nodes[i].get(), i);
  std::vector<std::size_t> waiting_on(count);
  std::vector<std::vector<std::size_t>> dependents(count);
  for (std::size_t i = 0; i < count; ++i) {
    for (node_state const* dependency : graph.nodes[i]->dependencies) {
      ++waiting_on[i];
      dependents[index.at(dependency)].push_back(i);
    }
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < count; ++i) {
    if (waiting_on[i] == 0) ready.push(i);
  }
  std::vector<node_state const*> order;
  order.reserve(count);
  while (!ready.empty()) {
    std::size_t const next = ready.top();
    ready.pop();
    order.push_back(graph.nodes[next].get());
    for (std::size_t const dependent : dependents[next]) {
      if (--waiting_on[dependent] == 0) ready.push(dependent);
    }
  }
  return order;
}

}  // namespace

std::vector<node_state const*> topological_order(graph_state const& graph) {
  if (graph.edges_follow_creation_order) {
    std::vector<node_state const*> order;
    order.reserve(graph.nodes.size());
    for (auto const& node : graph.nodes) order.push_back(node.get());
    return order;
  }
  return ordered_nodes(graph);
}

bool acyclic(graph_state const& graph) {
  return ordered_nodes(graph).size() == graph.nodes.size();
}

std::unique_ptr<graph_state> clone(graph_state const& graph) {  // NOLINT(misc-no-recursion)
  auto copy = std::make_unique<graph_state>();
  copy->device = graph.device;
  copy->allocations = graph.allocations;
  copy->conditionals = graph.conditionals;
  copy->edges_follow_creation_order = graph.edges_follow_creation_order;
  std::unordered_map<node_state const*, node_state*> mapped;
  for (auto const& node : graph.nodes) {
    auto twin = std::make_unique<node_state>();
    mapped[node.get()] = twin.get();
    copy->nodes.push_back(std::move(twin));
  }
  // A second pass for the edges: a dependency may come later in creation order
  // (cudaGraphAddDependencies).
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    node_state const* node = graph.nodes[i].get();
    node_state* twin = copy->nodes[i].get();
    twin->type = node->type;
    twin->disabled = node->disabled;
    twin->owner = copy.get();
    twin->cloned_from = node;
    for (node_state const* dependency : node->dependencies) {
      twin->dependencies.push_back(mapped.at(dependency));
    }
    twin->kernel = node->kernel;
    twin->priority = node->priority;
    twin->access_policy = node->access_policy;
    twin->memset = node->memset;
    twin->copy = node->copy;
    twin->host_function = node->host_function;
    twin->host_data = node->host_data;
    twin->stream_callback = node->stream_callback;
    twin->callback_stream = node->callback_stream;
    twin->event = node->event;
    if (node->child) twin->child = clone(*node->child);
    twin->conditional.handle = node->conditional.handle;
    twin->conditional.type = node->conditional.type;
    for (auto const& body : node->conditional.bodies) {
      twin->conditional.bodies.push_back(clone(*body));
    }
    twin->memory = node->memory;
    twin->memory_bytes = node->memory_bytes;
  }
  copy->user_objects = graph.user_objects;
  return copy;
}

void end_capture(capture_state& capture) {
  for (stream_state* member : capture.streams) {
    member->capture = nullptr;
    member->capture_dependencies.clear();
  }
  capture.graph->capture = nullptr;
  // Events recorded in the capture stay captured events (cudaErrorCapturedEvent) until they are
  // recorded again outside a capture.
  for (event_state* event : state().events) {
    if (event->capture == &capture) event->capture = nullptr;
  }
  state().captures.erase(&capture);
}

}  // namespace graphstep::sim::detail

namespace graphstep::sim::detail {

namespace {

template <typename Visit>
void for_each_stream_of(int device, Visit visit) {
  auto& p = state();
  visit(*p.devices[static_cast<std::size_t>(device)]->legacy_stream);
  for (stream_state* s : p.streams) {
    if (s->device == device) visit(*s);
  }
  for (auto& entry : p.per_thread_streams) {
    if (entry.second->device == device) visit(*entry.second);
  }
}

// The streams' clocks are copied first: waiting lets go of the platform lock, and meanwhile
// other host threads may enqueue on these streams (changing their clocks) or create and destroy
// streams. What was issued before the call is what the host waits for.
std::vector<vector_clock> clocks_of_streams(int device) {
  std::vector<vector_clock> clocks;
  for_each_stream_of(device, [&clocks](stream_state const& s) { clocks.push_back(s.clock); });
  return clocks;
}

}  // namespace

std::string describe(stream_state const& stream) {
  if (stream.legacy) return "the legacy stream of device " + std::to_string(stream.device);
  if (stream.per_thread)
    return "a per-thread default stream (id " + std::to_string(stream.id) + ")";
  std::array<char, 32> address{};
  static_cast<void>(
      std::snprintf(address.data(), address.size(), "%p", static_cast<void const*>(&stream)));
  return std::string{"stream "} + address.data() + " (id " + std::to_string(stream.id) + ")";
}

void begin_operation(stream_state& stream, std::string const& description) {
  // The clocks tick even with the race checker off: deferred execution orders work by them.
  auto& p = state();
  merge(stream.clock, p.host_clock);
  // The legacy stream waits for all blocking streams of its device, and they wait for it (CUDA
  // Runtime API, "Stream synchronization behavior": legacy default stream).
  if (stream.legacy) {
    for_each_stream_of(stream.device, [&](stream_state const& other) {
      if (&other != &stream && other.blocking()) merge(stream.clock, other.clock);
    });
  } else if (stream.blocking()) {
    merge(stream.clock, p.devices[static_cast<std::size_t>(stream.device)]->legacy_stream->clock);
  }
  p.races.begin_operation(stream.id, stream.clock, description + " on " + describe(stream));
}

void host_waits_for(vector_clock const& clock) {
  run_until_complete(clock);
  merge(state().host_clock, clock);
}

void host_waits_for_device(int device) {
  for (auto const& clock : clocks_of_streams(device)) host_waits_for(clock);
}

void host_frees_without_waiting(allocation const& freed) {
  auto& p = state();
  // Queued work still runs before the memory goes (the simulator must not free memory under
  // it), but the race checker is not told the host saw it complete: on a GPU it may not have.
  for (auto const& clock : clocks_of_streams(freed.device)) run_until_complete(clock);
  auto const* memory = reinterpret_cast<void const*>(freed.base);
  if (p.race_checking != race_mode::off) {
    p.races.begin_operation(timeline{0}, p.host_clock,
                            "cudaFree of memory from cudaMallocAsync, on the host");
    p.races.access(memory, freed.bytes, access_kind::write);
    report_races();
  }
  forget_accesses(memory, freed.bytes);
}

void forget_accesses(void const* address, std::size_t bytes) {
  state().races.forget(address, bytes);
}

void report_races() {
  auto& p = state();
  auto const& found = p.races.races();
  bool const new_race = p.races_reported < found.size();
  for (; p.races_reported < found.size(); ++p.races_reported) {
    static_cast<void>(
        std::fprintf(stderr, "graphstep simulated device: %s\n", found[p.races_reported].c_str()));
  }
  // Only a race found now stops the process: races reported while the mode was `report` stay
  // in races() when a test sets `abort` again.
  if (new_race && p.race_checking == race_mode::abort) {
    static_cast<void>(
        std::fprintf(stderr,
                     "graphstep simulated device: stopping at the first stream race (set "
                     "GRAPHSTEP_SIM_RACE_CHECK=report to go on, off to stop checking)\n"));
    static_cast<void>(std::fflush(stderr));
    std::abort();
  }
}

}  // namespace graphstep::sim::detail

namespace graphstep::sim::detail {

// Never destroyed: graphs that outlive main (a queued launch's copy) may release references.
std::set<user_object*>& user_objects() {
  static auto* const live = new std::set<user_object*>;
  return *live;
}

void release_user_object(user_object& object, std::uint64_t count) {
  object.references -= count;
  if (object.references != 0) return;
  user_objects().erase(&object);
  thread_state& thread = this_thread();
  bool const outer = thread.in_host_function;
  thread.in_host_function = true;  // CUDA calls from it fail with cudaErrorNotPermitted
  object.destroy(object.pointer);
  thread.in_host_function = outer;
  delete &object;
}

user_object_references::user_object_references(user_object_references const& other)
    : held_{other.held_} {
  for (auto const& [object, count] : held_) object->references += count;
}

user_object_references& user_object_references::operator=(user_object_references const& other) {
  if (this == &other) return *this;
  for (auto const& [object, count] : other.held_) object->references += count;
  release_all();
  held_ = other.held_;
  return *this;
}

user_object_references::user_object_references(user_object_references&& other) noexcept
    : held_{std::move(other.held_)} {
  other.held_.clear();
}

user_object_references& user_object_references::operator=(user_object_references&& other) noexcept {
  if (this == &other) return *this;
  release_all();
  held_ = std::move(other.held_);
  other.held_.clear();
  return *this;
}

user_object_references::~user_object_references() {
  release_all();
}

void user_object_references::add(user_object& object, std::uint64_t count) {
  held_[&object] += count;
  object.references += count;
}

bool user_object_references::release(user_object& object, std::uint64_t count) {
  auto const found = held_.find(&object);
  if (found == held_.end() || found->second < count) return false;
  found->second -= count;
  if (found->second == 0) held_.erase(found);
  release_user_object(object, count);
  return true;
}

void user_object_references::release_all() noexcept {
  std::map<user_object*, std::uint64_t> const released = std::move(held_);
  held_.clear();
  for (auto const& [object, count] : released) release_user_object(*object, count);
}

}  // namespace graphstep::sim::detail
