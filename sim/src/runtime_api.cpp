// The CUDA runtime API on the simulated device: errors, devices, memory, streams, events and
// launches. Each function has the prototype of cuda_runtime_api.h (included, so the compiler
// checks it) and follows the behaviour its documentation there describes; where the
// documentation is silent the stricter behaviour is modelled and sim/docs/simulator.md says so.

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "detail/error_table.hpp"
#include "detail/guarded_memory.hpp"
#include "detail/refusal.hpp"
#include "detail/runtime_state.hpp"
#include "detail/symbol_table.hpp"
#include "graphstep/sim/kernel_task.hpp"

namespace sim = graphstep::sim::detail;

namespace {

// Every entry point: no CUDA call from a host function (cudaLaunchHostFunc), and a sticky error
// of the current device is returned by every call that follows it.
cudaError_t enter() {
  if (sim::this_thread().in_host_function) return sim::fail(cudaErrorNotPermitted);
  if (cudaError_t const sticky = sim::sticky_error(); sticky != cudaSuccess) {
    return sim::fail(sticky);
  }
  sim::progress();  // queued work goes on (at random moments, in interleaved mode)
  return cudaSuccess;
}

// cudaMalloc returns memory "suitably aligned for any kind of variable": 256 bytes.
constexpr std::size_t allocation_alignment = 256;

std::size_t accounted(std::size_t bytes) {
  return (bytes + allocation_alignment - 1) / allocation_alignment * allocation_alignment;
}

// Maps fresh memory for an allocation whose bytes are accounted already.
cudaError_t map_allocation(void** pointer, std::size_t bytes, sim::memory_kind kind, int device) {
  // Guarded, and filled with 0xFF bytes (a NaN in every floating-point format): cudaMalloc does
  // not clear memory, so a kernel that reads memory nobody wrote gets no convenient zero.
  sim::allocation const mapped = sim::map_guarded(bytes, kind, device);
  if (mapped.base == 0) return sim::fail(cudaErrorMemoryAllocation);
  sim::state().allocations[mapped.base] = mapped;
  void* memory = reinterpret_cast<void*>(mapped.base);
  sim::forget_accesses(memory, bytes);  // fresh memory: nothing before it can race with it
  *pointer = memory;
  return cudaSuccess;
}

cudaError_t allocate(void** pointer, std::size_t bytes, sim::memory_kind kind, int device) {
  if (pointer == nullptr) return sim::fail(cudaErrorInvalidValue);
  *pointer = nullptr;
  if (bytes == 0) return cudaSuccess;
  auto& p = sim::state();
  if (kind == sim::memory_kind::device) {
    auto& owner = *p.devices[static_cast<std::size_t>(device)];
    if (accounted(bytes) > owner.properties.totalGlobalMem - owner.used_bytes) {
      return sim::fail(cudaErrorMemoryAllocation);
    }
    owner.used_bytes += accounted(bytes);
  }
  cudaError_t const mapped = map_allocation(pointer, bytes, kind, device);
  if (mapped != cudaSuccess && kind == sim::memory_kind::device) {
    p.devices[static_cast<std::size_t>(device)]->used_bytes -= accounted(bytes);
  }
  return mapped;
}

// Stream-ordered memory outside a capture (cudaMallocAsync, cudaMallocFromPoolAsync): from
// `pool`, which reserves more of its device's memory only when what it holds is short.
cudaError_t allocate_from_pool(void** pointer, std::size_t bytes, sim::mem_pool_state& pool) {
  *pointer = nullptr;
  if (bytes == 0) return cudaSuccess;
  if (!sim::pool_take(pool, accounted(bytes))) return sim::fail(cudaErrorMemoryAllocation);
  if (cudaError_t const mapped =
          map_allocation(pointer, bytes, sim::memory_kind::device, pool.device);
      mapped != cudaSuccess) {
    sim::pool_give_back(pool, accounted(bytes));
    return mapped;
  }
  sim::allocation& allocated = sim::state().allocations[reinterpret_cast<std::uintptr_t>(*pointer)];
  allocated.stream_ordered = true;
  allocated.pool = &pool;
  return cudaSuccess;
}

// Freed device memory goes back where it came from: its pool (which keeps it reserved) or the
// device.
void give_back(sim::allocation const& freed) {
  if (freed.pool != nullptr) {
    sim::pool_give_back(*freed.pool, accounted(freed.bytes));
  } else if (freed.kind == sim::memory_kind::device) {
    sim::state().devices[static_cast<std::size_t>(freed.device)]->used_bytes -=
        accounted(freed.bytes);
  }
}

cudaError_t release(void* pointer, sim::memory_kind kind) {
  if (pointer == nullptr) return cudaSuccess;
  auto& p = sim::state();
  auto const base = reinterpret_cast<std::uintptr_t>(pointer);
  auto it = p.allocations.find(base);
  if (it == p.allocations.end() || it->second.kind != kind) {
    // Not the start of an allocation of this kind, or freed already.
    return sim::fail(cudaErrorInvalidValue);
  }
  sim::allocation const freed = it->second;
  if (freed.stream_ordered) {
    // cudaFree: "This API will not perform any implicit synchronization when the pointer was
    // allocated with cudaMallocAsync or cudaMallocFromPoolAsync. Callers must ensure that all
    // accesses to these pointer have completed before invoking cudaFree." The free is a write
    // by the host, which races with any access the host has not seen complete.
    sim::host_frees_without_waiting(freed);
  } else {
    // "For all other pointers, this API may perform implicit synchronization" (cudaFree): it
    // waits for the device's work before it frees (the CUDA Programming Guide's "Implicit
    // Synchronization"); the memory's past accesses go with it.
    sim::host_waits_for_device(freed.device);
    sim::forget_accesses(pointer, freed.bytes);
  }
  p.allocations.erase(it);
  give_back(freed);
  sim::retire_guarded(freed);  // later accesses fault as use after free
  return cudaSuccess;
}

bool is_device_memory(void const* address) {
  sim::allocation const* owner = sim::find_allocation(address);
  if (owner == nullptr) return sim::symbol_holds(address, 1);  // a __device__ variable
  return owner->kind != sim::memory_kind::pinned_host;
}

// Whether a graph, or an executable's copy of one, both allocates and frees `memory`.
bool freed_in_its_own_graph(void const* memory) {
  auto const frees_its_own = [memory](sim::graph_state const& graph) {
    bool allocates = false;
    bool frees = false;
    for (auto const& node : graph.nodes) {
      allocates = allocates || (node->type == cudaGraphNodeTypeMemAlloc && node->memory == memory);
      frees = frees || (node->type == cudaGraphNodeTypeMemFree && node->memory == memory);
    }
    return allocates && frees;
  };
  auto const& p = sim::state();
  return std::any_of(p.graphs.begin(), p.graphs.end(),
                     [&](sim::graph_state const* g) { return frees_its_own(*g); }) ||
         std::any_of(p.execs.begin(), p.execs.end(),
                     [&](sim::exec_state const* e) { return frees_its_own(*e->graph); });
}

}  // namespace

// The graph memory counts of cudaDeviceGetGraphMemAttribute. The simulator maps a graph
// allocation's memory when it is captured and keeps it while its graph or an executable of it
// lives, so its mappings say nothing of what a GPU's allocator holds; the counts follow the
// lifetimes the CUDA Programming Guide gives ("Graph Memory Nodes") instead. Used: allocations a
// launch has made and nothing has freed yet ("A graph allocation's lifetime ... begins when GPU
// execution reaches the allocating graph node and ends when" a free node, cudaFreeAsync or
// cudaFree frees it). Reserved: the allocator keeps freed memory for later allocations until
// cudaDeviceGraphMemTrim ("Free unused memory that was cached on the specified device for use
// with graphs back to the OS"; destroying a graph does not return it either), and a later
// allocation reuses it, so it grows only when the live allocations outgrow it. Byte counts are
// the sizes asked for; a GPU rounds them up to its mapping granularity.
namespace graphstep::sim::detail {

void set_graph_allocation_live(void const* base, bool live) {
  bool const was_live = graph_allocation(base) == graph_allocation_state::allocated;
  if (was_live == live) return;
  set_graph_allocation(
      base, live ? graph_allocation_state::allocated : graph_allocation_state::not_allocated);
  allocation const* owner = find_allocation(base);
  if (owner == nullptr) return;
  device_state& device = *state().devices[static_cast<std::size_t>(owner->device)];
  if (!live) {
    device.graph_used -= owner->bytes;
    return;
  }
  device.graph_used += owner->bytes;
  device.graph_used_high = std::max(device.graph_used_high, device.graph_used);
  device.graph_reserved = std::max(device.graph_reserved, device.graph_used);
  device.graph_reserved_high = std::max(device.graph_reserved_high, device.graph_reserved);
}

}  // namespace graphstep::sim::detail

namespace {

// A graph allocation freed outside its graph (cudaGraphAddMemAllocNode): "Allocations which are
// not freed in the same graph can be freed by ... passing the allocation to cudaMemFreeAsync or
// cudaMemFree", and those freed in it "cannot be freed outside the owning graph". One no launch
// has allocated, or freed already, is refused too: the stricter reading where the documentation
// is silent (docs/validation.md asks a GPU). The memory itself stays with its graph.
cudaError_t free_graph_allocation(void const* pointer) {
  if (freed_in_its_own_graph(pointer) ||
      sim::graph_allocation(pointer) != sim::graph_allocation_state::allocated) {
    return sim::fail(cudaErrorInvalidValue);
  }
  sim::set_graph_allocation_live(pointer, false);
  return cudaSuccess;
}

// cudaMemcpyKind against the pointers (unified addressing: cudaMemcpyDefault infers the
// direction). A side the kind calls "device" must be device memory of the right size.
// A 2-D copy names the span of each side: from its first row's start to its last row's end.
cudaError_t check_copy(void const* destination, std::size_t destination_bytes, void const* source,
                       std::size_t source_bytes, cudaMemcpyKind kind) {
  if (destination_bytes == 0 || source_bytes == 0) return cudaSuccess;
  if (destination == nullptr || source == nullptr) return cudaErrorInvalidValue;
  bool destination_on_device = false;
  bool source_on_device = false;
  switch (kind) {
    case cudaMemcpyHostToHost: break;
    case cudaMemcpyHostToDevice: destination_on_device = true; break;
    case cudaMemcpyDeviceToHost: source_on_device = true; break;
    case cudaMemcpyDeviceToDevice: destination_on_device = source_on_device = true; break;
    case cudaMemcpyDefault:
      destination_on_device = is_device_memory(destination);
      source_on_device = is_device_memory(source);
      break;
    default: return cudaErrorInvalidMemcpyDirection;
  }
  if (destination_on_device && !sim::device_range_valid(destination, destination_bytes)) {
    return cudaErrorInvalidValue;
  }
  if (source_on_device && !sim::device_range_valid(source, source_bytes)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t check_copy(void const* destination, void const* source, std::size_t bytes,
                       cudaMemcpyKind kind) {
  return check_copy(destination, bytes, source, bytes, kind);
}

// The bytes from the start of a pitched region's first row to the end of its last: `height`
// rows of `width` bytes, `pitch` apart; 0 when it is empty, and false when it overflows.
bool pitched_span(std::size_t width, std::size_t height, std::size_t pitch, std::size_t& span) {
  span = 0;
  if (width == 0 || height == 0) return true;
  if (pitch != 0 && height - 1 > (SIZE_MAX - width) / pitch) return false;
  span = (height - 1) * pitch + width;
  return true;
}

// The span of one side of a copy: `slices` of what pitched_span gives, `slice_pitch` apart;
// false too when the slices overlap (a slice's rows end after the next slice begins).
bool pitched_span(std::size_t width, std::size_t height, std::size_t pitch, std::size_t slices,
                  std::size_t slice_pitch, std::size_t& span) {
  span = 0;
  std::size_t slice = 0;
  if (!pitched_span(width, height, pitch, slice)) return false;
  if (slice == 0 || slices == 0) return true;
  if (slices > 1 && slice_pitch < slice) return false;
  if (slice_pitch != 0 && slices - 1 > (SIZE_MAX - slice) / slice_pitch) return false;
  span = (slices - 1) * slice_pitch + slice;
  return true;
}

// The spans a copy's destination and source touch; false when one overflows.
bool copy_spans(sim::memcpy_params const& copy, std::size_t& destination_span,
                std::size_t& source_span) {
  return pitched_span(copy.bytes, copy.height, copy.destination_pitch, copy.depth,
                      copy.destination_slice_pitch, destination_span) &&
         pitched_span(copy.bytes, copy.height, copy.source_pitch, copy.depth,
                      copy.source_slice_pitch, source_span);
}

std::unique_ptr<sim::node_state> memset_node(void* destination, int value, std::size_t bytes) {
  auto node = std::make_unique<sim::node_state>();
  node->type = cudaGraphNodeTypeMemset;
  node->memset.dst = destination;
  node->memset.value = static_cast<unsigned char>(value);
  node->memset.elementSize = 1;
  node->memset.width = bytes;
  node->memset.height = 1;
  node->memset.pitch = bytes;
  return node;
}

// Whether the current device's flags ask synchronous copies and memsets to block the host
// (cudaDeviceSyncMemops, cudaSetDeviceFlags).
bool sync_memops() {
  sim::device_state const* device = sim::current_device();
  return device != nullptr && (device->flags & cudaDeviceSyncMemops) != 0U;
}

sim::stream_state* stream_or_fail(cudaStream_t stream, cudaError_t& error) {
  sim::stream_state* found = sim::find_stream(stream);
  error = found == nullptr ? sim::fail(cudaErrorInvalidResourceHandle) : cudaSuccess;
  return found;
}

}  // namespace

namespace graphstep::sim::detail {

// cudaMemcpy2D and cudaMemcpy2DAsync: "width must not exceed either dpitch or spitch", and the
// call "returns an error if dpitch or spitch exceeds the maximum allowed" (the device's memPitch);
// both are cudaErrorInvalidPitchValue, the pitch error the header lists. Checked for one row too
// (the stricter reading: the header does not exempt it). An empty copy is accepted, as a 1-D one
// of 0 bytes is; then the kind as for the 1-D copy, and each side's span (a 3-D copy's too).
cudaError_t check_pitched_copy(memcpy_params const& copy) {
  if (copy.bytes == 0 || copy.height == 0 || copy.depth == 0) return cudaSuccess;
  std::size_t const max_pitch = current_device()->properties.memPitch;
  if (copy.destination_pitch < copy.bytes || copy.source_pitch < copy.bytes ||
      copy.destination_pitch > max_pitch || copy.source_pitch > max_pitch) {
    return cudaErrorInvalidPitchValue;
  }
  std::size_t destination_span = 0;
  std::size_t source_span = 0;
  if (!copy_spans(copy, destination_span, source_span)) return cudaErrorInvalidValue;
  return check_copy(copy.destination, destination_span, copy.source, source_span, copy.kind);
}

}  // namespace graphstep::sim::detail

// --- errors ------------------------------------------------------------------------------------

cudaError_t cudaGetLastError() {
  auto& me = sim::this_thread();
  cudaError_t const error = me.last_error;
  // A sticky error stays (driver_types.h, cudaErrorLaunchFailure: "any further CUDA work will
  // return the same error").
  me.last_error = sim::sticky_error();
  return error;
}

cudaError_t cudaPeekAtLastError() {
  return sim::this_thread().last_error;
}

// Every code driver_types.h declares has a name and a text (detail/error_table.cpp); another
// value gets the runtime's answer for it. The code is read as the integer the caller passed: a
// program built against a later header may pass one this header's enumeration does not hold.
char const* cudaGetErrorName(cudaError_t error) {
  sim::error_entry const* const entry = sim::find_error(sim::error_code_of(error));
  return entry != nullptr ? entry->name : "unrecognized error code";
}

char const* cudaGetErrorString(cudaError_t error) {
  sim::error_entry const* const entry = sim::find_error(sim::error_code_of(error));
  return entry != nullptr ? entry->text : "unrecognized error code";
}

// --- devices -----------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::lock_guard const lock{sim::state().mutex};
  *count = static_cast<int>(sim::state().devices.size());
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return sim::fail(cudaErrorInvalidValue);
  *device = sim::this_thread().device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  sim::lock_guard const lock{sim::state().mutex};
  if (sim::this_thread().in_host_function) return sim::fail(cudaErrorNotPermitted);
  if (device < 0 || static_cast<std::size_t>(device) >= sim::state().devices.size()) {
    return sim::fail(cudaErrorInvalidDevice);
  }
  sim::this_thread().device = device;
  sim::this_thread().device_chosen = true;
  sim::use_primary_context();
  return cudaSuccess;
}

// Every pair of simulated devices can reach each other, as GPUs on one NVLink or NVSwitch do;
// a device is not its own peer (cudaDeviceCanAccessPeer gives 0 for it on a GPU).
cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  sim::lock_guard const lock{sim::state().mutex};
  if (can_access == nullptr) return sim::fail(cudaErrorInvalidValue);
  auto const count = sim::state().devices.size();
  if (device < 0 || peer < 0 || static_cast<std::size_t>(device) >= count ||
      static_cast<std::size_t>(peer) >= count) {
    return sim::fail(cudaErrorInvalidDevice);
  }
  *can_access = device != peer ? 1 : 0;
  return cudaSuccess;
}

// "All allocations from peerDevice will immediately be accessible by the current device",
// one way only (cudaDeviceEnablePeerAccess): kernels on the current device may then touch the
// peer's cudaMalloc memory. Mapped virtual memory needs cuMemSetAccess instead.
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  int const device = sim::this_thread().device;
  if (flags != 0) return sim::fail(cudaErrorInvalidValue);
  if (peer < 0 || static_cast<std::size_t>(peer) >= sim::state().devices.size() || peer == device) {
    return sim::fail(cudaErrorInvalidDevice);
  }
  if (!sim::state().peer_access.emplace(device, peer).second) {
    return sim::fail(cudaErrorPeerAccessAlreadyEnabled);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  sim::lock_guard const lock{sim::state().mutex};
  if (peer < 0 || static_cast<std::size_t>(peer) >= sim::state().devices.size()) {
    return sim::fail(cudaErrorInvalidDevice);
  }
  if (sim::state().peer_access.erase({sim::this_thread().device, peer}) == 0) {
    return sim::fail(cudaErrorPeerAccessNotEnabled);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  sim::lock_guard const lock{sim::state().mutex};
  if (properties == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (device < 0 || static_cast<std::size_t>(device) >= sim::state().devices.size()) {
    return sim::fail(cudaErrorInvalidDevice);
  }
  *properties = sim::state().devices[static_cast<std::size_t>(device)]->properties;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  sim::lock_guard const lock{sim::state().mutex};
  if (value == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (device < 0 || static_cast<std::size_t>(device) >= sim::state().devices.size()) {
    return sim::fail(cudaErrorInvalidDevice);
  }
  cudaDeviceProp const& p = sim::state().devices[static_cast<std::size_t>(device)]->properties;
  switch (attribute) {
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
    case cudaDevAttrIntegrated: *value = 0; break;
    case cudaDevAttrManagedMemory: *value = p.managedMemory; break;
    case cudaDevAttrConcurrentManagedAccess: *value = p.concurrentManagedAccess; break;
    case cudaDevAttrPageableMemoryAccess: *value = p.pageableMemoryAccess; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = static_cast<int>(p.sharedMemPerMultiprocessor);
      break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrReservedSharedMemoryPerBlock:
      *value = static_cast<int>(p.reservedSharedMemPerBlock);
      break;
    case cudaDevAttrMaxPersistingL2CacheSize: *value = p.persistingL2CacheMaxSize; break;
    // cudaHostRegister: supported, the device reaching registered memory by its host pointer;
    // read-only registration is not.
    case cudaDevAttrHostRegisterSupported:
    case cudaDevAttrCanUseHostPointerForRegisteredMem: *value = 1; break;
    case cudaDevAttrHostRegisterReadOnlySupported: *value = 0; break;
    case cudaDevAttrMaxAccessPolicyWindowSize: *value = p.accessPolicyMaxWindowSize; break;
    case cudaDevAttrCooperativeLaunch: *value = p.cooperativeLaunch; break;
    default:
      // An attribute the simulated device does not model: refused, never a made-up value.
      return sim::fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return sim::fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;  // the simulated driver is as new as the headers it was built with
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return sim::fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (cudaError_t const capturing = sim::check_device_wide_sync(sim::this_thread().device, __func__);
      capturing != cudaSuccess) {
    return sim::fail(capturing);
  }
  sim::host_waits_for_device(sim::this_thread().device);
  sim::release_pool_memory(sim::this_thread().device);
  sim::release_orphaned_events();
  if (cudaError_t const sticky = sim::sticky_error(); sticky != cudaSuccess)
    return sim::fail(sticky);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::device_state const* device = sim::current_device();
  if (free_bytes != nullptr) *free_bytes = device->properties.totalGlobalMem - device->used_bytes;
  if (total_bytes != nullptr) *total_bytes = device->properties.totalGlobalMem;
  return cudaSuccess;
}

// --- memory ------------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** pointer, std::size_t bytes) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  return allocate(pointer, bytes, sim::memory_kind::device, sim::this_thread().device);
}

cudaError_t cudaFree(void* pointer) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (pointer == nullptr) return cudaSuccess;
  if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  // "Memory allocated with cudaMallocManaged should be released with cudaFree."
  auto const found = sim::state().allocations.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (found != sim::state().allocations.end() && found->second.managed) {
    return release(pointer, sim::memory_kind::pinned_host);
  }
  if (found != sim::state().allocations.end() && found->second.kind == sim::memory_kind::graph) {
    sim::host_waits_for_device(found->second.device);  // cudaFree synchronizes
    return free_graph_allocation(pointer);
  }
  return release(pointer, sim::memory_kind::device);
}

cudaError_t cudaMallocHost(void** pointer, std::size_t bytes) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  return allocate(pointer, bytes, sim::memory_kind::pinned_host, sim::this_thread().device);
}

// cudaHostAlloc: the flags are "orthogonal to one another" (cudaHostAllocPortable,
// cudaHostAllocMapped, cudaHostAllocWriteCombined; 0 "emulate[s] cudaMallocHost()"); another bit
// is cudaErrorInvalidValue. They change nothing here but what cudaHostGetFlags reads back: every
// pinned allocation is reachable from every device (unified addressing).
cudaError_t cudaHostAlloc(void** pointer, std::size_t bytes, unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  unsigned const known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if ((flags & ~known) != 0U) {
    if (cudaError_t const error = enter(); error != cudaSuccess) return error;
    return sim::fail(cudaErrorInvalidValue);
  }
  cudaError_t const allocated = cudaMallocHost(pointer, bytes);
  if (allocated == cudaSuccess && *pointer != nullptr) {
    sim::state().allocations[reinterpret_cast<std::uintptr_t>(*pointer)].host_flags = flags;
  }
  return allocated;
}

cudaError_t cudaFreeHost(void* pointer) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (pointer == nullptr) return cudaSuccess;
  if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  // Managed memory is released with cudaFree (cudaMallocManaged), registered memory with
  // cudaHostUnregister ("The memory page-locked by this function must be unregistered with
  // cudaHostUnregister()"); cudaFreeHost refuses both.
  auto const found = sim::state().allocations.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (found != sim::state().allocations.end() &&
      (found->second.managed || found->second.registered)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  return release(pointer, sim::memory_kind::pinned_host);
}

// --- registered host memory (cudaHostRegister, cudaHostUnregister, cudaHostGetDevicePointer,
// cudaHostGetFlags). Registered memory is pinned host memory from then on: copies treat it as
// cudaHostAlloc's (not staged, completing in stream order), every device reaches it, and the race
// checker sees accesses to it. The device reports cudaDevAttrHostRegisterSupported and
// cudaDevAttrCanUseHostPointerForRegisteredMem (the device pointer is the host pointer), and not
// cudaDevAttrHostRegisterReadOnlySupported.

namespace {

// The pinned host allocation (cudaHostAlloc, cudaMallocHost or cudaHostRegister) holding
// `pointer`, or null.
sim::allocation const* pinned_host_allocation(void const* pointer) {
  sim::allocation const* owner = sim::find_allocation(pointer);
  if (owner == nullptr || owner->kind != sim::memory_kind::pinned_host || owner->managed) {
    return nullptr;
  }
  return owner;
}

// Whether [start, start + bytes) is mapped in the process (msync fails with ENOMEM on a gap).
bool host_range_mapped(void const* start, std::size_t bytes) {
  auto const page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  auto const first = reinterpret_cast<std::uintptr_t>(start) / page * page;
  auto const end = reinterpret_cast<std::uintptr_t>(start) + bytes;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the page holding `start`
  return msync(reinterpret_cast<void*>(first), end - first, MS_ASYNC) == 0;
}

}  // namespace

// cudaHostRegister: "Page-locks the memory range specified by ptr and size and maps it for the
// device(s) as specified by flags". A null pointer, 0 bytes, a range that wraps or is not mapped
// in the process, and flags other than cudaHostRegisterPortable, cudaHostRegisterMapped,
// cudaHostRegisterIoMemory and cudaHostRegisterReadOnly are cudaErrorInvalidValue; a range
// overlapping pinned memory already is cudaErrorHostMemoryAlreadyRegistered. I/O memory is not
// modelled and read-only registration "with a current context associated with a device that does
// not have this attribute set will cause cudaHostRegister to error with cudaErrorNotSupported"
// (cudaDevAttrHostRegisterReadOnlySupported is 0 here). Potentially unsafe during a capture, as
// cudaMallocHost is (the stricter reading: the capture rules do not name it).
cudaError_t cudaHostRegister(void* ptr, std::size_t size, unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  unsigned const known = cudaHostRegisterPortable | cudaHostRegisterMapped |
                         cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
  auto const start = reinterpret_cast<std::uintptr_t>(ptr);
  if (ptr == nullptr || size == 0 || (flags & ~known) != 0U || size > UINTPTR_MAX - start) {
    return sim::fail(cudaErrorInvalidValue);
  }
  if ((flags & cudaHostRegisterIoMemory) != 0U) {
    return sim::refuse(__func__, "not modelled for I/O memory (cudaHostRegisterIoMemory)");
  }
  if ((flags & cudaHostRegisterReadOnly) != 0U) return sim::fail(cudaErrorNotSupported);
  if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  // Any allocation overlapping the range: pinned memory is registered already; the simulator's
  // device memory is no host memory to register.
  auto& allocations = sim::state().allocations;
  auto it = allocations.upper_bound(start);
  if (it != allocations.begin()) --it;
  for (; it != allocations.end() && it->first < start + size; ++it) {
    if (it->first + it->second.bytes <= start) continue;
    if (it->second.kind == sim::memory_kind::pinned_host) {
      return sim::fail(cudaErrorHostMemoryAlreadyRegistered);
    }
    return sim::fail(cudaErrorInvalidValue);
  }
  if (!host_range_mapped(ptr, size)) return sim::fail(cudaErrorInvalidValue);
  sim::allocation registered;
  registered.base = start;
  registered.bytes = size;
  registered.kind = sim::memory_kind::pinned_host;
  registered.device = sim::this_thread().device;
  registered.registered = true;
  registered.host_flags = flags;
  allocations[start] = registered;
  sim::forget_accesses(ptr, size);  // newly tracked: nothing before it can race with it
  return cudaSuccess;
}

// cudaHostUnregister: "The base address must be the same one specified to cudaHostRegister()";
// anything else is cudaErrorHostMemoryNotRegistered (a null pointer cudaErrorInvalidValue). It
// synchronizes as cudaFreeHost does (the stricter reading of a silent header: device work that
// still reads or writes the range finishes first), and the range's past accesses go with it.
cudaError_t cudaHostUnregister(void* ptr) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (ptr == nullptr) return sim::fail(cudaErrorInvalidValue);
  auto& allocations = sim::state().allocations;
  auto const it = allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == allocations.end() || !it->second.registered) {
    return sim::fail(cudaErrorHostMemoryNotRegistered);
  }
  if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  sim::host_waits_for_device(it->second.device);
  sim::forget_accesses(ptr, it->second.bytes);
  allocations.erase(it);
  return cudaSuccess;
}

// cudaHostGetDevicePointer: "the device pointer corresponding to the mapped, pinned host buffer
// allocated by cudaHostAlloc() or registered by cudaHostRegister()"; with
// cudaDevAttrCanUseHostPointerForRegisteredMem on every device it "will match the original
// pointer pHost". "flags ... must be set to 0"; memory that is not pinned is cudaErrorInvalidValue.
cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (pDevice == nullptr || flags != 0U || pinned_host_allocation(pHost) == nullptr) {
    return sim::fail(cudaErrorInvalidValue);
  }
  *pDevice = pHost;
  return cudaSuccess;
}

// cudaHostGetFlags: "will fail if the input pointer does not reside in an address range allocated
// by cudaHostAlloc()" (cudaMallocHost's, which cudaHostAllocDefault emulates, included; gives
// 0). Registered memory is refused too, the stricter reading of that sentence (a GPU answers:
// memory_host_registration_gpu_test). Gives the flags of the allocation.
cudaError_t cudaHostGetFlags(unsigned int* pFlags, void* pHost) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::allocation const* owner = pinned_host_allocation(pHost);
  if (pFlags == nullptr || owner == nullptr || owner->registered) {
    return sim::fail(cudaErrorInvalidValue);
  }
  *pFlags = owner->host_flags;
  return cudaSuccess;
}

// --- managed memory (cuda_runtime_api.h: cudaMallocManaged, cudaMemPrefetchAsync,
// cudaMemAdvise). The device reports cudaDevAttrManagedMemory and
// cudaDevAttrConcurrentManagedAccess (as an H100 does): managed memory is host memory that the
// host and every device reach at any time, and never counts against a device's memory (it may
// be oversubscribed). Nothing migrates: prefetches and advice are checked, then change nothing
// a program can observe but time.

namespace {

// The managed allocation holding all of [address, address + bytes), or null.
sim::allocation const* managed_range(void const* address, std::size_t bytes) {
  sim::allocation const* owner = sim::find_allocation(address);
  if (owner == nullptr || !owner->managed || bytes == 0) return nullptr;
  auto const start = reinterpret_cast<std::uintptr_t>(address);
  if (bytes > owner->bytes || start - owner->base > owner->bytes - bytes) return nullptr;
  return owner;
}

bool valid_device(int device) {
  return device >= 0 && static_cast<std::size_t>(device) < sim::state().devices.size();
}

// A location a prefetch or a preferred location may name: a device (a valid ordinal, else
// cudaErrorInvalidDevice), the host (id ignored), the host NUMA node nearest the caller (id
// ignored) or a host NUMA node by id. The simulated host has one NUMA node, 0: another id is
// cudaErrorInvalidValue (the stricter reading; the header asks for "a valid host NUMA node id").
cudaError_t check_location(cudaMemLocation const& location) {
  switch (location.type) {
    case cudaMemLocationTypeDevice:
      return valid_device(location.id) ? cudaSuccess : cudaErrorInvalidDevice;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNumaCurrent: return cudaSuccess;
    case cudaMemLocationTypeHostNuma: return location.id == 0 ? cudaSuccess : cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
}

// The page size advice and prefetches are kept at (the host's): the pages a range touches.
constexpr std::size_t managed_page_bytes = 4096;

// Calls `update(page)` for each page of the managed allocation `owner` that [address, address +
// bytes) touches; the page records are made at the first call.
template <typename Update>
void for_each_managed_page(sim::allocation const& owner, void const* address, std::size_t bytes,
                           Update const& update) {
  auto& pages = sim::state().allocations[owner.base].managed_pages;
  if (pages.empty()) pages.resize((owner.bytes + managed_page_bytes - 1) / managed_page_bytes);
  std::size_t const first =
      (reinterpret_cast<std::uintptr_t>(address) - owner.base) / managed_page_bytes;
  std::size_t const last =
      (reinterpret_cast<std::uintptr_t>(address) - owner.base + bytes - 1) / managed_page_bytes;
  for (std::size_t page = first; page <= last; ++page) update(pages[page]);
}

// A location as the range attributes report it: the host NUMA node nearest the caller is node 0,
// the only one here.
cudaMemLocation recorded_location(cudaMemLocation location) {
  if (location.type == cudaMemLocationTypeHostNumaCurrent) {
    return cudaMemLocation{cudaMemLocationTypeHostNuma, 0};
  }
  if (location.type == cudaMemLocationTypeHost) location.id = 0;
  return location;
}

// cudaMemPrefetchAsync and the batches: "the last location that the application requested to
// prefetch the memory range to", recorded when the call is made.
void record_prefetch(void const* address, std::size_t bytes, cudaMemLocation const& location) {
  sim::allocation const* owner = managed_range(address, bytes);
  if (owner == nullptr) return;
  cudaMemLocation const recorded = recorded_location(location);
  for_each_managed_page(*owner, address, bytes,
                        [&](sim::managed_page& page) { page.last_prefetch = recorded; });
}

}  // namespace

// "If size is 0, cudaMallocManaged returns cudaErrorInvalidValue\"; "flags must be one of
// cudaMemAttachGlobal or cudaMemAttachHost" (cudaMallocManaged). Potentially unsafe during a
// capture, as cudaMalloc is (the stricter reading: the capture rules do not name it).
cudaError_t cudaMallocManaged(void** pointer, std::size_t bytes, unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (pointer == nullptr || bytes == 0) return sim::fail(cudaErrorInvalidValue);
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost) {
    return sim::fail(cudaErrorInvalidValue);
  }
  if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  if (cudaError_t const error =
          allocate(pointer, bytes, sim::memory_kind::pinned_host, sim::this_thread().device);
      error != cudaSuccess) {
    return error;
  }
  sim::state().allocations[reinterpret_cast<std::uintptr_t>(*pointer)].managed = true;
  return cudaSuccess;
}

// cudaMemPrefetchAsync: "The memory range must refer to managed memory allocated via
// cudaMallocManaged" (or system memory where cudaDevAttrPageableMemoryAccess is non-zero: 0
// here); "flags - flags for future use, must be zero now"; a device location must be a valid
// ordinal (cudaErrorInvalidDevice). Stream-ordered; no data moves. Stricter where the header is
// silent: an empty range is cudaErrorInvalidValue, and a prefetch into a capturing stream is
// cudaErrorStreamCaptureUnsupported and invalidates the capture.
cudaError_t cudaMemPrefetchAsync(void const* pointer, std::size_t bytes, cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (flags != 0U || managed_range(pointer, bytes) == nullptr) {
    return sim::fail(cudaErrorInvalidValue);
  }
  if (cudaError_t const error = check_location(location); error != cudaSuccess) {
    return sim::fail(error);
  }
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (s->capture != nullptr) {
    sim::invalidate(*s->capture, cudaErrorStreamCaptureUnsupported, __func__);
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  }
  record_prefetch(pointer, bytes, location);
  return cudaSuccess;
}

// cudaMemAdvise: the range must be managed memory (cudaErrorInvalidValue otherwise, as for an
// invalid pageable range); SetReadMostly, UnsetReadMostly and UnsetPreferredLocation ignore the
// location; SetPreferredLocation takes a device or host location (check_location);
// SetAccessedBy and UnsetAccessedBy take "either cudaMemLocationTypeDevice with
// cudaMemLocation::id representing a valid device ordinal or cudaMemLocationTypeHost ... All
// other location types are invalid"; any other advice is cudaErrorInvalidValue. The advice is
// accepted and changes nothing observable here. Stricter where silent: an empty range is
// cudaErrorInvalidValue.
cudaError_t cudaMemAdvise(void const* pointer, std::size_t bytes, cudaMemoryAdvise advice,
                          cudaMemLocation location) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::allocation const* owner = managed_range(pointer, bytes);
  if (owner == nullptr) return sim::fail(cudaErrorInvalidValue);
  cudaError_t valid = cudaSuccess;
  switch (advice) {
    case cudaMemAdviseSetReadMostly:
    case cudaMemAdviseUnsetReadMostly:
    case cudaMemAdviseUnsetPreferredLocation: break;
    case cudaMemAdviseSetPreferredLocation: valid = check_location(location); break;
    case cudaMemAdviseSetAccessedBy:
    case cudaMemAdviseUnsetAccessedBy:
      if (location.type == cudaMemLocationTypeHost) break;
      if (location.type != cudaMemLocationTypeDevice) {
        valid = cudaErrorInvalidValue;
      } else if (!valid_device(location.id)) {
        valid = cudaErrorInvalidDevice;
      }
      break;
    default: valid = cudaErrorInvalidValue; break;
  }
  if (valid != cudaSuccess) return sim::fail(valid);
  // Kept per page for cudaMemRangeGetAttribute; nothing else changes.
  std::uint32_t const bit = location.type == cudaMemLocationTypeHost
                                ? sim::managed_host_bit
                                : std::uint32_t{1} << static_cast<unsigned>(location.id);
  for_each_managed_page(*owner, pointer, bytes, [&](sim::managed_page& page) {
    switch (advice) {
      case cudaMemAdviseSetReadMostly: page.read_mostly = true; break;
      case cudaMemAdviseUnsetReadMostly: page.read_mostly = false; break;
      case cudaMemAdviseSetPreferredLocation: page.preferred = recorded_location(location); break;
      case cudaMemAdviseUnsetPreferredLocation:
        page.preferred = cudaMemLocation{cudaMemLocationTypeInvalid, 0};
        break;
      case cudaMemAdviseSetAccessedBy: page.accessed_by |= bit; break;
      case cudaMemAdviseUnsetAccessedBy: page.accessed_by &= ~bit; break;
      default: break;
    }
  });
  return cudaSuccess;
}

namespace graphstep::sim::detail {

// A graph allocation: the node's address is fixed when it is made (captured or added) and the
// memory belongs to the graph (CUDA Programming Guide, "Graph Memory Nodes").
std::unique_ptr<node_state> graph_allocation_node(graph_state& graph, std::size_t bytes,
                                                  int device) {
  allocation mapped;
  if (bytes > 0) {
    mapped = map_guarded(bytes, memory_kind::graph, device);
    if (mapped.base == 0) return nullptr;
  }
  void* memory = reinterpret_cast<void*>(mapped.base);
  std::shared_ptr<void> backing{memory, [](void* address) {
                                  if (address == nullptr) return;
                                  lock_guard const inner{state().mutex};
                                  auto& allocations = state().allocations;
                                  auto it =
                                      allocations.find(reinterpret_cast<std::uintptr_t>(address));
                                  if (it == allocations.end()) return;
                                  // Its memory goes with the graph here, live or not
                                  // (on a GPU "Graph destruction does not automatically
                                  // free any live graph-allocated memory").
                                  set_graph_allocation_live(address, false);
                                  allocation const freed = it->second;
                                  allocations.erase(it);
                                  retire_guarded(freed);
                                }};
  if (memory != nullptr) {
    state().allocations[mapped.base] = mapped;
    forget_accesses(memory, bytes);
    // Allocated only when a launch of its graph reaches the node.
    set_graph_allocation(memory, graph_allocation_state::not_allocated);
  }
  graph.allocations.push_back(backing);
  auto node = std::make_unique<node_state>();
  node->type = cudaGraphNodeTypeMemAlloc;
  node->memory = memory;
  node->memory_bytes = bytes;
  return node;
}

}  // namespace graphstep::sim::detail

namespace {

// cudaMallocAsync and cudaMallocFromPoolAsync, the stream and the pool checked: "Inserts an
// allocation operation into hStream". `call` names the CUDA call (a string literal).
cudaError_t allocate_async(void** pointer, std::size_t bytes, sim::mem_pool_state& pool,
                           sim::stream_state* s, char const* call) {
  if (sim::capture_state* capture = s->capture; capture != nullptr) {
    if (capture->invalidated_by != cudaSuccess) {
      return sim::fail(cudaErrorStreamCaptureInvalidated);
    }
    // "Allocation and free nodes cannot be added to the returned graph"
    // (cudaGraphChildGraphNodeGetGraph): refused, and the capture invalidated as for a refused
    // cudaFreeAsync.
    if (capture->graph->embedded) {
      sim::invalidate(*capture, cudaErrorInvalidValue, call);
      return sim::fail(cudaErrorInvalidValue);
    }
    // "The memory pool's properties are used to set the node's creation parameters"
    // (cudaMallocFromPoolAsync): its device.
    std::unique_ptr<sim::node_state> node =
        sim::graph_allocation_node(*capture->graph, bytes, pool.device);
    if (node == nullptr) return sim::fail(cudaErrorMemoryAllocation);
    void* memory = node->memory;
    if (cudaError_t const submitted = sim::submit(*s, std::move(node)); submitted != cudaSuccess) {
      return submitted;
    }
    *pointer = memory;
    return cudaSuccess;
  }
  // Outside a capture it is as "potentially unsafe" as cudaMalloc (no GPU answer is recorded for
  // cudaMallocAsync: the stricter reading, as for cudaFreeAsync; scripts/gpu-check.sh probes it).
  if (cudaError_t const unsafe = sim::check_unsafe_call(call); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  // Stream-ordered allocation is pool memory mapped at once: work runs in stream order, so
  // "available once the stream reaches it" is immediately. Only cudaFree treats it apart.
  return allocate_from_pool(pointer, bytes, pool);
}

}  // namespace

// cudaMallocAsync: "allocates from the current mempool of the provided stream's device"
// (cudaDeviceSetMemPool).
cudaError_t cudaMallocAsync(void** pointer, std::size_t bytes, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (pointer == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::mem_pool_state& pool =
      *sim::state().devices[static_cast<std::size_t>(s->device)]->current_pool;
  return allocate_async(pointer, bytes, pool, s, __func__);
}

// cudaMallocFromPoolAsync: "The allocation comes from the specified memory pool", which "may be
// from a device different than that of the specified hStream". A pool that is no (live) pool is
// cudaErrorInvalidValue, the error listed.
cudaError_t cudaMallocFromPoolAsync(void** ptr, std::size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  sim::mem_pool_state* pool = sim::find_pool(memPool);
  if (ptr == nullptr || pool == nullptr) return sim::fail(cudaErrorInvalidValue);
  return allocate_async(ptr, size, *pool, s, __func__);
}

cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (pointer == nullptr) return cudaSuccess;
  if (s->capture != nullptr) {
    // Only graph allocations can be freed by a graph, once in a graph and not in both its own
    // graph and another (cudaGraphAddMemFreeNode, cudaGraphAddMemAllocNode); refused as that
    // call refuses, and the capture invalidated (the stricter reading).
    if (!sim::free_node_allowed(*s->capture->graph, pointer)) {
      sim::invalidate(*s->capture, cudaErrorInvalidValue, __func__);
      return sim::fail(cudaErrorInvalidValue);
    }
    auto node = std::make_unique<sim::node_state>();
    node->type = cudaGraphNodeTypeMemFree;
    node->memory = pointer;
    return sim::submit(*s, std::move(node));
  }
  // Beside another thread's Global capture, an H100 with CUDA 13.0 refuses it and invalidates
  // that capture, as it does cudaFree (docs/validation.md).
  if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  sim::allocation const* owner = sim::find_allocation(pointer);
  if (owner != nullptr && owner->kind == sim::memory_kind::graph &&
      owner->base == reinterpret_cast<std::uintptr_t>(pointer)) {
    return free_graph_allocation(pointer);
  }
  if (owner == nullptr || owner->base != reinterpret_cast<std::uintptr_t>(pointer)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  // The free is stream-ordered: the memory goes back when the stream reaches it (at once, or
  // when deferred work runs), and to the race checker it writes the whole allocation.
  auto node = std::make_unique<sim::node_state>();
  node->type = cudaGraphNodeTypeMemFree;
  node->memory = pointer;
  node->memory_bytes = owner->bytes;
  node->completion = [base = owner->base] {
    auto& allocations = sim::state().allocations;
    auto const it = allocations.find(base);
    if (it == allocations.end()) return;
    sim::allocation const freed = it->second;
    allocations.erase(it);
    give_back(freed);
    sim::retire_guarded(freed);
  };
  return sim::submit(*s, std::move(node), "cudaFreeAsync");
}

namespace {

// Enqueues a checked copy (1-D or 2-D) to a stream: a memcpy node, captured or run.
cudaError_t enqueue_copy(sim::stream_state& s, sim::memcpy_params const& copy) {
  auto node = std::make_unique<sim::node_state>();
  node->type = cudaGraphNodeTypeMemcpy;
  node->copy = copy;
  std::size_t destination_span = 0;
  std::size_t source_span = 0;
  static_cast<void>(copy_spans(copy, destination_span, source_span));
  bool const source_on_host = !is_device_memory(copy.source);
  bool const pageable_source = source_on_host && sim::find_allocation(copy.source) == nullptr;
  bool const pageable_destination =
      !is_device_memory(copy.destination) && sim::find_allocation(copy.destination) == nullptr;
  if (sim::defers(s) && pageable_source && source_span > 0) {
    // From pageable memory "host memory is copied to a staging buffer immediately" (CUDA
    // Runtime API, "API synchronization behavior"): later host writes do not reach the copy.
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<unsigned char const*>(copy.source),
        static_cast<unsigned char const*>(copy.source) + source_span);
    node->copy.source = staged->data();
    node->staging = staged;
  }
  if (cudaError_t const submitted = sim::submit(s, std::move(node)); submitted != cudaSuccess) {
    return submitted;
  }
  // To pageable memory the call "will return only once the copy has completed" (ibid.).
  if (sim::defers(s) && pageable_destination && !source_on_host) sim::host_waits_for(s.clock);
  return cudaSuccess;
}

// Whether a synchronous copy (cudaMemcpy, cudaMemcpy2D), issued to the legacy stream, returns
// only once it is done (CUDA Runtime API, "API synchronization behavior", synchronous memcpy):
// device to device does not block the host; from pageable host memory to the device the call
// may return "before the DMA to final destination" is done, so the host has not seen the copy
// complete; every other direction blocks until done. cudaDeviceSyncMemops: "synchronous memory
// operations initiated on this context will always synchronize" (cudaSetDeviceFlags).
bool synchronous_copy_blocks_host(void const* destination, void const* source,
                                  cudaMemcpyKind kind) {
  bool const destination_on_device = kind == cudaMemcpyHostToDevice ||
                                     kind == cudaMemcpyDeviceToDevice ||
                                     (kind == cudaMemcpyDefault && is_device_memory(destination));
  bool const source_on_device = kind == cudaMemcpyDeviceToHost ||
                                kind == cudaMemcpyDeviceToDevice ||
                                (kind == cudaMemcpyDefault && is_device_memory(source));
  bool const pageable_source = !source_on_device && sim::find_allocation(source) == nullptr;
  return sync_memops() || (!(destination_on_device && source_on_device) &&
                           !(destination_on_device && pageable_source));
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* destination, void const* source, std::size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (cudaError_t const bad = check_copy(destination, source, bytes, kind); bad != cudaSuccess) {
    if (s->capture != nullptr) sim::invalidate(*s->capture, bad, __func__);
    return sim::fail(bad);
  }
  return enqueue_copy(
      *s, sim::memcpy_params{destination, source, bytes, kind, 1, bytes, bytes, 1, 0, 0});
}

cudaError_t cudaMemcpy(void* destination, void const* source, std::size_t bytes,
                       cudaMemcpyKind kind) {
  sim::lock_guard const lock{sim::state().mutex};
  bool const blocks_host = synchronous_copy_blocks_host(destination, source, kind);
  // Not a "potentially unsafe" call for the capture modes: on an H100 with CUDA 13.0 a
  // synchronous copy or memset beside a capture of a non-blocking stream succeeds in every mode
  // and leaves the capture intact (docs/validation.md). Beside a blocking stream's capture the
  // legacy stream is unusable, which cudaMemcpyAsync checks.
  cudaError_t const copied = cudaMemcpyAsync(destination, source, bytes, kind, cudaStreamLegacy);
  if (copied == cudaSuccess && blocks_host) {
    sim::host_waits_for(sim::find_stream(cudaStreamLegacy)->clock);
  }
  return copied;
}

// The symbol functions (CUDA Runtime API, "Memory Management"). A symbol is a __device__,
// __constant__ or __managed__ variable, named by its address (`&variable`, or the variable
// itself through cuda_runtime.h's template overloads); one the symbol table does not hold
// (graphstep/sim/symbol.hpp) is cudaErrorInvalidSymbol. The copies go "offset bytes from the
// start of symbol"; to a symbol "kind can be either cudaMemcpyHostToDevice,
// cudaMemcpyDeviceToDevice, or cudaMemcpyDefault", from one cudaMemcpyDeviceToHost,
// cudaMemcpyDeviceToDevice or cudaMemcpyDefault; any other is cudaErrorInvalidMemcpyDirection.
// A range past the variable's end is cudaErrorInvalidValue (the header does not say which
// error: the stricter reading refuses it). The variable's memory is then device memory to every
// call, as the address cudaGetSymbolAddress gives is, and each copy is the cudaMemcpy or
// cudaMemcpyAsync of that address, with the ordering and blocking those have.
namespace {

// A symbol function's error, invalidating the capture of `stream` when it is capturing.
cudaError_t symbol_failure(cudaError_t error, cudaStream_t stream, char const* call) {
  sim::stream_state* s = sim::find_stream(stream);
  if (s != nullptr && s->capture != nullptr) sim::invalidate(*s->capture, error, call);
  return sim::fail(error);
}

}  // namespace

cudaError_t cudaGetSymbolAddress(void** devPtr, void const* symbol) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (devPtr == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::device_symbol found;
  if (!sim::find_symbol(symbol, found)) return sim::fail(cudaErrorInvalidSymbol);
  *devPtr = const_cast<void*>(found.address);
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(std::size_t* size, void const* symbol) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (size == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::device_symbol found;
  if (!sim::find_symbol(symbol, found)) return sim::fail(cudaErrorInvalidSymbol);
  *size = found.bytes;
  return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbolAsync(void const* symbol, void const* src, std::size_t count,
                                    std::size_t offset, cudaMemcpyKind kind, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  unsigned char* at = nullptr;
  if (cudaError_t const bad = sim::symbol_copy_address(symbol, count, offset, kind, true, at);
      bad != cudaSuccess) {
    return symbol_failure(bad, stream, __func__);
  }
  return cudaMemcpyAsync(at, src, count, kind, stream);
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, void const* symbol, std::size_t count,
                                      std::size_t offset, cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  unsigned char* at = nullptr;
  if (cudaError_t const bad = sim::symbol_copy_address(symbol, count, offset, kind, false, at);
      bad != cudaSuccess) {
    return symbol_failure(bad, stream, __func__);
  }
  return cudaMemcpyAsync(dst, at, count, kind, stream);
}

cudaError_t cudaMemcpyToSymbol(void const* symbol, void const* src, std::size_t count,
                               std::size_t offset, cudaMemcpyKind kind) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  unsigned char* at = nullptr;
  if (cudaError_t const bad = sim::symbol_copy_address(symbol, count, offset, kind, true, at);
      bad != cudaSuccess) {
    return sim::fail(bad);
  }
  return cudaMemcpy(at, src, count, kind);
}

cudaError_t cudaMemcpyFromSymbol(void* dst, void const* symbol, std::size_t count,
                                 std::size_t offset, cudaMemcpyKind kind) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  unsigned char* at = nullptr;
  if (cudaError_t const bad = sim::symbol_copy_address(symbol, count, offset, kind, false, at);
      bad != cudaSuccess) {
    return sim::fail(bad);
  }
  return cudaMemcpy(dst, at, count, kind);
}

// cudaMemcpy2DAsync: "Copies a matrix (height rows of width bytes each) from the memory area
// pointed to by src to the memory area pointed to by dst ... dpitch and spitch are the widths in
// memory in bytes of the 2D arrays ... including any padding"; checked as check_pitched_copy says,
// then as cudaMemcpyAsync (a refused copy invalidates a capture; captured, it is a memcpy node).
// "The memory areas may not overlap": an overlap is not detected (each row is copied as by
// memmove).
cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, void const* src, std::size_t spitch,
                              std::size_t width, std::size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  // A kind no enumerator names is refused before it is stored as a cudaMemcpyKind: reading such
  // a value back from memory is undefined behaviour (and UBSan says so).
  if (int const k = static_cast<int>(kind); k < cudaMemcpyHostToHost || k > cudaMemcpyDefault) {
    if (s->capture != nullptr) sim::invalidate(*s->capture, cudaErrorInvalidMemcpyDirection, __func__);
    return sim::fail(cudaErrorInvalidMemcpyDirection);
  }
  sim::memcpy_params const copy{dst, src, width, kind, height, dpitch, spitch};
  if (cudaError_t const bad = check_pitched_copy(copy); bad != cudaSuccess) {
    if (s->capture != nullptr) sim::invalidate(*s->capture, bad, __func__);
    return sim::fail(bad);
  }
  return enqueue_copy(*s, copy);
}

namespace {

// The attributes of one copy of a batch, as cudaMemcpyBatchAsync's doc comment
// (cuda_runtime_api.h) lets them be: a source access order of stream, during-API-call or any
// ("Each memcpy operation in the batch must have a valid cudaMemcpyAttributes ... including the
// appropriate srcAccessOrder setting, otherwise the API will return cudaErrorInvalidValue"), and
// only the flags cudaMemcpyFlags names (others refused: the stricter reading). The location
// hints apply only to managed or system-allocated pageable memory that the device may access,
// which the simulated device does not have; "For other cases, these hints are ignored".
bool batch_attributes_valid(cudaMemcpyAttributes const& attributes) {
  switch (attributes.srcAccessOrder) {
    case cudaMemcpySrcAccessOrderStream:
    case cudaMemcpySrcAccessOrderDuringApiCall:
    case cudaMemcpySrcAccessOrderAny: break;
    default: return false;
  }
  return (attributes.flags & ~static_cast<unsigned>(cudaMemcpyFlagPreferOverlapWithCompute)) == 0U;
}

// "the first entry in attrsIdxs must always be 0. Also, each entry must be greater than the
// previous entry and the last entry should be less than count. Furthermore, numAttrs must be
// lesser than or equal to count."
bool batch_attribute_indices_valid(std::size_t const* indices, std::size_t attributes,
                                   std::size_t count) {
  if (attributes == 0 || attributes > count || indices[0] != 0) return false;
  for (std::size_t k = 1; k < attributes; ++k) {
    if (indices[k] <= indices[k - 1]) return false;
  }
  return indices[attributes - 1] < count;
}

// One copy of a batch (cudaMemcpyBatchAsync, cudaMemcpy3DBatchAsync), checked. A source access
// order of "during API call" means "all accesses must be complete before the API call returns":
// a host source is read now, whatever the stream still has queued (a device source is read in
// stream order: host code may not touch device memory here); otherwise as cudaMemcpyAsync.
cudaError_t enqueue_batch_copy(sim::stream_state& s, sim::memcpy_params const& copy,
                               cudaMemcpySrcAccessOrder order, char const* call) {
  if (order != cudaMemcpySrcAccessOrderDuringApiCall || is_device_memory(copy.source)) {
    return enqueue_copy(s, copy);
  }
  // Read now: the caller may reuse the source as soon as the call returns.
  std::size_t destination_span = 0;
  std::size_t source_span = 0;
  static_cast<void>(copy_spans(copy, destination_span, source_span));
  auto const* const source = static_cast<unsigned char const*>(copy.source);
  auto staged = std::make_shared<std::vector<unsigned char>>(source, source + source_span);
  auto node = std::make_unique<sim::node_state>();
  node->type = cudaGraphNodeTypeMemcpy;
  node->copy = copy;
  node->copy.source = staged->data();
  node->staging = staged;
  return sim::submit(s, std::move(node), call);
}

}  // namespace

// cudaMemcpyBatchAsync (cuda_runtime_api.h): "Performs a batch of memory copies" from srcs[i] to
// dsts[i] of sizes[i] bytes, "in stream order but copies within a batch are not guaranteed to
// execute in any specific order"; here they run (or are queued) one after another, in the order
// given, each as cudaMemcpyAsync with cudaMemcpyDefault (pointer-to-pointer copies: unified
// addressing tells the direction). attrs[k] applies to the copies from attrsIdxs[k] up to the
// next index. A source access order of "during API call" means "all accesses must be complete
// before the API call returns": a host source is read now, whatever the stream still has queued
// (a device source is read in stream order: host code may not touch device memory here);
// "any" may be accessed "even after the API call returns", and stream order is one such time.
// The whole batch is checked before any copy is issued; a bad one refuses the whole call. An
// empty copy or a null pointer is refused, as CUDA 13 does (rapidsai/rmm#2509: the call "rejects
// them"); so is the legacy stream ("Must not be legacy NULL stream").
// During a capture it is refused with cudaErrorStreamCaptureUnsupported and the capture stays
// valid: nothing is recorded, and ending the capture succeeds, with a graph that lacks the copies
// (CUDA 13, rapidsai/rmm#2518; a question for a GPU, docs/validation.md). The failure is noted
// for graphstepSimCaptureFailedCall (driver_api.cpp).
cudaError_t cudaMemcpyBatchAsync(void* const* dsts, void const* const* srcs, std::size_t const* sizes,
                                 std::size_t count, cudaMemcpyAttributes* attrs,
                                 std::size_t* attrsIdxs, std::size_t numAttrs,
                                 cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (s->legacy) return sim::fail(cudaErrorInvalidValue);
  if (s->capture != nullptr) {
    return sim::fail_leaving_capture_valid(*s->capture, "cudaMemcpyBatchAsync",
                                           cudaErrorStreamCaptureUnsupported);
  }
  if (dsts == nullptr || srcs == nullptr || sizes == nullptr || count == 0 || attrs == nullptr ||
      attrsIdxs == nullptr || !batch_attribute_indices_valid(attrsIdxs, numAttrs, count)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  for (std::size_t k = 0; k < numAttrs; ++k) {
    if (!batch_attributes_valid(attrs[k])) return sim::fail(cudaErrorInvalidValue);
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (dsts[i] == nullptr || srcs[i] == nullptr || sizes[i] == 0) {
      return sim::fail(cudaErrorInvalidValue);
    }
    if (cudaError_t const bad = check_copy(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault);
        bad != cudaSuccess) {
      return sim::fail(bad);
    }
  }
  std::size_t attribute = 0;
  for (std::size_t i = 0; i < count; ++i) {
    while (attribute + 1 < numAttrs && attrsIdxs[attribute + 1] <= i) ++attribute;
    sim::memcpy_params const copy{dsts[i], srcs[i],  sizes[i], cudaMemcpyDefault,
                                  1,       sizes[i], sizes[i]};
    if (cudaError_t const enqueued =
            enqueue_batch_copy(*s, copy, attrs[attribute].srcAccessOrder, "cudaMemcpyBatchAsync");
        enqueued != cudaSuccess) {
      return enqueued;
    }
  }
  return cudaSuccess;
}

namespace {

// One pointer operand of a cudaMemcpy3DBatchOp: "rowLength ... must either be zero or be greater
// than or equal to the width of the copy", layerHeight likewise for the height, and "When either
// of these values is zero, that aspect of the operand is considered to be tightly packed"
// (elements are bytes for pointer-to-pointer copies). Gives the row and layer pitches in bytes.
cudaError_t batch_operand(cudaMemcpy3DOperand const& operand, cudaExtent const& extent,
                          void*& pointer, std::size_t& pitch, std::size_t& slice_pitch) {
  if (operand.type == cudaMemcpyOperandTypeArray) {
    return sim::refuse("cudaMemcpy3DBatchAsync", "not modelled for CUDA arrays");
  }
  if (operand.type != cudaMemcpyOperandTypePointer || operand.op.ptr.ptr == nullptr) {
    return sim::fail(cudaErrorInvalidValue);
  }
  pitch = operand.op.ptr.rowLength == 0 ? extent.width : operand.op.ptr.rowLength;
  std::size_t const rows =
      operand.op.ptr.layerHeight == 0 ? extent.height : operand.op.ptr.layerHeight;
  if (pitch < extent.width || rows < extent.height || rows > SIZE_MAX / pitch) {
    return sim::fail(cudaErrorInvalidValue);
  }
  pointer = operand.op.ptr.ptr;
  slice_pitch = pitch * rows;
  return cudaSuccess;
}

}  // namespace

// cudaMemcpy3DBatchAsync: "Performs a batch of 3D memory copies", each as cudaMemcpy3DAsync would
// between pitched pointers (cudaMemcpyDefault: unified addressing tells the direction), issued in
// the order given, with the source access orders and flags of cudaMemcpyBatchAsync. Extents
// "must not be zero", "flags - Flags for future use, must be zero now", and the stream "Must not
// be default NULL stream": each cudaErrorInvalidValue, as is any bad operation (then nothing is
// issued). CUDA arrays are not modelled (cudaErrorNotSupported, with a line on stderr). During a
// capture it is refused as cudaMemcpyBatchAsync is (cudaErrorStreamCaptureUnsupported, the capture
// left valid): the stricter reading, since the header is silent (memory_3d_gpu_test asks a GPU).
cudaError_t cudaMemcpy3DBatchAsync(std::size_t numOps, cudaMemcpy3DBatchOp* opList,
                                   unsigned long long flags, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (s->legacy) return sim::fail(cudaErrorInvalidValue);
  if (s->capture != nullptr) {
    return sim::fail_leaving_capture_valid(*s->capture, "cudaMemcpy3DBatchAsync",
                                           cudaErrorStreamCaptureUnsupported);
  }
  if (numOps == 0 || opList == nullptr || flags != 0U) return sim::fail(cudaErrorInvalidValue);
  std::vector<sim::memcpy_params> copies(numOps);
  for (std::size_t i = 0; i < numOps; ++i) {
    cudaMemcpy3DBatchOp const& op = opList[i];
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = op.srcAccessOrder;
    attributes.flags = op.flags;
    if (op.extent.width == 0 || op.extent.height == 0 || op.extent.depth == 0 ||
        !batch_attributes_valid(attributes)) {
      return sim::fail(cudaErrorInvalidValue);
    }
    sim::memcpy_params& copy = copies[i];
    void* source_pointer = nullptr;
    if (cudaError_t const bad = batch_operand(op.src, op.extent, source_pointer, copy.source_pitch,
                                              copy.source_slice_pitch);
        bad != cudaSuccess) {
      return bad;
    }
    if (cudaError_t const bad = batch_operand(op.dst, op.extent, copy.destination,
                                              copy.destination_pitch, copy.destination_slice_pitch);
        bad != cudaSuccess) {
      return bad;
    }
    copy.source = source_pointer;
    copy.bytes = op.extent.width;
    copy.height = op.extent.height;
    copy.depth = op.extent.depth;
    copy.kind = cudaMemcpyDefault;
    if (cudaError_t const bad = check_pitched_copy(copy); bad != cudaSuccess) {
      return sim::fail(bad);
    }
  }
  for (std::size_t i = 0; i < numOps; ++i) {
    if (cudaError_t const enqueued =
            enqueue_batch_copy(*s, copies[i], opList[i].srcAccessOrder, "cudaMemcpy3DBatchAsync");
        enqueued != cudaSuccess) {
      return enqueued;
    }
  }
  return cudaSuccess;
}

namespace {

// What cudaMemPrefetchBatchAsync, cudaMemDiscardBatchAsync and cudaMemDiscardAndPrefetchBatchAsync
// share: the stream ("Must not be legacy NULL stream"), flags ("Must be zero"), and "Each memory
// range specified must refer to managed memory" (cudaDevAttrPageableMemoryAccess is 0 here), all
// cudaErrorInvalidValue, as is an empty batch or range (the stricter reading, as for
// cudaMemPrefetchAsync). During a capture they fail with cudaErrorStreamCaptureUnsupported and
// invalidate it, as cudaMemPrefetchAsync does here (the stricter reading: the header is silent).
// `locations`: the prefetch locations, checked as cudaMemcpyBatchAsync's attribute indices are
// ("the first entry in prefetchLocIdxs must always be 0..."), each a location cudaMemPrefetchAsync
// takes; null for a discard alone.
cudaError_t check_managed_batch(void* const* dptrs, std::size_t const* sizes, std::size_t count,
                                cudaMemLocation const* locations, std::size_t const* indices,
                                std::size_t numLocations, bool prefetches, unsigned long long flags,
                                cudaStream_t stream, char const* call, sim::stream_state*& s) {
  cudaError_t error = cudaSuccess;
  s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (s->legacy || flags != 0U || dptrs == nullptr || sizes == nullptr || count == 0) {
    return sim::fail(cudaErrorInvalidValue);
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (managed_range(dptrs[i], sizes[i]) == nullptr) return sim::fail(cudaErrorInvalidValue);
  }
  if (prefetches) {
    if (locations == nullptr || indices == nullptr ||
        !batch_attribute_indices_valid(indices, numLocations, count)) {
      return sim::fail(cudaErrorInvalidValue);
    }
    for (std::size_t k = 0; k < numLocations; ++k) {
      if (cudaError_t const bad = check_location(locations[k]); bad != cudaSuccess) {
        return sim::fail(bad);
      }
    }
  }
  if (s->capture != nullptr) {
    sim::invalidate(*s->capture, cudaErrorStreamCaptureUnsupported, call);
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}

// The last prefetch location of each range of a checked batch: prefetchLocs[k] applies from
// prefetchLocIdxs[k] to the next index.
void record_batch_prefetches(void* const* dptrs, std::size_t const* sizes, std::size_t count,
                             cudaMemLocation const* locations, std::size_t const* indices,
                             std::size_t numLocations) {
  std::size_t location = 0;
  for (std::size_t i = 0; i < count; ++i) {
    while (location + 1 < numLocations && indices[location + 1] <= i) ++location;
    record_prefetch(dptrs[i], sizes[i], locations[location]);
  }
}

// Discarding "informs the driver that the contents of that range are no longer useful"; "Reading
// from a discarded range, without a subsequent write or prefetch to that part of the range, will
// return an indeterminate value", and accesses "simultaneously with the discard operation result
// in undefined behavior". Each range is refilled with 0xFF bytes in stream order, as fresh memory
// is (a NaN in every floating-point format), by an operation the race checker sees as a write.
cudaError_t discard_ranges(sim::stream_state& s, void* const* dptrs, std::size_t const* sizes,
                           std::size_t count, char const* call) {
  for (std::size_t i = 0; i < count; ++i) {
    if (cudaError_t const submitted = sim::submit(s, memset_node(dptrs[i], 0xFF, sizes[i]), call);
        submitted != cudaSuccess) {
      return submitted;
    }
  }
  return cudaSuccess;
}

}  // namespace

// cudaMemPrefetchBatchAsync: "The semantics of the individual prefetch operations are as described
// in cudaMemPrefetchAsync": checked, and nothing migrates.
cudaError_t cudaMemPrefetchBatchAsync(void** dptrs, std::size_t* sizes, std::size_t count,
                                      cudaMemLocation* prefetchLocs, std::size_t* prefetchLocIdxs,
                                      std::size_t numPrefetchLocs, unsigned long long flags,
                                      cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::stream_state* s = nullptr;
  if (cudaError_t const error =
          check_managed_batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
                              true, flags, stream, __func__, s);
      error != cudaSuccess) {
    return error;
  }
  record_batch_prefetches(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs);
  return cudaSuccess;
}

// cudaMemDiscardBatchAsync: each range discarded (discard_ranges), in stream order.
cudaError_t cudaMemDiscardBatchAsync(void** dptrs, std::size_t* sizes, std::size_t count,
                                     unsigned long long flags, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::stream_state* s = nullptr;
  if (cudaError_t const error = check_managed_batch(dptrs, sizes, count, nullptr, nullptr, 0, false,
                                                    flags, stream, __func__, s);
      error != cudaSuccess) {
    return error;
  }
  return discard_ranges(*s, dptrs, sizes, count, __func__);
}

// cudaMemDiscardAndPrefetchBatchAsync: "semantically equivalent to calling
// cudaMemDiscardBatchAsync followed by cudaMemPrefetchBatchAsync": the ranges discarded, the
// locations checked; the contents stay indeterminate (a prefetch moves pages, not values).
cudaError_t cudaMemDiscardAndPrefetchBatchAsync(void** dptrs, std::size_t* sizes, std::size_t count,
                                                cudaMemLocation* prefetchLocs,
                                                std::size_t* prefetchLocIdxs,
                                                std::size_t numPrefetchLocs,
                                                unsigned long long flags, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::stream_state* s = nullptr;
  if (cudaError_t const error =
          check_managed_batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
                              true, flags, stream, __func__, s);
      error != cudaSuccess) {
    return error;
  }
  record_batch_prefetches(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs);
  return discard_ranges(*s, dptrs, sizes, count, __func__);
}

// --- cudaMemRangeGetAttribute, cudaMemRangeGetAttributes: what cudaMemAdvise and the prefetches
// recorded for the pages of a managed range (managed_page), each as the header describes it.

namespace {

// A location every page shares, or cudaMemLocationTypeInvalid.
template <typename Field>
cudaMemLocation common_location(std::vector<sim::managed_page> const& pages, std::size_t first,
                                std::size_t last, Field field) {
  if (pages.empty()) return cudaMemLocation{cudaMemLocationTypeInvalid, 0};
  cudaMemLocation const shared = pages[first].*field;
  for (std::size_t page = first; page <= last; ++page) {
    cudaMemLocation const other = pages[page].*field;
    if (other.type != shared.type || other.id != shared.id) {
      return cudaMemLocation{cudaMemLocationTypeInvalid, 0};
    }
  }
  return shared;
}

// "a GPU device id if all pages ... have that GPU", "cudaCpuDeviceId if all pages ... have the
// CPU", else cudaInvalidDeviceId.
int device_id_of(cudaMemLocation const& location) {
  switch (location.type) {
    case cudaMemLocationTypeDevice: return location.id;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma: return cudaCpuDeviceId;
    default: return cudaInvalidDeviceId;
  }
}

// One attribute of a checked managed range [first page, last page] of `owner`.
cudaError_t range_attribute(void* data, std::size_t size, cudaMemRangeAttribute attribute,
                            sim::allocation const& owner, std::size_t first, std::size_t last) {
  if (data == nullptr) return cudaErrorInvalidValue;
  std::vector<sim::managed_page> const& pages = owner.managed_pages;
  auto const put_int = [&](int value) {
    if (size != sizeof(int)) return cudaErrorInvalidValue;
    std::memcpy(data, &value, sizeof value);
    return cudaSuccess;
  };
  auto const put_type = [&](cudaMemLocationType type) {
    if (size != sizeof(cudaMemLocationType)) return cudaErrorInvalidValue;
    std::memcpy(data, &type, sizeof type);
    return cudaSuccess;
  };
  cudaMemLocation const preferred =
      common_location(pages, first, last, &sim::managed_page::preferred);
  cudaMemLocation const prefetched =
      common_location(pages, first, last, &sim::managed_page::last_prefetch);
  switch (attribute) {
    case cudaMemRangeAttributeReadMostly: {
      bool all = !pages.empty();
      for (std::size_t page = first; all && page <= last; ++page) all = pages[page].read_mostly;
      return put_int(all ? 1 : 0);
    }
    case cudaMemRangeAttributePreferredLocation: return put_int(device_id_of(preferred));
    case cudaMemRangeAttributeLastPrefetchLocation: return put_int(device_id_of(prefetched));
    case cudaMemRangeAttributePreferredLocationType: return put_type(preferred.type);
    case cudaMemRangeAttributePreferredLocationId: return put_int(preferred.id);
    case cudaMemRangeAttributeLastPrefetchLocationType: return put_type(prefetched.type);
    case cudaMemRangeAttributeLastPrefetchLocationId: return put_int(prefetched.id);
    case cudaMemRangeAttributeAccessedBy: {
      // "a non-zero multiple of 4": the devices advised for the whole range, then
      // cudaInvalidDeviceId in the space left.
      if (size == 0 || size % sizeof(int) != 0) return cudaErrorInvalidValue;
      std::uint32_t common = pages.empty() ? 0U : ~std::uint32_t{0};
      for (std::size_t page = first; !pages.empty() && page <= last; ++page) {
        common &= pages[page].accessed_by;
      }
      std::vector<int> ids(size / sizeof(int), cudaInvalidDeviceId);
      std::size_t filled = 0;
      for (std::size_t device = 0; device < sim::state().devices.size() && filled < ids.size();
           ++device) {
        if ((common & (std::uint32_t{1} << device)) != 0U) ids[filled++] = static_cast<int>(device);
      }
      if ((common & sim::managed_host_bit) != 0U && filled < ids.size()) {
        ids[filled] = cudaCpuDeviceId;
      }
      std::memcpy(data, ids.data(), size);
      return cudaSuccess;
    }
    default: return cudaErrorInvalidValue;
  }
}

// The range must lie in one managed allocation ("must refer to managed memory allocated via
// cudaMallocManaged"); an empty one is cudaErrorInvalidValue (the stricter reading).
sim::allocation const* range_pages(void const* devPtr, std::size_t count, std::size_t& first,
                                   std::size_t& last) {
  sim::allocation const* owner = managed_range(devPtr, count);
  if (owner == nullptr) return nullptr;
  std::size_t const offset = reinterpret_cast<std::uintptr_t>(devPtr) - owner->base;
  first = offset / managed_page_bytes;
  last = (offset + count - 1) / managed_page_bytes;
  return owner;
}

}  // namespace

cudaError_t cudaMemRangeGetAttribute(void* data, std::size_t dataSize,
                                     cudaMemRangeAttribute attribute, void const* devPtr,
                                     std::size_t count) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  std::size_t first = 0;
  std::size_t last = 0;
  sim::allocation const* owner = range_pages(devPtr, count, first, last);
  if (owner == nullptr) return sim::fail(cudaErrorInvalidValue);
  cudaError_t const answered = range_attribute(data, dataSize, attribute, *owner, first, last);
  return answered == cudaSuccess ? cudaSuccess : sim::fail(answered);
}

// cudaMemRangeGetAttributes: each of numAttributes attributes into data[i] of dataSizes[i]
// bytes, as cudaMemRangeGetAttribute gives it; all are checked before any is written.
cudaError_t cudaMemRangeGetAttributes(void** data, std::size_t* dataSizes,
                                      cudaMemRangeAttribute* attributes, std::size_t numAttributes,
                                      void const* devPtr, std::size_t count) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  std::size_t first = 0;
  std::size_t last = 0;
  sim::allocation const* owner = range_pages(devPtr, count, first, last);
  if (owner == nullptr || data == nullptr || dataSizes == nullptr || attributes == nullptr ||
      numAttributes == 0) {
    return sim::fail(cudaErrorInvalidValue);
  }
  std::vector<std::vector<unsigned char>> answers(numAttributes);
  for (std::size_t i = 0; i < numAttributes; ++i) {
    answers[i].resize(dataSizes[i]);
    if (cudaError_t const answered =
            range_attribute(answers[i].data(), dataSizes[i], attributes[i], *owner, first, last);
        answered != cudaSuccess || data[i] == nullptr) {
      return sim::fail(answered == cudaSuccess ? cudaErrorInvalidValue : answered);
    }
  }
  for (std::size_t i = 0; i < numAttributes; ++i) {
    std::memcpy(data[i], answers[i].data(), dataSizes[i]);
  }
  return cudaSuccess;
}

// cudaMemcpy2D: the synchronous form, on the legacy stream, blocking the host as cudaMemcpy does.
cudaError_t cudaMemcpy2D(void* dst, std::size_t dpitch, void const* src, std::size_t spitch,
                         std::size_t width, std::size_t height, cudaMemcpyKind kind) {
  sim::lock_guard const lock{sim::state().mutex};
  bool const blocks_host = synchronous_copy_blocks_host(dst, src, kind);
  cudaError_t const copied =
      cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, cudaStreamLegacy);
  if (copied == cudaSuccess && blocks_host) {
    sim::host_waits_for(sim::find_stream(cudaStreamLegacy)->clock);
  }
  return copied;
}

namespace {

// cudaMemcpyPeer and cudaMemcpyPeerAsync: "dst is the base device pointer of the destination
// memory and dstDevice is the destination device. src is the base device pointer of the source
// memory and srcDevice is the source device"; cudaErrorInvalidDevice and cudaErrorInvalidValue
// are the errors listed. An invalid device is cudaErrorInvalidDevice even for 0 bytes; null
// pointers, memory that is not device memory (host, managed), a range past its allocation, or
// memory of another device than the one named are cudaErrorInvalidValue (the stricter reading:
// the header does not say what a GPU does with a pointer of another device). Peer access need
// not be enabled (cudaDeviceEnablePeerAccess is for kernels).
cudaError_t check_peer_copy(void const* dst, int dst_device, void const* src, int src_device,
                            std::size_t bytes) {
  if (!valid_device(dst_device) || !valid_device(src_device)) return cudaErrorInvalidDevice;
  if (bytes == 0) return cudaSuccess;
  auto const on = [bytes](void const* pointer, int device) {
    sim::allocation const* owner = sim::find_allocation(pointer);
    return pointer != nullptr && is_device_memory(pointer) && owner != nullptr &&
           owner->device == device && sim::device_range_valid(pointer, bytes);
  };
  return on(dst, dst_device) && on(src, src_device) ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace

// "Note that this function is asynchronous with respect to the host and all work on other
// devices" (cudaMemcpyPeerAsync): ordered in `stream` only; captured, it is a memcpy node.
cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, void const* src, int srcDevice,
                                std::size_t count, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (cudaError_t const bad = check_peer_copy(dst, dstDevice, src, srcDevice, count);
      bad != cudaSuccess) {
    if (s->capture != nullptr) sim::invalidate(*s->capture, bad, __func__);
    return sim::fail(bad);
  }
  return enqueue_copy(
      *s, sim::memcpy_params{dst, src, count, cudaMemcpyDeviceToDevice, 1, count, count, 1, 0, 0});
}

// cudaMemcpyPeer: "asynchronous with respect to the host, but serialized with respect all pending
// and future asynchronous work in to the current device, srcDevice, and dstDevice". Modelled as
// a synchronization of the three devices before the copy (so it is refused, as
// cudaDeviceSynchronize is, while one of them is capturing: the stricter reading), the copy on
// the current device's legacy stream, and the host waiting for it, so that later work on any of
// the devices follows it. The host waiting is stricter than a GPU's ordering: a host read of dst
// right after the call, unsynchronized on a GPU, is not reported as a race here.
cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, void const* src, int srcDevice,
                           std::size_t count) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (cudaError_t const bad = check_peer_copy(dst, dstDevice, src, srcDevice, count);
      bad != cudaSuccess) {
    return sim::fail(bad);
  }
  int const devices[] = {sim::this_thread().device, srcDevice, dstDevice};
  for (int const device : devices) {
    if (cudaError_t const capturing = sim::check_device_wide_sync(device, __func__);
        capturing != cudaSuccess) {
      return sim::fail(capturing);
    }
  }
  for (int const device : devices) sim::host_waits_for_device(device);
  cudaError_t const copied =
      cudaMemcpyPeerAsync(dst, dstDevice, src, srcDevice, count, cudaStreamLegacy);
  if (copied == cudaSuccess) sim::host_waits_for(sim::find_stream(cudaStreamLegacy)->clock);
  return copied;
}

cudaError_t cudaMemsetAsync(void* destination, int value, std::size_t bytes, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (bytes > 0 && !sim::device_range_valid(destination, bytes)) {
    if (s->capture != nullptr) sim::invalidate(*s->capture, cudaErrorInvalidValue, __func__);
    return sim::fail(cudaErrorInvalidValue);
  }
  return sim::submit(*s, memset_node(destination, value, bytes));
}

cudaError_t cudaMemset(void* destination, int value, std::size_t bytes) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t const set = cudaMemsetAsync(destination, value, bytes, cudaStreamLegacy);
  if (set == cudaSuccess && sync_memops()) {
    sim::host_waits_for(sim::find_stream(cudaStreamLegacy)->clock);
  }
  return set;
}

// cudaMemset2DAsync: "Sets to the specified value value a matrix (height rows of width bytes
// each) pointed to by dstPtr. pitch is the width in bytes of the 2D array pointed to by dstPtr,
// including any padding added to the end of each row"; the pitch is "Unused if height is 1".
// cudaErrorInvalidValue is the only error listed: a pitch narrower than the width (with more
// than one row), a span that overflows or leaves its allocation. Captured, it is a 2-D memset
// node (elementSize 1, as cudaGraphMemsetNodeGetParams shows); a refused one invalidates the
// capture, as cudaMemsetAsync does.
cudaError_t cudaMemset2DAsync(void* devPtr, std::size_t pitch, int value, std::size_t width,
                              std::size_t height, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  std::size_t const row_pitch = height > 1 ? pitch : width;
  std::size_t span = 0;
  bool const valid = width == 0 || height == 0 ||
                     (row_pitch >= width && pitched_span(width, height, row_pitch, span) &&
                      sim::device_range_valid(devPtr, span));
  if (!valid) {
    if (s->capture != nullptr) sim::invalidate(*s->capture, cudaErrorInvalidValue, __func__);
    return sim::fail(cudaErrorInvalidValue);
  }
  auto node = memset_node(devPtr, value, width);
  node->memset.height = height;
  node->memset.pitch = row_pitch;
  return sim::submit(*s, std::move(node));
}

// cudaMemset2D: "asynchronous with respect to the host unless devPtr refers to pinned host
// memory"; on the legacy stream, as cudaMemset.
cudaError_t cudaMemset2D(void* devPtr, std::size_t pitch, int value, std::size_t width,
                         std::size_t height) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t const set = cudaMemset2DAsync(devPtr, pitch, value, width, height, cudaStreamLegacy);
  if (set == cudaSuccess && sync_memops()) {
    sim::host_waits_for(sim::find_stream(cudaStreamLegacy)->clock);
  }
  return set;
}

// --- pitched and 3-D memory (cudaMallocPitch, cudaMalloc3D, cudaMemcpy3D*, cudaMemset3D*) -------
// Pitched pointers only: CUDA arrays are not modelled, so a copy naming one is refused by name
// (cudaErrorNotSupported). A 3-D copy is one memcpy node of `depth` slices (sim::memcpy_params),
// run and seen by the race checker row by row as a 2-D copy is.

namespace {

// What cudaMallocPitch and cudaMalloc3D pad a row to. The header says only that the function
// "may pad the allocation to ensure that corresponding pointers in any given row will continue to
// meet the alignment requirements for coalescing"; 512 bytes is what current GPUs return.
constexpr std::size_t pitch_alignment = 512;

// The pitch of rows of `width` bytes and the bytes of `rows` such rows; false on overflow.
bool pitched_allocation(std::size_t width, std::size_t rows, std::size_t& pitch,
                        std::size_t& bytes) {
  if (width > SIZE_MAX - (pitch_alignment - 1)) return false;
  pitch = (width + pitch_alignment - 1) / pitch_alignment * pitch_alignment;
  if (rows > SIZE_MAX / pitch) return false;
  bytes = pitch * rows;
  return true;
}

// Pitched device memory, checked as potentially unsafe during a capture as cudaMalloc is. A zero
// extent is cudaErrorInvalidValue: the stricter reading (cudaMalloc of 0 bytes succeeds; the
// pitched forms say nothing; memory_pitched_gpu_test probes it).
cudaError_t allocate_pitched(void** pointer, std::size_t* pitch, std::size_t width,
                             std::size_t height, std::size_t depth, char const* call) {
  if (pointer == nullptr || pitch == nullptr || width == 0 || height == 0 || depth == 0) {
    return sim::fail(cudaErrorInvalidValue);
  }
  if (cudaError_t const unsafe = sim::check_unsafe_call(call); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  std::size_t bytes = 0;
  if (height > SIZE_MAX / depth || !pitched_allocation(width, height * depth, *pitch, bytes)) {
    return sim::fail(cudaErrorMemoryAllocation);
  }
  return allocate(pointer, bytes, sim::memory_kind::device, sim::this_thread().device);
}

// One side of a 3-D copy: "The struct passed to cudaMemcpy3D() must specify one of srcArray or
// srcPtr and one of dstArray or dstPtr. Passing more than one non-zero source or destination
// will cause cudaMemcpy3D() to return an error" (cudaErrorInvalidValue; naming neither too). The
// position is in bytes ("The element for a host or device pointer is assumed to be unsigned
// char"), and "The source object must entirely contain the region defined by srcPos and extent":
// x + width within the pitch (cudaErrorInvalidPitchValue, as a 2-D copy's width beyond its
// pitch) and, where slices are apart (ysize rows), y + height within ysize. Gives the address of
// the region's first byte and the slice pitch.
cudaError_t copy_side(cudaArray_t array, cudaPitchedPtr const& side, cudaPos const& position,
                      cudaExtent const& extent, char const* call, void*& start,
                      std::size_t& slice_pitch) {
  if ((array != nullptr) == (side.ptr != nullptr)) return sim::fail(cudaErrorInvalidValue);
  if (array != nullptr) return sim::refuse(call, "not modelled for CUDA arrays");
  if (position.x > side.pitch || extent.width > side.pitch - position.x) {
    return sim::fail(cudaErrorInvalidPitchValue);
  }
  bool const sliced = extent.depth > 1 || position.z > 0;
  if (sliced && (position.y > side.ysize || extent.height > side.ysize - position.y)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  slice_pitch = 0;
  if (sliced && side.ysize != 0 && side.pitch > SIZE_MAX / side.ysize) {
    return sim::fail(cudaErrorInvalidValue);
  }
  slice_pitch = side.pitch * side.ysize;
  std::size_t row_offset = 0;
  std::size_t slice_offset = 0;
  if ((side.pitch != 0 && position.y > SIZE_MAX / side.pitch) ||
      (slice_pitch != 0 && position.z > SIZE_MAX / slice_pitch)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  row_offset = position.y * side.pitch;
  slice_offset = position.z * slice_pitch;
  if (slice_offset > SIZE_MAX - row_offset - position.x) return sim::fail(cudaErrorInvalidValue);
  start = static_cast<unsigned char*>(side.ptr) + slice_offset + row_offset + position.x;
  return cudaSuccess;
}

// The copy a cudaMemcpy3DParms or cudaMemcpy3DPeerParms describes, its sides checked; `empty`
// when the extent is.
cudaError_t copy_3d(cudaArray_t source_array, cudaPos const& source_position,
                    cudaPitchedPtr const& source, cudaArray_t destination_array,
                    cudaPos const& destination_position, cudaPitchedPtr const& destination,
                    cudaExtent const& extent, cudaMemcpyKind kind, char const* call,
                    sim::memcpy_params& copy) {
  void* source_start = nullptr;
  void* destination_start = nullptr;
  std::size_t source_slice_pitch = 0;
  std::size_t destination_slice_pitch = 0;
  if (cudaError_t const error = copy_side(source_array, source, source_position, extent, call,
                                          source_start, source_slice_pitch);
      error != cudaSuccess) {
    return error;
  }
  if (cudaError_t const error = copy_side(destination_array, destination, destination_position,
                                          extent, call, destination_start, destination_slice_pitch);
      error != cudaSuccess) {
    return error;
  }
  copy = sim::memcpy_params{destination_start,       source_start,      extent.width, kind,
                            extent.height,           destination.pitch, source.pitch, extent.depth,
                            destination_slice_pitch, source_slice_pitch};
  if (cudaError_t const bad = check_pitched_copy(copy); bad != cudaSuccess) return sim::fail(bad);
  return cudaSuccess;
}

// Whether a kind in the caller's memory is one cudaMemcpyKind names; read as an int, since
// loading another value as the enumeration is undefined behaviour (and UBSan says so).
bool kind_valid(cudaMemcpyKind const& kind) {
  int k = 0;
  std::memcpy(&k, &kind, sizeof k);
  return k >= cudaMemcpyHostToHost && k <= cudaMemcpyDefault;
}

// The parameters of a cudaMemcpy3DAsync, checked; a bad one invalidates a capture of `s`.
cudaError_t checked_copy_3d(cudaMemcpy3DParms const* p, sim::stream_state& s, char const* call,
                            sim::memcpy_params& copy) {
  cudaError_t error = cudaSuccess;
  if (p == nullptr) {
    error = sim::fail(cudaErrorInvalidValue);
  } else if (!kind_valid(p->kind)) {
    error = sim::fail(cudaErrorInvalidMemcpyDirection);
  } else {
    error = copy_3d(p->srcArray, p->srcPos, p->srcPtr, p->dstArray, p->dstPos, p->dstPtr, p->extent,
                    p->kind, call, copy);
  }
  if (error != cudaSuccess && s.capture != nullptr) sim::invalidate(*s.capture, error, call);
  return error;
}

// cudaMemcpy3DPeerParms: device memory of the devices named on each side (check_peer_copy's
// rules); an invalid device is cudaErrorInvalidDevice.
cudaError_t checked_peer_copy_3d(cudaMemcpy3DPeerParms const* p, sim::stream_state* s,
                                 char const* call, sim::memcpy_params& copy) {
  cudaError_t error = cudaSuccess;
  if (p == nullptr) {
    error = sim::fail(cudaErrorInvalidValue);
  } else if (!valid_device(p->srcDevice) || !valid_device(p->dstDevice)) {
    error = sim::fail(cudaErrorInvalidDevice);
  } else {
    error = copy_3d(p->srcArray, p->srcPos, p->srcPtr, p->dstArray, p->dstPos, p->dstPtr, p->extent,
                    cudaMemcpyDeviceToDevice, call, copy);
    auto const on = [](void const* pointer, int device) {
      sim::allocation const* owner = sim::find_allocation(pointer);
      return is_device_memory(pointer) && owner != nullptr && owner->device == device;
    };
    if (error == cudaSuccess && copy.bytes > 0 && copy.height > 0 && copy.depth > 0 &&
        (!on(copy.source, p->srcDevice) || !on(copy.destination, p->dstDevice))) {
      error = sim::fail(cudaErrorInvalidValue);
    }
  }
  if (error != cudaSuccess && s != nullptr && s->capture != nullptr) {
    sim::invalidate(*s->capture, error, call);
  }
  return error;
}

bool empty(sim::memcpy_params const& copy) {
  return copy.bytes == 0 || copy.height == 0 || copy.depth == 0;
}

}  // namespace

// cudaMallocPitch: "Allocates at least width (in bytes) * height bytes of linear memory on the
// device"; "The pitch returned in *pitch by cudaMallocPitch() is the width in bytes of the
// allocation". Freed with cudaFree.
cudaError_t cudaMallocPitch(void** devPtr, std::size_t* pitch, std::size_t width,
                            std::size_t height) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  return allocate_pitched(devPtr, pitch, width, height, 1, __func__);
}

// cudaMalloc3D: "Allocates at least width * height * depth bytes of linear memory on the device
// and returns a cudaPitchedPtr in which ptr is a pointer to the allocated memory"; xsize and
// ysize are "equivalent to the width and height extent parameters".
cudaError_t cudaMalloc3D(cudaPitchedPtr* pitchedDevPtr, cudaExtent extent) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (pitchedDevPtr == nullptr) return sim::fail(cudaErrorInvalidValue);
  void* memory = nullptr;
  std::size_t pitch = 0;
  if (cudaError_t const error =
          allocate_pitched(&memory, &pitch, extent.width, extent.height, extent.depth, __func__);
      error != cudaSuccess) {
    return error;
  }
  *pitchedDevPtr = cudaPitchedPtr{memory, pitch, extent.width, extent.height};
  return cudaSuccess;
}

// cudaMemcpy3DAsync: the copy cudaMemcpy3D describes, in stream order (captured, a memcpy node);
// checked as copy_side and check_pitched_copy say. "The source and destination object may not
// overlap": an overlap is not detected.
cudaError_t cudaMemcpy3DAsync(cudaMemcpy3DParms const* p, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  sim::memcpy_params copy;
  if (cudaError_t const bad = checked_copy_3d(p, *s, __func__, copy); bad != cudaSuccess) {
    return bad;
  }
  if (empty(copy)) return cudaSuccess;
  return enqueue_copy(*s, copy);
}

// cudaMemcpy3D: the synchronous form, on the legacy stream, blocking the host as cudaMemcpy does.
cudaError_t cudaMemcpy3D(cudaMemcpy3DParms const* p) {
  sim::lock_guard const lock{sim::state().mutex};
  bool const blocks_host = p != nullptr && kind_valid(p->kind) &&
                           synchronous_copy_blocks_host(p->dstPtr.ptr, p->srcPtr.ptr, p->kind);
  cudaError_t const copied = cudaMemcpy3DAsync(p, cudaStreamLegacy);
  if (copied == cudaSuccess && blocks_host) {
    sim::host_waits_for(sim::find_stream(cudaStreamLegacy)->clock);
  }
  return copied;
}

// cudaMemcpy3DPeerAsync: "Perform a 3D memory copy between devices"; ordered in `stream` only,
// as cudaMemcpyPeerAsync.
cudaError_t cudaMemcpy3DPeerAsync(cudaMemcpy3DPeerParms const* p, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  sim::memcpy_params copy;
  if (cudaError_t const bad = checked_peer_copy_3d(p, s, __func__, copy); bad != cudaSuccess) {
    return bad;
  }
  if (empty(copy)) return cudaSuccess;
  return enqueue_copy(*s, copy);
}

// cudaMemcpy3DPeer: serialized with the current device and both devices named, as cudaMemcpyPeer
// (whose model it shares: a synchronization of the three devices, the copy on the legacy stream,
// the host waiting for it).
cudaError_t cudaMemcpy3DPeer(cudaMemcpy3DPeerParms const* p) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::memcpy_params copy;
  if (cudaError_t const bad = checked_peer_copy_3d(p, nullptr, __func__, copy);
      bad != cudaSuccess) {
    return bad;
  }
  int const devices[] = {sim::this_thread().device, p->srcDevice, p->dstDevice};
  for (int const device : devices) {
    if (cudaError_t const capturing = sim::check_device_wide_sync(device, __func__);
        capturing != cudaSuccess) {
      return sim::fail(capturing);
    }
  }
  for (int const device : devices) sim::host_waits_for_device(device);
  cudaError_t const copied = cudaMemcpy3DPeerAsync(p, cudaStreamLegacy);
  if (copied == cudaSuccess) sim::host_waits_for(sim::find_stream(cudaStreamLegacy)->clock);
  return copied;
}

// cudaMemset3DAsync: "Initializes each element of a 3D array to the specified value"; "The pitch
// field of pitchedDevPtr is ignored when height and depth are both equal to 1", ysize is "the
// height of each 2D slice in rows". cudaErrorInvalidValue, the only error listed: a pitch
// narrower than the width, more rows than a slice has (depth above 1), a span that overflows or
// leaves its allocation. Slices ysize rows apart with every row set (height == ysize) are one
// 2-D memset node of height * depth rows; otherwise each slice is a 2-D memset node of its own,
// in order (a capture records them as a chain: the header does not say how a GPU records it).
cudaError_t cudaMemset3DAsync(cudaPitchedPtr pitchedDevPtr, int value, cudaExtent extent,
                              cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (extent.width == 0 || extent.height == 0 || extent.depth == 0) return cudaSuccess;
  bool const one_row = extent.height == 1 && extent.depth == 1;
  std::size_t const pitch = one_row ? extent.width : pitchedDevPtr.pitch;
  std::size_t const ysize = extent.depth > 1 ? pitchedDevPtr.ysize : extent.height;
  std::size_t span = 0;
  bool const valid =
      pitch >= extent.width && extent.height <= ysize &&
      (ysize == 0 || pitch <= SIZE_MAX / ysize) &&
      pitched_span(extent.width, extent.height, pitch, extent.depth, pitch * ysize, span) &&
      sim::device_range_valid(pitchedDevPtr.ptr, span);
  if (!valid) {
    if (s->capture != nullptr) sim::invalidate(*s->capture, cudaErrorInvalidValue, __func__);
    return sim::fail(cudaErrorInvalidValue);
  }
  bool const contiguous_slices = extent.depth == 1 || extent.height == ysize;
  std::size_t const nodes = contiguous_slices ? 1 : extent.depth;
  for (std::size_t z = 0; z < nodes; ++z) {
    auto node = memset_node(static_cast<unsigned char*>(pitchedDevPtr.ptr) + z * pitch * ysize,
                            value, extent.width);
    node->memset.height = contiguous_slices ? extent.height * extent.depth : extent.height;
    node->memset.pitch = pitch;
    if (cudaError_t const submitted = sim::submit(*s, std::move(node)); submitted != cudaSuccess) {
      return submitted;
    }
  }
  return cudaSuccess;
}

// cudaMemset3D: "asynchronous with respect to the host unless pitchedDevPtr refers to pinned host
// memory"; on the legacy stream, as cudaMemset2D.
cudaError_t cudaMemset3D(cudaPitchedPtr pitchedDevPtr, int value, cudaExtent extent) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t const set = cudaMemset3DAsync(pitchedDevPtr, value, extent, cudaStreamLegacy);
  if (set == cudaSuccess && sync_memops()) {
    sim::host_waits_for(sim::find_stream(cudaStreamLegacy)->clock);
  }
  return set;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, void const* pointer) {
  sim::lock_guard const lock{sim::state().mutex};
  if (attributes == nullptr) return sim::fail(cudaErrorInvalidValue);
  *attributes = cudaPointerAttributes{};
  sim::allocation const* owner = sim::find_allocation(pointer);
  if (owner == nullptr) {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    attributes->hostPointer = const_cast<void*>(pointer);
    return cudaSuccess;
  }
  attributes->device = owner->device;
  if (owner->managed) {
    attributes->type = cudaMemoryTypeManaged;
    attributes->hostPointer = const_cast<void*>(pointer);
    attributes->devicePointer = const_cast<void*>(pointer);
  } else if (owner->kind == sim::memory_kind::pinned_host) {
    attributes->type = cudaMemoryTypeHost;
    attributes->hostPointer = const_cast<void*>(pointer);
    attributes->devicePointer = const_cast<void*>(pointer);
  } else {
    attributes->type = cudaMemoryTypeDevice;
    attributes->devicePointer = const_cast<void*>(pointer);
  }
  return cudaSuccess;
}

// --- stream-ordered memory pools (cuda_runtime_api.h, "Stream Ordered Memory Allocator") -----
// Device pools only: the simulated device has no host-memory or managed pools (their locations
// and allocation types answer cudaErrorNotSupported, a listed error) and no IPC (export and
// import stay refused). Pool allocations are device memory of the pool's device; the pool counts
// them as used and keeps what frees give back reserved (sim::mem_pool_state), releasing it down
// to the release threshold at the next synchronization or to cudaMemPoolTrimTo's figure.

namespace {

// What a pool's location may name here: a device (a valid ordinal). Host and host-NUMA pools are
// not modelled; anything else is invalid.
cudaError_t check_pool_location(cudaMemLocation const& location, char const* call) {
  switch (location.type) {
    case cudaMemLocationTypeDevice:
      return valid_device(location.id) ? cudaSuccess : sim::fail(cudaErrorInvalidValue);
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
      return sim::refuse(call, "not modelled for host-memory pools");
    default: return sim::fail(cudaErrorInvalidValue);
  }
}

// cudaMemGetDefaultMemPool, cudaMemGetMemPool and cudaMemSetMemPool take "one of
// cudaMemLocationTypeDevice, cudaMemLocationTypeHost or cudaMemLocationTypeHostNuma" with
// cudaMemAllocationTypePinned, or cudaMemAllocationTypeManaged, whose location may also be
// cudaMemLocationTypeNone; "In all other cases, the call return cudaErrorInvalidValue". Returns
// the device whose pools the pair names.
cudaError_t check_location_and_type(cudaMemLocation const* location, cudaMemAllocationType type,
                                    char const* call, int& device) {
  if (location == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (type == cudaMemAllocationTypeManaged) {
    switch (location->type) {
      case cudaMemLocationTypeNone:
      case cudaMemLocationTypeDevice:
      case cudaMemLocationTypeHost:
      case cudaMemLocationTypeHostNuma: return sim::refuse(call, "not modelled for managed pools");
      default: return sim::fail(cudaErrorInvalidValue);
    }
  }
  if (type != cudaMemAllocationTypePinned) return sim::fail(cudaErrorInvalidValue);
  if (cudaError_t const error = check_pool_location(*location, call); error != cudaSuccess) {
    return error;
  }
  device = location->id;
  return cudaSuccess;
}

// Whether every byte of `bytes` is zero (the reserved fields "must be 0").
bool all_zero(unsigned char const* bytes, std::size_t count) {
  return std::all_of(bytes, bytes + count, [](unsigned char b) { return b == 0; });
}

sim::device_state& device_at(int ordinal) {
  return *sim::state().devices[static_cast<std::size_t>(ordinal)];
}

// cudaDeviceSetMemPool: "The memory pool must be local to the specified device".
cudaError_t set_current_pool(int device, cudaMemPool_t memPool) {
  sim::mem_pool_state* pool = sim::find_pool(memPool);
  if (pool == nullptr || pool->device != device) return sim::fail(cudaErrorInvalidValue);
  device_at(device).current_pool = pool;
  return cudaSuccess;
}

}  // namespace

// cudaMemPoolCreate: "Currently must be specified as cudaMemAllocationTypePinned" (allocType);
// cudaMemLocationTypeHostNumaCurrent "will result in cudaErrorInvalidValue"; the Windows
// security attributes are "required to be zero" and the reserved bytes "must be 0". A pool that
// is IPC capable (handleTypes) or for hardware decompression (usage) is not modelled:
// cudaErrorNotSupported, a listed error, with a message; an unknown handle type is invalid. An
// invalid device ordinal is cudaErrorInvalidValue, the header's error for a bad argument.
cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, cudaMemPoolProps const* poolProps) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (memPool == nullptr || poolProps == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (poolProps->allocType != cudaMemAllocationTypePinned ||
      poolProps->win32SecurityAttributes != nullptr ||
      !all_zero(poolProps->reserved, sizeof poolProps->reserved)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  auto const handle_types = static_cast<unsigned>(poolProps->handleTypes);
  unsigned const known = cudaMemHandleTypePosixFileDescriptor | cudaMemHandleTypeWin32 |
                         cudaMemHandleTypeWin32Kmt | cudaMemHandleTypeFabric;
  if ((handle_types & ~known) != 0U) return sim::fail(cudaErrorInvalidValue);
  if (cudaError_t const error = check_pool_location(poolProps->location, __func__);
      error != cudaSuccess) {
    return error;
  }
  if (handle_types != 0U) return sim::refuse(__func__, "not modelled for IPC-capable pools");
  if (poolProps->usage != 0) return sim::refuse(__func__, "not modelled for decompression pools");
  auto pool = std::make_unique<sim::mem_pool_state>();
  pool->device = poolProps->location.id;
  pool->max_size = poolProps->maxSize;
  *memPool = reinterpret_cast<cudaMemPool_t>(pool.get());
  sim::state().pools.emplace(pool.get(), std::move(pool));
  return cudaSuccess;
}

// cudaMemPoolDestroy: "A device's default memory pool cannot be destroyed" (cudaErrorInvalidValue,
// as for a handle that names no pool); "Destroying the current mempool of a device sets the
// default mempool of that device as the current mempool"; with allocations outstanding or frees
// not yet run, "the function will return immediately and the resources associated with the pool
// will be released automatically once there are no more outstanding allocations".
cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::mem_pool_state* pool = sim::find_pool(memPool);
  if (pool == nullptr || pool->is_default) return sim::fail(cudaErrorInvalidValue);
  sim::device_state& device = device_at(pool->device);
  if (device.current_pool == pool) device.current_pool = device.default_pool;
  pool->destroyed = true;
  if (pool->used == 0) sim::pool_give_back(*pool, 0);  // released now
  return cudaSuccess;
}

// cudaMemPoolTrimTo: "Releases memory back to the OS until the pool contains fewer than
// minBytesToKeep reserved bytes, or there is no more memory that the allocator can safely
// release"; memory of outstanding allocations stays.
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, std::size_t minBytesToKeep) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::mem_pool_state* pool = sim::find_pool(memPool);
  if (pool == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::trim_pool(*pool, minBytesToKeep);
  return cudaSuccess;
}

// cudaMemPoolSetAttribute: the reuse policies (int) and the release threshold (cuuint64_t) are
// stored; the high watermarks may only be reset ("It is illegal to set this attribute to a
// non-zero value"), to the current figure; the current counts are read-only. Anything else is
// cudaErrorInvalidValue. The reuse policies are kept and read back, and change nothing here:
// freed pool memory is reused as soon as its free has run, which the default policies allow.
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::mem_pool_state* pool = sim::find_pool(memPool);
  if (pool == nullptr || value == nullptr) return sim::fail(cudaErrorInvalidValue);
  auto const as_int = [value] { return *static_cast<int const*>(value) != 0 ? 1 : 0; };
  auto const as_u64 = [value] { return *static_cast<std::uint64_t const*>(value); };
  switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
      pool->reuse_follow_event_dependencies = as_int();
      return cudaSuccess;
    case cudaMemPoolReuseAllowOpportunistic:
      pool->reuse_allow_opportunistic = as_int();
      return cudaSuccess;
    case cudaMemPoolReuseAllowInternalDependencies:
      pool->reuse_allow_internal_dependencies = as_int();
      return cudaSuccess;
    case cudaMemPoolAttrReleaseThreshold: pool->release_threshold = as_u64(); return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
      if (as_u64() != 0) return sim::fail(cudaErrorInvalidValue);
      pool->reserved_high = pool->reserved;
      return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
      if (as_u64() != 0) return sim::fail(cudaErrorInvalidValue);
      pool->used_high = pool->used;
      return cudaSuccess;
    default: return sim::fail(cudaErrorInvalidValue);
  }
}

// cudaMemPoolGetAttribute: each attribute as cudaMemPoolSetAttribute stored it, and the counts:
// reserved ("Amount of backing memory currently allocated for the mempool") and used ("Amount of
// memory from the pool that is currently in use by the application"), each with its high
// watermark "since the last time it was reset". Sizes are rounded up to 256 bytes, as cudaMalloc
// rounds them; a GPU rounds to its own granularity.
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::mem_pool_state const* pool = sim::find_pool(memPool);
  if (pool == nullptr || value == nullptr) return sim::fail(cudaErrorInvalidValue);
  auto const put_int = [value](int v) { *static_cast<int*>(value) = v; };
  auto const put_u64 = [value](std::uint64_t v) { *static_cast<std::uint64_t*>(value) = v; };
  switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
      put_int(pool->reuse_follow_event_dependencies);
      return cudaSuccess;
    case cudaMemPoolReuseAllowOpportunistic:
      put_int(pool->reuse_allow_opportunistic);
      return cudaSuccess;
    case cudaMemPoolReuseAllowInternalDependencies:
      put_int(pool->reuse_allow_internal_dependencies);
      return cudaSuccess;
    case cudaMemPoolAttrReleaseThreshold: put_u64(pool->release_threshold); return cudaSuccess;
    case cudaMemPoolAttrReservedMemCurrent: put_u64(pool->reserved); return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh: put_u64(pool->reserved_high); return cudaSuccess;
    case cudaMemPoolAttrUsedMemCurrent: put_u64(pool->used); return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh: put_u64(pool->used_high); return cudaSuccess;
    default: return sim::fail(cudaErrorInvalidValue);
  }
}

// cudaMemPoolSetAccess: "Each descriptor instructs the access to enable for a single gpu";
// cudaErrorInvalidValue is the error listed, for any bad descriptor (then nothing changes). The
// header is silent on read-only access and on the pool's own device: both are refused here, the
// stricter reading (a kernel here cannot be kept from writing memory it may read, and a pool's
// own device always reads and writes it; memory_pools_gpu_test probes both).
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, cudaMemAccessDesc const* descList,
                                 std::size_t count) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::mem_pool_state* pool = sim::find_pool(memPool);
  if (pool == nullptr || (count > 0 && descList == nullptr)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  for (std::size_t i = 0; i < count; ++i) {
    cudaMemAccessDesc const& desc = descList[i];
    bool const valid =
        desc.location.type == cudaMemLocationTypeDevice && valid_device(desc.location.id) &&
        (desc.flags == cudaMemAccessFlagsProtNone ||
         desc.flags == cudaMemAccessFlagsProtReadWrite) &&
        (desc.location.id != pool->device || desc.flags == cudaMemAccessFlagsProtReadWrite);
    if (!valid) return sim::fail(cudaErrorInvalidValue);
  }
  for (std::size_t i = 0; i < count; ++i) {
    cudaMemAccessDesc const& desc = descList[i];
    if (desc.location.id == pool->device) continue;
    if (desc.flags == cudaMemAccessFlagsProtNone) {
      pool->access_by_device.erase(desc.location.id);
    } else {
      pool->access_by_device[desc.location.id] = desc.flags;
    }
  }
  return cudaSuccess;
}

// cudaMemPoolGetAccess: "the accessibility of the pool's memory from the specified location":
// read and write from its own device ("By default, the pool's memory will be accessible from the
// device it is allocated on", cudaMemPoolCreate), what cudaMemPoolSetAccess granted another.
// A location that is no device is cudaErrorInvalidValue (the stricter reading).
cudaError_t cudaMemPoolGetAccess(cudaMemAccessFlags* flags, cudaMemPool_t memPool,
                                 cudaMemLocation* location) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::mem_pool_state const* pool = sim::find_pool(memPool);
  if (flags == nullptr || pool == nullptr || location == nullptr ||
      location->type != cudaMemLocationTypeDevice || !valid_device(location->id)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  if (location->id == pool->device) {
    *flags = cudaMemAccessFlagsProtReadWrite;
    return cudaSuccess;
  }
  auto const granted = pool->access_by_device.find(location->id);
  *flags = granted == pool->access_by_device.end() ? cudaMemAccessFlagsProtNone : granted->second;
  return cudaSuccess;
}

// cudaDeviceGetDefaultMemPool: "The default mempool of a device contains device memory from that
// device"; an invalid ordinal is cudaErrorInvalidDevice.
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (memPool == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (!valid_device(device)) return sim::fail(cudaErrorInvalidDevice);
  *memPool = reinterpret_cast<cudaMemPool_t>(device_at(device).default_pool);
  return cudaSuccess;
}

// cudaDeviceSetMemPool: an invalid ordinal is cudaErrorInvalidDevice; a pool that is not "local
// to the specified device", or no pool, is cudaErrorInvalidValue.
cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (!valid_device(device)) return sim::fail(cudaErrorInvalidDevice);
  return set_current_pool(device, memPool);
}

// cudaDeviceGetMemPool: "the last pool provided to cudaDeviceSetMemPool for this device or the
// device's default memory pool". The errors listed are cudaErrorInvalidValue and
// cudaErrorNotSupported: an invalid ordinal is cudaErrorInvalidValue here (probed on a GPU).
cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (memPool == nullptr || !valid_device(device)) return sim::fail(cudaErrorInvalidValue);
  *memPool = reinterpret_cast<cudaMemPool_t>(device_at(device).current_pool);
  return cudaSuccess;
}

// cudaMemGetDefaultMemPool: a device location with cudaMemAllocationTypePinned is the device's
// default pool (cudaDeviceGetDefaultMemPool); host and managed pools are not modelled.
cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t* memPool, cudaMemLocation* location,
                                     cudaMemAllocationType type) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (memPool == nullptr) return sim::fail(cudaErrorInvalidValue);
  int device = 0;
  if (cudaError_t const error = check_location_and_type(location, type, __func__, device);
      error != cudaSuccess) {
    return error;
  }
  *memPool = reinterpret_cast<cudaMemPool_t>(device_at(device).default_pool);
  return cudaSuccess;
}

// cudaMemGetMemPool: "the last pool provided to cudaMemSetMemPool or cudaDeviceSetMemPool for
// this location and allocation type or the location's default memory pool".
cudaError_t cudaMemGetMemPool(cudaMemPool_t* memPool, cudaMemLocation* location,
                              cudaMemAllocationType type) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (memPool == nullptr) return sim::fail(cudaErrorInvalidValue);
  int device = 0;
  if (cudaError_t const error = check_location_and_type(location, type, __func__, device);
      error != cudaSuccess) {
    return error;
  }
  *memPool = reinterpret_cast<cudaMemPool_t>(device_at(device).current_pool);
  return cudaSuccess;
}

// cudaMemSetMemPool: "the location parameter should be the same as the location of the pool. If
// the location type or index don't match, the call returns cudaErrorInvalidValue", and so does a
// pool of another allocation type; a device location with cudaMemAllocationTypePinned "is the
// equivalent of calling cudaDeviceSetMemPool". Every pool here is a pinned device pool, so any
// other location or type is a mismatch.
cudaError_t cudaMemSetMemPool(cudaMemLocation* location, cudaMemAllocationType type,
                              cudaMemPool_t memPool) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (location == nullptr || type != cudaMemAllocationTypePinned ||
      location->type != cudaMemLocationTypeDevice || !valid_device(location->id)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  return set_current_pool(location->id, memPool);
}

// --- streams -----------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (stream == nullptr || (flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) != 0U) {
    return sim::fail(cudaErrorInvalidValue);
  }
  auto created = std::make_unique<sim::stream_state>();
  created->device = sim::this_thread().device;
  created->flags = flags;
  created->priority = std::clamp(priority, -5, 0);
  created->id = sim::state().next_stream_id++;
  *stream = reinterpret_cast<cudaStream_t>(created.get());
  sim::state().streams.insert(created.release());
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithPriority(stream, cudaStreamDefault, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (sim::this_thread().in_host_function) return sim::fail(cudaErrorNotPermitted);
  auto* s = reinterpret_cast<sim::stream_state*>(stream);
  if (sim::state().streams.count(s) == 0) return sim::fail(cudaErrorInvalidResourceHandle);
  if (sim::capture_state* capture = s->capture; capture != nullptr) {
    if (capture->origin == s) {
      // The capture could never be ended: refused (stricter than the documentation, which is
      // silent), and the capture is invalidated.
      sim::invalidate(*capture, cudaErrorStreamCaptureUnsupported, __func__);
      return sim::fail(cudaErrorStreamCaptureUnsupported);
    }
    // A forked stream's last work still has to be joined: it stays in the join check.
    capture->orphans.insert(capture->orphans.end(), s->capture_dependencies.begin(),
                            s->capture_dependencies.end());
    capture->streams.erase(s);
  }
  sim::state().streams.erase(s);
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (flags == nullptr) return sim::fail(cudaErrorInvalidValue);
  *flags = s->flags;
  return cudaSuccess;
}

cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (priority == nullptr) return sim::fail(cudaErrorInvalidValue);
  *priority = s->priority;
  return cudaSuccess;
}

// "Returns in *device the device of the stream" (cudaStreamGetDevice, cuda_runtime_api.h of
// CUDA 13.0); the null stream is the current device's legacy stream (\note_null_stream there).
cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (device == nullptr) return sim::fail(cudaErrorInvalidValue);
  *device = s->device;
  return cudaSuccess;
}

// --- stream attributes (cudaStreamGetAttribute, cudaStreamSetAttribute, cudaStreamCopyAttributes)
// The attributes a stream keeps: the access policy window and the synchronization policy, stored
// and read back (no L2 cache or host scheduling is modelled), and the priority, the stream's own
// (cudaStreamGetPriority). Memory synchronization domains are not modelled: refused by name.

namespace {

bool access_property_valid(cudaAccessProperty const& property, bool persisting_allowed) {
  int value = 0;
  std::memcpy(&value, &property, sizeof value);
  return value == cudaAccessPropertyNormal || value == cudaAccessPropertyStreaming ||
         (persisting_allowed && value == cudaAccessPropertyPersisting);
}

// cudaAccessPolicyWindow: hitRatio "specifies percentage of lines assigned hitProp" (0 to 1),
// missProp "Must be either NORMAL or STREAMING", num_bytes at most
// cudaDevAttrMaxAccessPolicyWindowSize ("CUDA driver may restrict the maximum size").
bool access_policy_window_valid(cudaAccessPolicyWindow const& window, int device) {
  auto const max_bytes = static_cast<std::size_t>(
      sim::state().devices[static_cast<std::size_t>(device)]->properties.accessPolicyMaxWindowSize);
  return window.hitRatio >= 0.0F && window.hitRatio <= 1.0F &&
         access_property_valid(window.hitProp, true) &&
         access_property_valid(window.missProp, false) && window.num_bytes <= max_bytes;
}

bool synchronization_policy_valid(cudaSynchronizationPolicy const& policy) {
  int value = 0;
  std::memcpy(&value, &policy, sizeof value);
  return value >= cudaSyncPolicyAuto && value <= cudaSyncPolicyBlockingSync;
}

// The greatest and least priorities cudaDeviceGetStreamPriorityRange gives.
constexpr int greatest_priority = -5;
constexpr int least_priority = 0;

cudaError_t refuse_memory_sync_domains(char const* call) {
  return sim::refuse(call, "not modelled for memory synchronization domains");
}

}  // namespace

// cudaStreamGetAttribute: "Queries attribute attr from hStream and stores it in corresponding
// member of value_out". An invalid stream is cudaErrorInvalidResourceHandle, a null value or an
// attribute streams do not have cudaErrorInvalidValue.
cudaError_t cudaStreamGetAttribute(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                   cudaLaunchAttributeValue* value_out) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(hStream, error);
  if (s == nullptr) return error;
  if (value_out == nullptr) return sim::fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow:
      value_out->accessPolicyWindow = s->access_policy_window;
      return cudaSuccess;
    case cudaLaunchAttributeSynchronizationPolicy:
      value_out->syncPolicy = s->synchronization_policy;
      return cudaSuccess;
    case cudaLaunchAttributePriority: value_out->priority = s->priority; return cudaSuccess;
    case cudaLaunchAttributeMemSyncDomainMap:
    case cudaLaunchAttributeMemSyncDomain: return refuse_memory_sync_domains(__func__);
    default: return sim::fail(cudaErrorInvalidValue);
  }
}

// cudaStreamSetAttribute: "The updated attribute will be applied to subsequent work submitted to
// the stream. It will not affect previously submitted work." Values outside what the
// attribute's type allows are cudaErrorInvalidValue: a window checked as
// access_policy_window_valid says, a policy no enumerator names, and a priority outside
// cudaDeviceGetStreamPriorityRange's (the stricter reading: stream creation clamps it).
cudaError_t cudaStreamSetAttribute(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                   cudaLaunchAttributeValue const* value) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(hStream, error);
  if (s == nullptr) return error;
  if (value == nullptr) return sim::fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow:
      if (!access_policy_window_valid(value->accessPolicyWindow, s->device)) {
        return sim::fail(cudaErrorInvalidValue);
      }
      s->access_policy_window = value->accessPolicyWindow;
      return cudaSuccess;
    case cudaLaunchAttributeSynchronizationPolicy:
      if (!synchronization_policy_valid(value->syncPolicy)) return sim::fail(cudaErrorInvalidValue);
      s->synchronization_policy = value->syncPolicy;
      return cudaSuccess;
    case cudaLaunchAttributePriority:
      if (value->priority < greatest_priority || value->priority > least_priority) {
        return sim::fail(cudaErrorInvalidValue);
      }
      s->priority = value->priority;
      return cudaSuccess;
    case cudaLaunchAttributeMemSyncDomainMap:
    case cudaLaunchAttributeMemSyncDomain: return refuse_memory_sync_domains(__func__);
    default: return sim::fail(cudaErrorInvalidValue);
  }
}

// cudaStreamCopyAttributes: "Copies attributes from source stream src to destination stream dst.
// Both streams must have the same context": streams of different devices are cudaErrorInvalidValue
// (the header lists cudaErrorNotSupported only; the stricter reading), an invalid handle
// cudaErrorInvalidResourceHandle.
cudaError_t cudaStreamCopyAttributes(cudaStream_t dst, cudaStream_t src) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* to = stream_or_fail(dst, error);
  if (to == nullptr) return error;
  sim::stream_state const* from = stream_or_fail(src, error);
  if (from == nullptr) return error;
  if (to->device != from->device) return sim::fail(cudaErrorInvalidValue);
  to->access_policy_window = from->access_policy_window;
  to->synchronization_policy = from->synchronization_policy;
  to->priority = from->priority;
  return cudaSuccess;
}

// cudaStreamAttachMemAsync: "Enqueues an operation in stream to specify stream association of
// length bytes of memory starting from devPtr". The memory must be managed
// (cudaDevAttrPageableMemoryAccess is 0 here), and "For managed allocations, length must be
// either zero or the entire allocation's size" (devPtr its start: the stricter reading); flags
// "must be one of cudaMemAttachGlobal, cudaMemAttachHost or cudaMemAttachSingle", and "It is
// illegal to attach singly to the NULL stream": cudaErrorInvalidValue. Every device here reports
// cudaDevAttrConcurrentManagedAccess, for which the association constrains nothing, so the
// attachment is checked and changes nothing. In a capture it fails with
// cudaErrorStreamCaptureUnsupported and invalidates it, as a prefetch does (the stricter reading:
// the header is silent).
cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* devPtr, std::size_t length,
                                     unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  sim::allocation const* owner = sim::find_allocation(devPtr);
  bool const whole_allocation = owner != nullptr && owner->managed &&
                                owner->base == reinterpret_cast<std::uintptr_t>(devPtr) &&
                                (length == 0 || length == owner->bytes);
  bool const flags_valid = flags == cudaMemAttachGlobal || flags == cudaMemAttachHost ||
                           (flags == cudaMemAttachSingle && !s->legacy && stream != nullptr);
  if (!whole_allocation || !flags_valid) return sim::fail(cudaErrorInvalidValue);
  if (s->capture != nullptr) {
    sim::invalidate(*s->capture, cudaErrorStreamCaptureUnsupported, __func__);
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}

namespace {

// Waiting for a capturing stream is invalid (CUDA Programming Guide, "Prohibited and Unhandled
// Operations": "It is invalid to synchronize or query the execution status of a stream which is
// being captured"); the capture is invalidated.
cudaError_t can_wait_for(sim::stream_state& s, char const* call) {
  if (s.capture != nullptr) {
    sim::invalidate(*s.capture, cudaErrorStreamCaptureUnsupported, call);
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  }
  // The legacy stream waits for every blocking stream: a capturing one cannot be waited for.
  if (cudaError_t const implicit = sim::check_legacy_use(s, call); implicit != cudaSuccess) {
    return sim::fail(implicit);
  }
  return cudaSuccess;
}

// A wait or a query from the host is a "potentially unsafe" call for the capture modes
// (cudaThreadExchangeStreamCaptureMode): the documentation does not list the calls, and this is
// the stricter reading.
cudaError_t wait_for(sim::stream_state& s, char const* call) {
  if (cudaError_t const unsafe = sim::check_unsafe_call(call); unsafe != cudaSuccess) {
    return sim::fail(unsafe);
  }
  cudaError_t const waited = can_wait_for(s, call);
  if (waited != cudaSuccess) return waited;
  sim::host_waits_for(s.clock);  // runs queued work until the stream's is done
  sim::release_orphaned_events();
  sim::release_pool_memory(s.device);
  if (cudaError_t const sticky = sim::sticky_error(); sticky != cudaSuccess)
    return sim::fail(sticky);
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  return wait_for(*s, __func__);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  // "cudaErrorNotReady if not" all operations in the stream have completed (cudaStreamQuery).
  if (s->capture == nullptr && !sim::complete(s->clock)) {
    if (cudaError_t const unsafe = sim::check_unsafe_call(__func__); unsafe != cudaSuccess) {
      return sim::fail(unsafe);
    }
    sim::answered_not_ready();
    return cudaErrorNotReady;
  }
  return wait_for(*s, __func__);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t function, void* data) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (function == nullptr) return sim::fail(cudaErrorInvalidValue);
  auto node = std::make_unique<sim::node_state>();
  node->type = cudaGraphNodeTypeHost;
  node->host_function = function;
  node->host_data = data;
  return sim::submit(*s, std::move(node));
}

// "Adds a callback to be called on the host after all currently enqueued items in the stream have
// completed ... The callback will block later work in the stream until it is finished. The
// callback may be passed cudaSuccess or an error code. In the event of a device error, all
// subsequently executed callbacks will receive an appropriate cudaError_t ... flags - Reserved for
// future use, must be 0" (cudaStreamAddCallback). It runs as a host function does (no CUDA calls:
// cudaErrorNotPermitted), and after a device error too, with that error. "This function is not
// supported with cudaStreamBeginCapture and cudaStreamEndCapture, unlike cudaLaunchHostFunc": in
// a capture it is cudaErrorStreamCaptureUnsupported ("The operation is not permitted when the
// stream is capturing", driver_types.h) and the capture is invalidated, as for other operations a
// capture cannot hold (an open question for a GPU run, which may answer cudaErrorNotSupported,
// the code the function lists).
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* data,
                                  unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (callback == nullptr || flags != 0U) return sim::fail(cudaErrorInvalidValue);
  if (s->capture != nullptr) {
    sim::invalidate(*s->capture, cudaErrorStreamCaptureUnsupported, __func__);
    return sim::fail(cudaErrorStreamCaptureUnsupported);
  }
  auto node = std::make_unique<sim::node_state>();
  node->type = cudaGraphNodeTypeHost;
  node->stream_callback = callback;
  node->callback_stream = stream;
  node->host_data = data;
  return sim::submit(*s, std::move(node), "stream callback");
}

// "Query the Id of a stream ... The Id is unique for the life of the program"; the NULL stream,
// cudaStreamLegacy and cudaStreamPerThread are accepted (cudaStreamGetId). "Passing an invalid
// handle will result in undefined behavior": here cudaErrorInvalidResourceHandle.
cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long* id) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (id == nullptr) return sim::fail(cudaErrorInvalidValue);
  *id = s->id;
  return cudaSuccess;
}

// --- events ------------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  unsigned const known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~known) != 0U) return sim::fail(cudaErrorInvalidValue);
  // cudaEventInterprocess requires cudaEventDisableTiming (cudaEventCreateWithFlags).
  if ((flags & cudaEventInterprocess) != 0U && (flags & cudaEventDisableTiming) == 0U) {
    return sim::fail(cudaErrorInvalidValue);
  }
  auto created = std::make_unique<sim::event_state>();
  created->flags = flags;
  created->device = sim::this_thread().device;
  *event = reinterpret_cast<cudaEvent_t>(created.get());
  sim::state().events.insert(created.release());
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  sim::lock_guard const lock{sim::state().mutex};
  if (sim::this_thread().in_host_function) return sim::fail(cudaErrorNotPermitted);
  sim::event_state* e = sim::find_event(event);
  if (e == nullptr) return sim::fail(cudaErrorInvalidResourceHandle);
  // A record still queued completes first ("resources ... will be released automatically once
  // the device has completed event", cudaEventDestroy).
  sim::state().events.erase(e);
  // A record behind a collective still waiting for its peers keeps the event until the end of
  // the process: the handle is gone, as on a GPU, and the queued record still has its target.
  // So does an event that event record or wait nodes name (cudaEventRecordWithFlags and
  // cudaStreamWaitEvent with the external flags, cudaGraphAddEventRecordNode and
  // cudaGraphAddEventWaitNode): a later launch records or waits for it, and never reads freed
  // memory.
  if (sim::named_by_a_graph(e)) {
    sim::state().orphaned_events.push_back(e);  // freed when no graph names it any more
  } else if (sim::run_without_waiting(e->clock)) {
    delete e;
  }
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::event_state* e = sim::find_event(event);
  if (e == nullptr) return sim::fail(cudaErrorInvalidResourceHandle);
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (e->device != s->device) return sim::fail(cudaErrorInvalidResourceHandle);
  if (sim::capture_state* capture = s->capture; capture != nullptr) {
    if (capture->invalidated_by != cudaSuccess) {
      return sim::fail(cudaErrorStreamCaptureInvalidated);
    }
    // In a capture an event records the stream's current set of nodes: a later wait on it forks
    // or joins (CUDA Programming Guide, "Cross-stream Dependencies and Events").
    e->captured = true;
    e->capture = capture;
    e->capture_nodes = s->capture_dependencies;
    return cudaSuccess;
  }
  auto node = std::make_unique<sim::node_state>();
  node->type = cudaGraphNodeTypeEventRecord;
  node->event = e;
  if (cudaError_t const submitted = sim::submit(*s, std::move(node)); submitted != cudaSuccess) {
    return submitted;
  }
  // "Captures in event the contents of stream at the time of this call" (cudaEventRecord): from
  // this call on the event is an ordinary one, whenever the record itself runs.
  e->captured = false;
  e->capture = nullptr;
  e->capture_nodes.clear();
  e->clock = s->clock;
  return cudaSuccess;
}

// cudaEventRecordExternal: "Event is captured in the graph as an external event node when
// performing stream capture" (cudaEventRecordWithFlags); outside a capture the flag is invalid
// (CU_EVENT_RECORD_EXTERNAL, cuda.h), as cudaEventWaitExternal is for a wait.
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if (flags == cudaEventRecordDefault) return cudaEventRecord(event, stream);
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (flags != cudaEventRecordExternal) return sim::fail(cudaErrorInvalidValue);
  sim::event_state* e = sim::find_event(event);
  if (e == nullptr) return sim::fail(cudaErrorInvalidResourceHandle);
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if (e->device != s->device) return sim::fail(cudaErrorInvalidResourceHandle);
  if (s->capture == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (s->capture->invalidated_by != cudaSuccess) {
    return sim::fail(cudaErrorStreamCaptureInvalidated);
  }
  // A node of the graph: every launch records the event; the event itself stays an ordinary
  // one, not a capture's.
  auto node = std::make_unique<sim::node_state>();
  node->type = cudaGraphNodeTypeEventRecord;
  node->event = e;
  return sim::submit(*s, std::move(node));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::event_state* e = sim::find_event(event);
  if (e == nullptr) return sim::fail(cudaErrorInvalidResourceHandle);
  cudaError_t error = cudaSuccess;
  sim::stream_state* s = stream_or_fail(stream, error);
  if (s == nullptr) return error;
  if ((flags & ~static_cast<unsigned>(cudaEventWaitExternal)) != 0U) {
    return sim::fail(cudaErrorInvalidValue);
  }
  if (s->legacy) {
    // A wait is a use of the legacy stream, which "is in an unusable state" beside a capturing
    // blocking stream (cudaStreamIsCapturing); nor can it join a capture, since capture "may not
    // be initiated if stream is cudaStreamLegacy" (cudaStreamBeginCapture): either is
    // cudaErrorStreamCaptureImplicit and invalidates the capture, the stricter reading
    // (docs/validation.md asks a GPU).
    bool implicit = false;
    for (sim::capture_state* capture : sim::state().captures) {
      bool const joined = e->captured && e->capture == capture;
      bool const beside = capture->device == s->device &&
                          std::any_of(capture->streams.begin(), capture->streams.end(),
                                      [](sim::stream_state const* m) { return m->blocking(); });
      if (joined || beside) {
        sim::invalidate(*capture, cudaErrorStreamCaptureImplicit, __func__);
        implicit = true;
      }
    }
    if (implicit) return sim::fail(cudaErrorStreamCaptureImplicit);
  }
  if (e->captured) {
    sim::capture_state* capture = e->capture;
    if (capture == nullptr) return sim::fail(cudaErrorCapturedEvent);  // its capture has ended
    if (capture->invalidated_by != cudaSuccess) {
      return sim::fail(cudaErrorStreamCaptureInvalidated);
    }
    if (s->capture == nullptr) {
      // A fork: the stream joins the capture, depending on the event's nodes.
      s->capture = capture;
      s->capture_dependencies = e->capture_nodes;
      capture->streams.insert(s);
      return cudaSuccess;
    }
    if (s->capture != capture) {
      sim::invalidate(*s->capture, cudaErrorStreamCaptureMerge, __func__);
      return sim::fail(cudaErrorStreamCaptureMerge);
    }
    for (sim::node_state* node : e->capture_nodes) {
      auto& deps = s->capture_dependencies;
      if (std::find(deps.begin(), deps.end(), node) == deps.end()) deps.push_back(node);
    }
    return cudaSuccess;
  }
  if (s->capture != nullptr) {
    if (s->capture->invalidated_by != cudaSuccess) {
      return sim::fail(cudaErrorStreamCaptureInvalidated);
    }
    if ((flags & cudaEventWaitExternal) != 0U) {
      auto node = std::make_unique<sim::node_state>();
      node->type = cudaGraphNodeTypeWaitEvent;
      node->event = e;
      return sim::submit(*s, std::move(node));
    }
    // "It is invalid to wait on a non-captured event from a stream which is being captured
    // without specifying the cudaEventWaitExternal flag" (CUDA Programming Guide, "Prohibited
    // and Unhandled Operations"); cudaErrorStreamCaptureIsolation in driver_types.h.
    sim::invalidate(*s->capture, cudaErrorStreamCaptureIsolation, __func__);
    return sim::fail(cudaErrorStreamCaptureIsolation);
  }
  if ((flags & cudaEventWaitExternal) != 0U) {
    return sim::fail(cudaErrorInvalidValue);  // "invalid outside of stream capture"
  }
  sim::merge(s->clock, e->clock);  // the stream's later work follows the event's
  return cudaSuccess;
}

namespace {

// What cudaEventQuery and cudaEventSynchronize check first: the event, a capture that recorded
// it, and the capture modes ("potentially unsafe" as a stream wait is, see wait_for).
sim::event_state* event_to_wait_for(cudaEvent_t event, cudaError_t& error, char const* call) {
  error = enter();
  if (error != cudaSuccess) return nullptr;
  sim::event_state* e = sim::find_event(event);
  if (e == nullptr) {
    error = cudaErrorInvalidResourceHandle;
  } else if (e->captured && e->capture != nullptr) {
    // As an H100 with CUDA 13.0 answers (docs/validation.md): the first query or sync of an
    // event recorded in a live capture gives cudaErrorCapturedEvent and invalidates the capture,
    // in every capture mode; once that capture is invalidated, the event is an invalid value.
    if (e->capture->invalidated_by != cudaSuccess) {
      error = cudaErrorInvalidValue;
    } else {
      sim::invalidate(*e->capture, cudaErrorCapturedEvent, call);
      error = cudaErrorCapturedEvent;
    }
  } else if (e->captured) {
    error = cudaErrorCapturedEvent;
  } else {
    error = sim::check_unsafe_call(call);
  }
  if (error == cudaSuccess) return e;
  error = sim::fail(error);
  return nullptr;
}

}  // namespace

cudaError_t cudaEventQuery(cudaEvent_t event) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t error = cudaSuccess;
  sim::event_state* e = event_to_wait_for(event, error, __func__);
  if (e == nullptr) return error;
  // cudaErrorNotReady "if all captured work has not yet been completed" (cudaEventQuery).
  if (!sim::complete(e->clock)) {
    sim::answered_not_ready();
    return cudaErrorNotReady;
  }
  sim::host_waits_for(e->clock);  // complete: the host has seen the event's work
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  sim::lock_guard const lock{sim::state().mutex};
  cudaError_t error = cudaSuccess;
  sim::event_state* e = event_to_wait_for(event, error, __func__);
  if (e == nullptr) return error;
  sim::host_waits_for(e->clock);  // runs queued work until the event's is done
  sim::release_pool_memory(e->device);
  return sim::sticky_error() == cudaSuccess ? cudaSuccess : sim::fail(sim::sticky_error());
}

cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (milliseconds == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::event_state* a = sim::find_event(start);
  sim::event_state* b = sim::find_event(end);
  if (a == nullptr || b == nullptr) return sim::fail(cudaErrorInvalidResourceHandle);
  if (a->captured || b->captured) return sim::fail(cudaErrorCapturedEvent);
  // cudaEventElapsedTime: events created with cudaEventDisableTiming, or never recorded, give
  // cudaErrorInvalidResourceHandle.
  if (((a->flags | b->flags) & cudaEventDisableTiming) != 0U) {
    return sim::fail(cudaErrorInvalidResourceHandle);
  }
  // Recorded but not yet complete: "cudaErrorNotReady" (cudaEventElapsedTime).
  if (!sim::complete(a->clock) || !sim::complete(b->clock)) {
    sim::answered_not_ready();
    return sim::fail(cudaErrorNotReady);
  }
  if (!a->recorded || !b->recorded) return sim::fail(cudaErrorInvalidResourceHandle);
  *milliseconds = static_cast<float>(b->milliseconds - a->milliseconds);
  return cudaSuccess;
}

// --- kernel launches ---------------------------------------------------------------------------

// "Returns in **name the function name associated with the symbol func ... If func is not a
// device entry function, then it is assumed to be a cudaKernel_t" (cudaFuncGetName). Here the
// name is the one written at the launch, and a function is known once it has been launched:
// any other is refused (cudaErrorInvalidDeviceFunction) rather than read as a cudaKernel_t.
cudaError_t cudaFuncGetName(char const** name, void const* func) {
  sim::lock_guard const lock{sim::state().mutex};
  if (name == nullptr) return sim::fail(cudaErrorInvalidValue);
  auto const found = sim::state().functions.find(func);
  if (found == sim::state().functions.end()) return sim::fail(cudaErrorInvalidDeviceFunction);
  *name = found->second.name.c_str();
  return cudaSuccess;
}

// cudaGetKernel: "Returns in kernelPtr the device kernel corresponding to the entry function
// entryFuncAddr"; cudaGetFuncBySymbol: "Returns in functionPtr the device entry function
// corresponding to the symbol symbolPtr". Here each handle is the entry function's address, so a
// cudaKernel_t works wherever the runtime takes one in place of the entry function ("If func is
// not a device entry function, then it is assumed to be a cudaKernel_t", cudaFuncGetName), and
// both calls agree with __cudaGetKernel. The headers list only cudaSuccess: a null result is
// cudaErrorInvalidValue and a null function cudaErrorInvalidDeviceFunction (the stricter
// reading); any other pointer is taken for a kernel, as cudaFuncSetAttribute takes one, since a
// kernel is known here only from its first launch. No driver call takes a CUfunction here.
cudaError_t cudaGetKernel(cudaKernel_t* kernelPtr, void const* entryFuncAddr) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (kernelPtr == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (entryFuncAddr == nullptr) return sim::fail(cudaErrorInvalidDeviceFunction);
  *kernelPtr = reinterpret_cast<cudaKernel_t>(const_cast<void*>(entryFuncAddr));
  return cudaSuccess;
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t* functionPtr, void const* symbolPtr) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (functionPtr == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (symbolPtr == nullptr) return sim::fail(cudaErrorInvalidDeviceFunction);
  *functionPtr = reinterpret_cast<cudaFunction_t>(const_cast<void*>(symbolPtr));
  return cudaSuccess;
}

// "paramIndex must be less than the number of parameters that func takes"; past the last one
// the call answers cudaErrorInvalidValue (cudaFuncGetParamInfo).
cudaError_t cudaFuncGetParamInfo(void const* func, std::size_t index, std::size_t* offset,
                                 std::size_t* size) {
  sim::lock_guard const lock{sim::state().mutex};
  if (offset == nullptr || size == nullptr) return sim::fail(cudaErrorInvalidValue);
  auto const found = sim::state().functions.find(func);
  if (found == sim::state().functions.end()) return sim::fail(cudaErrorInvalidDeviceFunction);
  if (index >= found->second.parameters.size()) return sim::fail(cudaErrorInvalidValue);
  *offset = found->second.parameters[index].offset;
  *size = found->second.parameters[index].size;
  return cudaSuccess;
}

// cudaFuncSetCacheConfig: "the preferred cache configuration for the function specified via
// func"; a kernel as cudaFuncSetAttribute takes one (a null pointer is
// cudaErrorInvalidDeviceFunction, "If the specified function does not exist"), a value no
// enumerator names cudaErrorInvalidValue. Kept with the function's settings; the L1 cache is not
// modelled.
cudaError_t cudaFuncSetCacheConfig(void const* func, cudaFuncCache cacheConfig) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (func == nullptr) return sim::fail(cudaErrorInvalidDeviceFunction);
  if (!sim::cache_config_valid(cacheConfig)) return sim::fail(cudaErrorInvalidValue);
  sim::state().settings_by_function[func].cache_config = cacheConfig;
  return cudaSuccess;
}

// cudaFuncSetSharedMemConfig (deprecated): the bank size of compute capability 9.0 is fixed, so
// a valid configuration changes nothing (cudaDeviceSetSharedMemConfig: "This function will do
// nothing on devices with fixed shared memory bank size"); errors as cudaFuncSetCacheConfig's.
cudaError_t cudaFuncSetSharedMemConfig(void const* func, cudaSharedMemConfig config) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (func == nullptr) return sim::fail(cudaErrorInvalidDeviceFunction);
  return sim::shared_mem_config_valid(config) ? cudaSuccess : sim::fail(cudaErrorInvalidValue);
}

// cudaFuncSetAttribute: "If the specified attribute cannot be written, or if the value is
// incorrect, then cudaErrorInvalidValue is returned." A GPU knows every kernel of a loaded module
// and takes any other pointer for a cudaKernel_t; here a kernel is known only once launched, so
// any non-null pointer is taken for a kernel (a NULL one is cudaErrorInvalidDeviceFunction) and
// the setting applies to its launches from then on. The C++ template form in cuda_runtime.h
// casts the kernel to const void* and calls this.
cudaError_t cudaFuncSetAttribute(void const* func, cudaFuncAttribute attribute, int value) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (func == nullptr) return sim::fail(cudaErrorInvalidDeviceFunction);
  cudaDeviceProp const& p =
      sim::state().devices[static_cast<std::size_t>(sim::this_thread().device)]->properties;
  sim::function_settings& settings = sim::state().settings_by_function[func];
  switch (attribute) {
    // "The sum of this value and the function attribute sharedSizeBytes cannot exceed the device
    // attribute cudaDevAttrMaxSharedMemoryPerBlockOptin" (static shared memory is not known
    // here: counted as 0).
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
      if (value < 0 || static_cast<std::size_t>(value) > p.sharedMemPerBlockOptin) {
        return sim::fail(cudaErrorInvalidValue);
      }
      settings.max_dynamic_shared_bytes = value;
      return cudaSuccess;
    // A percentage of the shared memory, or cudaSharedmemCarveoutDefault (-1); only a hint.
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      if (value < cudaSharedmemCarveoutDefault || value > cudaSharedmemCarveoutMaxShared) {
        return sim::fail(cudaErrorInvalidValue);
      }
      settings.preferred_carveout = value;
      return cudaSuccess;
    // "1 is allowed, 0 is disallowed."
    case cudaFuncAttributeNonPortableClusterSizeAllowed:
      if (value != 0 && value != 1) return sim::fail(cudaErrorInvalidValue);
      settings.non_portable_cluster_size_allowed = value;
      return cudaSuccess;
    // "The value type is cudaClusterSchedulingPolicy."
    case cudaFuncAttributeClusterSchedulingPolicyPreference:
      if (value < cudaClusterSchedulingPolicyDefault ||
          value > cudaClusterSchedulingPolicyLoadBalancing) {
        return sim::fail(cudaErrorInvalidValue);
      }
      settings.cluster_scheduling_policy = value;
      return cudaSuccess;
    // Thread block clusters are not modelled: a required cluster size (which changes how the
    // grid launches) is refused rather than ignored; 0, "no cluster", is accepted.
    case cudaFuncAttributeRequiredClusterWidth:
    case cudaFuncAttributeRequiredClusterHeight:
    case cudaFuncAttributeRequiredClusterDepth:
      if (value < 0) return sim::fail(cudaErrorInvalidValue);
      if (value == 0) return cudaSuccess;
      static_cast<void>(std::fprintf(stderr,
                                     "graphstep simulator: cudaFuncSetAttribute: thread block "
                                     "clusters are not modelled\n"));
      return sim::fail(cudaErrorNotSupported);
    default: return sim::fail(cudaErrorInvalidValue);  // read-only or unknown
  }
}

// cudaFuncGetAttributes: what the simulator knows of a kernel. Registers, local and constant
// memory, and static shared memory are not known (0), the thread limit is the device's (no
// __launch_bounds__ is read), the versions are the device's compute capability; the settable
// attributes are what cudaFuncSetAttribute set.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, void const* func) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (attributes == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (func == nullptr) return sim::fail(cudaErrorInvalidDeviceFunction);
  cudaDeviceProp const& p =
      sim::state().devices[static_cast<std::size_t>(sim::this_thread().device)]->properties;
  sim::function_settings settings;
  if (auto found = sim::state().settings_by_function.find(func);
      found != sim::state().settings_by_function.end()) {
    settings = found->second;
  }
  *attributes = cudaFuncAttributes{};
  attributes->maxThreadsPerBlock = p.maxThreadsPerBlock;
  attributes->ptxVersion = p.major * 10 + p.minor;
  attributes->binaryVersion = p.major * 10 + p.minor;
  attributes->maxDynamicSharedSizeBytes = settings.max_dynamic_shared_bytes >= 0
                                              ? settings.max_dynamic_shared_bytes
                                              : static_cast<int>(p.sharedMemPerBlock);
  attributes->preferredShmemCarveout = settings.preferred_carveout;
  attributes->nonPortableClusterSizeAllowed = settings.non_portable_cluster_size_allowed;
  attributes->clusterSchedulingPolicyPreference = settings.cluster_scheduling_policy;
  return cudaSuccess;
}

// --- occupancy ----------------------------------------------------------------------------------
// The occupancy calculator follows cuda_occupancy.h, CUDA's reference calculator, with the
// kernel's attributes as cudaFuncGetAttributes gives them here: no registers (unknown on the
// simulated device, so the register limit is left out and every result is an upper bound of a
// GPU's), static shared memory 0, and the dynamic shared memory limit cudaFuncSetAttribute set.
// The carveout preference is a hint and is left out too (it can only lower a GPU's count).

namespace {

// cudaOccSMemAllocationGranularity: 128 bytes from compute capability 8 to 12.
constexpr std::size_t shared_allocation_granularity = 128;

struct occupancy_inputs {
  cudaDeviceProp const* device{};
  std::size_t static_shared{};  // cudaFuncAttributes::sharedSizeBytes: 0 here
  std::size_t max_dynamic{};    // cudaFuncAttributes::maxDynamicSharedSizeBytes
  bool dynamic_limit_set{};     // cudaFuncAttributeMaxDynamicSharedMemorySize was set
};

occupancy_inputs occupancy_of(void const* func) {
  occupancy_inputs in;
  in.device =
      &sim::state().devices[static_cast<std::size_t>(sim::this_thread().device)]->properties;
  in.max_dynamic = in.device->sharedMemPerBlock;
  if (auto found = sim::state().settings_by_function.find(func);
      found != sim::state().settings_by_function.end() &&
      found->second.max_dynamic_shared_bytes >= 0) {
    in.max_dynamic = static_cast<std::size_t>(found->second.max_dynamic_shared_bytes);
    in.dynamic_limit_set = true;
  }
  return in;
}

std::size_t round_up(std::size_t bytes, std::size_t granularity) {
  return (bytes + granularity - 1) / granularity * granularity;
}

// cudaOccMaxActiveBlocksPerMultiprocessor without its register limit: the least of the warp
// limit (none past the block's thread limit), the device's blocks per SM, and the shared memory
// limit (none when the block's shared memory exceeds what one block may have: cudaOccSMemPerBlock
// adds the reserved shared memory to sharedMemPerBlock, or to the opt-in limit once the kernel's
// dynamic limit was raised past it).
int active_blocks(occupancy_inputs const& in, int block_size, std::size_t dynamic_shared) {
  cudaDeviceProp const& p = *in.device;
  if (block_size > p.maxThreadsPerBlock) return 0;
  int const warps_per_block = (block_size + p.warpSize - 1) / p.warpSize;
  int const by_warps = p.maxThreadsPerMultiProcessor / p.warpSize / warps_per_block;
  std::size_t const static_shared = in.static_shared + p.reservedSharedMemPerBlock;
  if (dynamic_shared > SIZE_MAX / 2) return 0;
  std::size_t const allocated =
      round_up(static_shared + dynamic_shared, shared_allocation_granularity);
  std::size_t const most = static_shared + in.max_dynamic;
  std::size_t const per_block_limit =
      (in.dynamic_limit_set && most > p.sharedMemPerBlock ? p.sharedMemPerBlockOptin
                                                          : p.sharedMemPerBlock) +
      p.reservedSharedMemPerBlock;
  if ((in.dynamic_limit_set && dynamic_shared > in.max_dynamic) || allocated > per_block_limit) {
    return 0;
  }
  auto const by_shared = static_cast<int>(p.sharedMemPerMultiprocessor / allocated);
  return std::min({by_warps, p.maxBlocksPerMultiProcessor, by_shared});
}

cudaError_t max_active_blocks(int* blocks, void const* func, int block_size,
                              std::size_t dynamic_shared, unsigned int flags) {
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (blocks == nullptr || block_size <= 0) return sim::fail(cudaErrorInvalidValue);
  if (func == nullptr) return sim::fail(cudaErrorInvalidDeviceFunction);
  if (flags != cudaOccupancyDefault && flags != cudaOccupancyDisableCachingOverride) {
    return sim::fail(cudaErrorInvalidValue);
  }
  *blocks = active_blocks(occupancy_of(func), block_size, dynamic_shared);
  return cudaSuccess;
}

}  // namespace

// "Returns in *numBlocks the maximum number of active blocks per streaming multiprocessor for
// the device function" (cudaOccupancyMaxActiveBlocksPerMultiprocessor). A block size of 0 or
// less is cudaErrorInvalidValue (the calculator's invalid input); one past the thread limit, or
// more dynamic shared memory than a block may have, gives 0 blocks, as the calculator does.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, void const* func,
                                                          int blockSize,
                                                          std::size_t dynamicSMemSize) {
  sim::lock_guard const lock{sim::state().mutex};
  return max_active_blocks(numBlocks, func, blockSize, dynamicSMemSize, cudaOccupancyDefault);
}

// cudaOccupancyDisableCachingOverride concerns "platform where global caching affects
// occupancy", which the simulated device is not: it changes nothing. Other flags are
// cudaErrorInvalidValue.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, void const* func,
                                                                   int blockSize,
                                                                   std::size_t dynamicSMemSize,
                                                                   unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  return max_active_blocks(numBlocks, func, blockSize, dynamicSMemSize, flags);
}

// "Returns in *dynamicSmemSize the maximum size of dynamic shared memory to allow numBlocks
// blocks per SM" (cudaOccupancyAvailableDynamicSMemPerBlock). As
// cudaOccAvailableDynamicSMemPerBlock computes it: numBlocks of 0 or less, or more blocks than fit
// with no dynamic shared memory, is cudaErrorInvalidValue; else the SM's shared memory split
// numBlocks ways, rounded down to the allocation granularity, at most what one block may have, less
// the static shared memory, at most the kernel's dynamic limit. Unlike the calculator, the shared
// memory reserved per block is subtracted as well, so that numBlocks blocks of that size do fit
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor agrees); sim/docs/simulator.md asks a GPU.
cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(std::size_t* dynamicSmemSize,
                                                      void const* func, int numBlocks,
                                                      int blockSize) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (dynamicSmemSize == nullptr || numBlocks <= 0 || blockSize <= 0) {
    return sim::fail(cudaErrorInvalidValue);
  }
  if (func == nullptr) return sim::fail(cudaErrorInvalidDeviceFunction);
  occupancy_inputs const in = occupancy_of(func);
  if (active_blocks(in, blockSize, 0) < numBlocks) return sim::fail(cudaErrorInvalidValue);
  cudaDeviceProp const& p = *in.device;
  std::size_t const per_block_limit =
      (in.dynamic_limit_set ? p.sharedMemPerBlockOptin : p.sharedMemPerBlock) +
      p.reservedSharedMemPerBlock;
  std::size_t share = p.sharedMemPerMultiprocessor / static_cast<std::size_t>(numBlocks);
  share = share / shared_allocation_granularity * shared_allocation_granularity;
  share = std::min(share, per_block_limit);
  std::size_t const taken = in.static_shared + p.reservedSharedMemPerBlock;
  std::size_t const available = share > taken ? share - taken : 0;
  *dynamicSmemSize = std::min(available, in.max_dynamic);
  return cudaSuccess;
}

// --- launches of a kernel named by its address ---------------------------------------------------

namespace {

// What cudaLaunchKernelExC's attributes ask of a launch, as far as the simulator honours them.
struct launch_request {
  bool cooperative{};
  int priority{};  // the kernel node's, read back from a captured launch
};

// `id` as the caller stored it (read_launch_attributes); nullptr where no enumerator names it.
char const* launch_attribute_name(std::underlying_type_t<cudaLaunchAttributeID> id) {
  switch (id) {
    case cudaLaunchAttributeAccessPolicyWindow: return "cudaLaunchAttributeAccessPolicyWindow";
    case cudaLaunchAttributeSynchronizationPolicy:
      return "cudaLaunchAttributeSynchronizationPolicy";
    case cudaLaunchAttributeClusterDimension: return "cudaLaunchAttributeClusterDimension";
    case cudaLaunchAttributeClusterSchedulingPolicyPreference:
      return "cudaLaunchAttributeClusterSchedulingPolicyPreference";
    case cudaLaunchAttributeProgrammaticEvent: return "cudaLaunchAttributeProgrammaticEvent";
    case cudaLaunchAttributeMemSyncDomainMap: return "cudaLaunchAttributeMemSyncDomainMap";
    case cudaLaunchAttributeMemSyncDomain: return "cudaLaunchAttributeMemSyncDomain";
    case cudaLaunchAttributePreferredClusterDimension:
      return "cudaLaunchAttributePreferredClusterDimension";
    case cudaLaunchAttributeLaunchCompletionEvent:
      return "cudaLaunchAttributeLaunchCompletionEvent";
    case cudaLaunchAttributeDeviceUpdatableKernelNode:
      return "cudaLaunchAttributeDeviceUpdatableKernelNode";
    case cudaLaunchAttributePreferredSharedMemoryCarveout:
      return "cudaLaunchAttributePreferredSharedMemoryCarveout";
    case cudaLaunchAttributeNvlinkUtilCentricScheduling:
      return "cudaLaunchAttributeNvlinkUtilCentricScheduling";
    default: return nullptr;
  }
}

// The attributes of a cudaLaunchConfig_t. Honoured: cudaLaunchAttributeIgnore ("Ignored entry,
// for convenient composition"), cudaLaunchAttributeCooperative (as cudaLaunchCooperativeKernel),
// cudaLaunchAttributePriority (one operation runs at a time here, so a priority changes no order;
// one outside cudaDeviceGetStreamPriorityRange is cudaErrorInvalidValue, as when set on a stream
// or a kernel node: the header does not say, the stricter reading) and
// cudaLaunchAttributeProgrammaticStreamSerialization (it lets "the grid's execution ... overlap
// with the previous kernel", driver_types.h: never overlapping is one of the allowed executions).
// Any other attribute changes what a launch does in a way not modelled: cudaErrorNotSupported,
// named on stderr; an identifier no enumerator names is cudaErrorInvalidValue.
cudaError_t read_launch_attributes(cudaLaunchConfig_t const& config, launch_request& request) {
  if (config.numAttrs != 0 && config.attrs == nullptr) return cudaErrorInvalidValue;
  for (unsigned i = 0; i < config.numAttrs; ++i) {
    cudaLaunchAttribute const& attribute = config.attrs[i];
    // The identifier is read as the integer the caller stored: a value no enumerator names is
    // the caller's to pass, and loading it as the enumeration would be undefined behaviour here.
    std::underlying_type_t<cudaLaunchAttributeID> raw_id{};
    std::memcpy(&raw_id, &attribute.id, sizeof raw_id);
    switch (raw_id) {
      case cudaLaunchAttributeIgnore:
      case cudaLaunchAttributeProgrammaticStreamSerialization: break;
      case cudaLaunchAttributePriority:
        if (attribute.val.priority < greatest_priority || attribute.val.priority > least_priority) {
          return cudaErrorInvalidValue;
        }
        request.priority = attribute.val.priority;
        break;
      case cudaLaunchAttributeCooperative:
        request.cooperative = request.cooperative || attribute.val.cooperative != 0;
        break;
      default: {
        char const* name = launch_attribute_name(raw_id);
        if (name == nullptr) return cudaErrorInvalidValue;
        static_cast<void>(std::fprintf(
            stderr,
            "graphstep simulated device: cudaLaunchKernelExC: launch attribute %s is not "
            "modelled\n",
            name));
        return cudaErrorNotSupported;
      }
    }
  }
  return cudaSuccess;
}

// A launch of `func`, known from its first <<<...>>> launch (kernel_task_of), with arguments
// copied from `args`, in stream order on `stream`. A cooperative launch's grid must be
// co-resident: "The total number of blocks launched cannot exceed the maximum number of blocks per
// multiprocessor as returned by cudaOccupancyMaxActiveBlocksPerMultiprocessor ... times the number
// of multiprocessors" (cudaLaunchCooperativeKernel), else cudaErrorCooperativeLaunchTooLarge.
cudaError_t launch_by_address(void const* func, dim3 grid, dim3 block, void** args,
                              std::size_t shared_bytes, cudaStream_t stream,
                              launch_request const& request, char const* caller) {
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  sim::stream_state const* s = sim::find_stream(stream);
  if (s == nullptr) return sim::fail(cudaErrorInvalidResourceHandle);
  if (shared_bytes > UINT_MAX) return sim::fail(cudaErrorInvalidValue);
  std::shared_ptr<graphstep::sim::kernel_task const> task;
  if (cudaError_t const error =
          sim::kernel_task_of(func, args, nullptr, grid, block, static_cast<unsigned>(shared_bytes),
                              s->device, task, caller);
      error != cudaSuccess) {
    return sim::fail(error);
  }
  if (request.cooperative) {
    cudaDeviceProp const& p = sim::state().devices[static_cast<std::size_t>(s->device)]->properties;
    unsigned long long const blocks = static_cast<unsigned long long>(grid.x) * grid.y * grid.z;
    int const threads = static_cast<int>(block.x * block.y * block.z);
    unsigned long long const resident =
        static_cast<unsigned long long>(active_blocks(occupancy_of(func), threads, shared_bytes)) *
        static_cast<unsigned long long>(p.multiProcessorCount);
    if (p.cooperativeLaunch == 0) return sim::fail(cudaErrorNotSupported);
    if (blocks > resident) return sim::fail(cudaErrorCooperativeLaunchTooLarge);
  }
  return sim::launch_kernel(stream, std::move(task), request.priority);
}

}  // namespace

// cudaLaunchKernelExC: "Invokes the kernel func on config->gridDim ... grid of blocks", with
// config->blockDim threads, config->dynamicSmemBytes of dynamic shared memory, on config->stream,
// and the attributes read_launch_attributes honours. A null config is cudaErrorInvalidValue.
cudaError_t cudaLaunchKernelExC(cudaLaunchConfig_t const* config, void const* func, void** args) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  if (config == nullptr) return sim::fail(cudaErrorInvalidValue);
  launch_request request;
  if (cudaError_t const error = read_launch_attributes(*config, request); error != cudaSuccess) {
    return sim::fail(error);
  }
  return launch_by_address(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                           config->stream, request, "cudaLaunchKernelExC");
}

// cudaLaunchCooperativeKernel: a launch whose blocks are all resident at once (see
// launch_by_address). The blocks still run one after another here, so a grid-wide barrier
// (cooperative_groups::grid_group::sync) is a kernel fault rather than a hang.
cudaError_t cudaLaunchCooperativeKernel(void const* func, dim3 gridDim, dim3 blockDim, void** args,
                                        std::size_t sharedMem, cudaStream_t stream) {
  sim::lock_guard const lock{sim::state().mutex};
  return launch_by_address(func, gridDim, blockDim, args, sharedMem, stream,
                           launch_request{true, 0}, "cudaLaunchCooperativeKernel");
}

// --- profiler control (cuda_profiler_api.h): no profiling tool is attached; both return
// cudaSuccess ("If profiling is already enabled, then cudaProfilerStart() has no effect") and,
// like every runtime call, a sticky error first.
cudaError_t cudaProfilerStart() {
  sim::lock_guard const lock{sim::state().mutex};
  return enter();
}

cudaError_t cudaProfilerStop() {
  sim::lock_guard const lock{sim::state().mutex};
  return enter();
}

namespace graphstep::sim::detail {

namespace {

// A launch may use dynamic shared memory up to the kernel's
// cudaFuncAttributeMaxDynamicSharedMemorySize, by default the device's sharedMemPerBlock
// (48 KiB): more needs the attribute set first, as on a GPU.
std::size_t dynamic_shared_limit(device_state const& device, kernel_task const& task) {
  auto const found = state().settings_by_function.find(task.function());
  if (found == state().settings_by_function.end() || found->second.max_dynamic_shared_bytes < 0) {
    return device.properties.sharedMemPerBlock;
  }
  return static_cast<std::size_t>(found->second.max_dynamic_shared_bytes);
}

}  // namespace

bool launch_configuration_valid(device_state const& device, kernel_task const& task) {
  // Launch configuration limits. driver_types.h names cudaErrorInvalidConfiguration ("a kernel
  // launch is requesting resources that can never be satisfied by the current device"), but an
  // H100 with CUDA 13.0 answers cudaErrorInvalidValue for every such launch: too many threads,
  // an empty or too large grid, too much shared memory (docs/validation.md).
  cudaDeviceProp const& p = device.properties;
  dim3 const grid = task.grid();
  dim3 const block = task.block();
  unsigned long long const threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
  return grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && block.x >= 1 && block.y >= 1 &&
         block.z >= 1 && grid.x <= static_cast<unsigned>(p.maxGridSize[0]) &&
         grid.y <= static_cast<unsigned>(p.maxGridSize[1]) &&
         grid.z <= static_cast<unsigned>(p.maxGridSize[2]) &&
         block.x <= static_cast<unsigned>(p.maxThreadsDim[0]) &&
         block.y <= static_cast<unsigned>(p.maxThreadsDim[1]) &&
         block.z <= static_cast<unsigned>(p.maxThreadsDim[2]) &&
         threads <= static_cast<unsigned long long>(p.maxThreadsPerBlock) &&
         task.dynamic_shared_bytes() <= dynamic_shared_limit(device, task);
}

cudaError_t launch_kernel(cudaStream_t stream, std::shared_ptr<kernel_task const> task,
                          int priority) {
  if (cudaError_t const error = enter(); error != cudaSuccess) return error;
  stream_state* s = find_stream(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (!launch_configuration_valid(*state().devices[static_cast<std::size_t>(s->device)], *task)) {
    return fail(cudaErrorInvalidValue);
  }
  if (task->arguments_modelled()) {
    state().functions.try_emplace(task->function(),
                                  launched_function{task->name(), task->parameter_layout(), task});
  }
  if (s->capture == nullptr) state().devices[static_cast<std::size_t>(s->device)]->kernel_launched = true;
  auto node = std::make_unique<node_state>();
  node->type = cudaGraphNodeTypeKernel;
  node->kernel = std::move(task);
  node->priority = priority;
  static_cast<void>(submit(*s, std::move(node)));
  return cudaSuccess;
}

void enqueue_kernel(cudaStream_t stream, std::shared_ptr<kernel_task const> task) noexcept {
  lock_guard const lock{state().mutex};
  static_cast<void>(launch_kernel(stream, std::move(task)));
}

void set_conditional_from_device(unsigned long long handle, unsigned int value) {
  lock_guard const lock{state().mutex};
  auto it = state().conditionals.find(handle);
  if (it == state().conditionals.end()) {
    throw kernel_fault{cudaErrorLaunchFailure,
                       "cudaGraphSetConditional called with a handle no graph created"};
  }
  it->second->value = value;
}

}  // namespace graphstep::sim::detail
