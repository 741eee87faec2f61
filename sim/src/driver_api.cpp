// The driver entry points a program reaches through cudaGetDriverEntryPointByVersion, on the
// simulated device: error names, device attributes, and the virtual memory management calls
// (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, ...). They are never exported as
// symbols: a program gets them only as the runtime hands them out, as with a real driver.
//
// Virtual memory is modelled with the host's: a reservation is an inaccessible mapping; physical
// memory is a memory file; cuMemMap maps it into the reservation without access, and only
// cuMemSetAccess makes it readable and writable (cuMemMap in cuda.h: "the memory cannot be
// accessed until cuMemSetAccess is called"), so a missing cuMemSetAccess faults here as on a GPU.

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <string_view>
#include <vector>

#include "detail/guarded_memory.hpp"
#include "detail/runtime_state.hpp"

namespace sim = graphstep::sim::detail;

namespace {

constexpr std::size_t granularity = std::size_t{2} << 20;  // 2 MiB, as on current GPUs
constexpr std::size_t poison_limit = std::size_t{256} << 20;

struct physical_memory {
  int file{-1};
  std::size_t bytes{};
  int device{};
  std::size_t mappings{};  // live cuMemMap mappings of it
  bool released{};         // cuMemRelease was called: gone once the last mapping is
};

struct reservation {
  std::size_t bytes{};
};

// Handles, reservations and live mappings; guarded by the platform's lock.
std::map<CUmemGenericAllocationHandle, physical_memory>& physical() {
  static auto* const handles = new std::map<CUmemGenericAllocationHandle, physical_memory>;
  return *handles;
}
std::map<std::uintptr_t, reservation>& reservations() {
  static auto* const ranges = new std::map<std::uintptr_t, reservation>;
  return *ranges;
}
// The handle each live mapping maps, by its address.
std::map<std::uintptr_t, CUmemGenericAllocationHandle>& mapped_handles() {
  static auto* const handles = new std::map<std::uintptr_t, CUmemGenericAllocationHandle>;
  return *handles;
}
CUmemGenericAllocationHandle next_handle = 1;

// Gives the memory back to its device once it is released and no longer mapped.
void free_if_unused(std::map<CUmemGenericAllocationHandle, physical_memory>::iterator it) {
  if (!it->second.released || it->second.mappings > 0) return;
  close(it->second.file);
  sim::state().devices[static_cast<std::size_t>(it->second.device)]->used_bytes -= it->second.bytes;
  physical().erase(it);
}

bool aligned(std::size_t value) {
  return value % granularity == 0;
}

// Whether [address, address + bytes) lies inside one reservation.
bool reserved(std::uintptr_t address, std::size_t bytes) {
  auto const& ranges = reservations();
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return false;
  --it;
  return address + bytes <= it->first + it->second.bytes;
}

CUresult CUDAAPI get_error_name(CUresult error, char const** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    default: *name = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI get_error_string(CUresult error, char const** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
    case CUDA_ERROR_INVALID_DEVICE: *text = "invalid device ordinal"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *text = "operation not supported"; break;
    case CUDA_ERROR_INVALID_HANDLE: *text = "invalid resource handle"; break;
    default: *text = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI device_get(CUdevice* device, int ordinal) {
  sim::lock_guard const lock{sim::state().mutex};
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= sim::state().devices.size()) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI device_get_attribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  sim::lock_guard const lock{sim::state().mutex};
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || static_cast<std::size_t>(device) >= sim::state().devices.size()) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = 1; return CUDA_SUCCESS;
    default:
      // Same numbering as cudaDeviceAttr for the attributes both APIs have.
      return cudaDeviceGetAttribute(value, static_cast<cudaDeviceAttr>(attribute), device) ==
                     cudaSuccess
                 ? CUDA_SUCCESS
                 : CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI mem_get_allocation_granularity(std::size_t* out, CUmemAllocationProp const* prop,
                                                CUmemAllocationGranularity_flags /*option*/) {
  if (out == nullptr || prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = granularity;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI mem_address_reserve(CUdeviceptr* out, std::size_t bytes, std::size_t alignment,
                                     CUdeviceptr address, unsigned long long flags) {
  sim::lock_guard const lock{sim::state().mutex};
  // cuMemAddressReserve: size a multiple of the granularity, flags 0, alignment a power of two.
  if (out == nullptr || bytes == 0 || !aligned(bytes) || flags != 0ULL ||
      (alignment & (alignment == 0 ? 0 : alignment - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::size_t const align = alignment < granularity ? granularity : alignment;
  std::size_t const span = bytes + align;
  void* hint = address == 0 ? nullptr : reinterpret_cast<void*>(address);
  void* base = mmap(hint, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  auto const start = reinterpret_cast<std::uintptr_t>(base);
  std::uintptr_t const aligned_start = (start + align - 1) / align * align;
  // Give back the slack before and after the aligned range.
  if (aligned_start > start) munmap(base, aligned_start - start);
  std::size_t const tail = start + span - (aligned_start + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned_start + bytes), tail);
  reservations()[aligned_start] = reservation{bytes};
  *out = static_cast<CUdeviceptr>(aligned_start);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI mem_address_free(CUdeviceptr address, std::size_t bytes) {
  sim::lock_guard const lock{sim::state().mutex};
  auto it = reservations().find(static_cast<std::uintptr_t>(address));
  if (it == reservations().end() || it->second.bytes != bytes) return CUDA_ERROR_INVALID_VALUE;
  // "cuMemAddressFree: ... all mappings must be unmapped first" — a live mapping inside is an
  // error here rather than a silent leak.
  for (auto const& entry : sim::state().allocations) {
    if (entry.first >= address && entry.first < address + bytes) return CUDA_ERROR_INVALID_VALUE;
  }
  munmap(reinterpret_cast<void*>(address), bytes);
  reservations().erase(it);
  return CUDA_SUCCESS;
}

// Sizes the memory file that backs physical memory; 0 or the errno of the failure. A memory file
// is subject to the process's file-size limit (RLIMIT_FSIZE, `ulimit -f`), which a GPU never
// meets: past it ftruncate fails with EFBIG and raises SIGXFSZ (setrlimit(2), RLIMIT_FSIZE),
// which Linux sends to the calling thread and whose default action ends the process. The signal is
// blocked around the call and, when this call raised it, taken back, so that the failure is a
// return value; the mask is restored.
int size_memory_file(int file, std::size_t bytes) {
  sigset_t file_size_signal;
  sigemptyset(&file_size_signal);
  sigaddset(&file_size_signal, SIGXFSZ);
  sigset_t previous_mask;
  pthread_sigmask(SIG_BLOCK, &file_size_signal, &previous_mask);
  sigset_t pending;
  sigpending(&pending);
  bool const pending_before = sigismember(&pending, SIGXFSZ) == 1;
  int const failure = ftruncate(file, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (failure == EFBIG && !pending_before) {
    timespec const no_wait{};
    static_cast<void>(sigtimedwait(&file_size_signal, nullptr, &no_wait));
  }
  pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  return failure;
}

// Fills a new memory file with 0xFF bytes: fresh device memory holds garbage, never zeros (see
// cudaMalloc in runtime_api.cpp). Written through the file, not a mapping of it: the kernel then
// allocates the pages as it copies, where a mapping takes a page fault for each (half the time
// for 32 MiB). 0 or the errno of the failure.
int fill_memory_file(int file, std::size_t bytes) {
  static std::vector<unsigned char> const garbage(std::size_t{1} << 20, 0xFFU);
  std::size_t written = 0;
  while (written < bytes) {
    std::size_t const chunk = std::min(garbage.size(), bytes - written);
    ssize_t const done = pwrite(file, garbage.data(), chunk, static_cast<off_t>(written));
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) return errno;
    if (done == 0) return ENOSPC;
    written += static_cast<std::size_t>(done);
  }
  return 0;
}

// What a failed sizing or filling of the memory file means, on stderr: the driver has only a
// code for it. Called under the simulator's lock, so strerror's buffer is not shared.
void report_memory_file_failure(std::size_t bytes, char const* step, int failure) {
  rlimit limit{};
  if (failure == EFBIG && getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      bytes > limit.rlim_cur) {
    static_cast<void>(std::fprintf(
        stderr,
        "graphstep simulated device: cuMemCreate of %zu bytes: the process's file-size limit "
        "(ulimit -f) of %llu bytes stops the simulated device from growing its memory, which a "
        "memory file backs; raise it above the device memory the program uses (ulimit -f "
        "unlimited). The call returns CUDA_ERROR_OUT_OF_MEMORY\n",
        bytes, static_cast<unsigned long long>(limit.rlim_cur)));
    return;
  }
  static_cast<void>(std::fprintf(
      stderr,
      "graphstep simulated device: cuMemCreate of %zu bytes: %s the memory file that backs it "
      "failed: %s. The call returns CUDA_ERROR_OUT_OF_MEMORY\n",
      bytes, step, std::strerror(failure)));  // NOLINT(concurrency-mt-unsafe)
}

CUresult CUDAAPI mem_create(CUmemGenericAllocationHandle* handle, std::size_t bytes,
                            CUmemAllocationProp const* prop, unsigned long long flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (handle == nullptr || prop == nullptr || flags != 0ULL || bytes == 0 || !aligned(bytes) ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int const ordinal = prop->location.id;
  if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= sim::state().devices.size()) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  auto& device = *sim::state().devices[static_cast<std::size_t>(ordinal)];
  if (bytes > device.properties.totalGlobalMem - device.used_bytes) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  int const file = memfd_create("graphstep-simulated-device-memory", MFD_CLOEXEC);
  if (file < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (int const failure = size_memory_file(file, bytes); failure != 0) {
    close(file);
    report_memory_file_failure(bytes, "sizing", failure);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (bytes <= poison_limit) {
    if (int const failure = fill_memory_file(file, bytes); failure != 0) {
      close(file);
      report_memory_file_failure(bytes, "filling", failure);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  device.used_bytes += bytes;
  *handle = next_handle++;
  physical()[*handle] = physical_memory{file, bytes, ordinal};
  return CUDA_SUCCESS;
}

CUresult CUDAAPI mem_release(CUmemGenericAllocationHandle handle) {
  sim::lock_guard const lock{sim::state().mutex};
  auto it = physical().find(handle);
  if (it == physical().end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  // "The memory allocation will be freed when all outstanding mappings to the memory are
  // unmapped ... The generic memory handle can be freed when there are still outstanding
  // mappings made with this handle" (cuMemRelease): the device keeps it until the last unmap.
  it->second.released = true;
  free_if_unused(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI mem_map(CUdeviceptr address, std::size_t bytes, std::size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  sim::lock_guard const lock{sim::state().mutex};
  auto it = physical().find(handle);
  if (it == physical().end() || it->second.released || flags != 0ULL || offset != 0 ||
      bytes != it->second.bytes || !reserved(static_cast<std::uintptr_t>(address), bytes) ||
      !aligned(address)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (sim::find_allocation(reinterpret_cast<void const*>(address)) != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;  // already mapped
  }
  void* mapped = mmap(reinterpret_cast<void*>(address), bytes, PROT_NONE, MAP_SHARED | MAP_FIXED,
                      it->second.file, 0);
  if (mapped == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  auto const base = static_cast<std::uintptr_t>(address);
  sim::allocation mapped_range{base, bytes, sim::memory_kind::virtual_reservation,
                               it->second.device, nullptr};
  mapped_range.device_protection = PROT_NONE;  // until cuMemSetAccess
  sim::state().allocations[base] = mapped_range;
  sim::forget_accesses(reinterpret_cast<void const*>(address), bytes);
  ++it->second.mappings;
  mapped_handles()[base] = handle;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI mem_unmap(CUdeviceptr address, std::size_t bytes) {
  sim::lock_guard const lock{sim::state().mutex};
  auto& allocations = sim::state().allocations;
  auto it = allocations.find(static_cast<std::uintptr_t>(address));
  if (it == allocations.end() || it->second.kind != sim::memory_kind::virtual_reservation ||
      it->second.bytes != bytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Back to an inaccessible part of the reservation.
  if (mmap(reinterpret_cast<void*>(address), bytes, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  allocations.erase(it);
  auto const handle = mapped_handles().find(static_cast<std::uintptr_t>(address));
  if (handle != mapped_handles().end()) {
    auto const memory = physical().find(handle->second);
    mapped_handles().erase(handle);
    if (memory != physical().end()) {
      --memory->second.mappings;
      free_if_unused(memory);
    }
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI mem_set_access(CUdeviceptr address, std::size_t bytes,
                                CUmemAccessDesc const* descriptors, std::size_t count) {
  sim::lock_guard const lock{sim::state().mutex};
  if (descriptors == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  sim::allocation const* owner = sim::find_allocation(reinterpret_cast<void const*>(address));
  if (owner == nullptr || owner->kind != sim::memory_kind::virtual_reservation ||
      static_cast<std::uintptr_t>(address) + bytes > owner->base + owner->bytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // "Set the access flags for each location specified in desc" (cuMemSetAccess in cuda.h):
  // devices not listed keep what they had.
  std::map<int, int> access = owner->access_by_device;
  for (std::size_t i = 0; i < count; ++i) {
    CUmemAccessDesc const& granted = descriptors[i];
    if (granted.location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (granted.location.id < 0 ||
        static_cast<std::size_t>(granted.location.id) >= sim::state().devices.size()) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    switch (granted.flags) {
      case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
        access[granted.location.id] = PROT_READ | PROT_WRITE;
        break;
      case CU_MEM_ACCESS_FLAGS_PROT_READ: access[granted.location.id] = PROT_READ; break;
      case CU_MEM_ACCESS_FLAGS_PROT_NONE: access.erase(granted.location.id); break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  int protection = PROT_NONE;
  for (auto const& entry : access) protection |= entry.second;
  // Device work gets this access, narrowed to each kernel's device while it runs; host code
  // none (guarded_memory.hpp).
  sim::allocation& mapped = sim::state().allocations.at(owner->base);
  mapped.access_by_device = std::move(access);
  mapped.device_protection = protection;
  sim::apply_protection(mapped);
  return CUDA_SUCCESS;
}

// Not a driver function: the simulator's answer to what CUPTI's callbacks tell a program on a
// GPU, each runtime call's result at API exit. For the capture `capturing` takes part in, the
// first call issued to one of its streams that failed yet left the capture valid (cudaMemcpyBatchAsync
// during capture: rapidsai/rmm#2518), so that the capture's owner can refuse a graph that lacks
// its work. Returns 1 and sets `call` (a string literal) and `error` when there is one; 0 when
// there is none or `capturing` is not capturing. No driver has the symbol, so on a GPU
// cudaGetDriverEntryPointByVersion reports it not found.
int capture_failed_call(cudaStream_t capturing, char const** call, int* error) {
  if (call == nullptr || error == nullptr) return 0;
  sim::lock_guard const lock{sim::state().mutex};
  sim::stream_state const* stream = sim::find_stream(capturing);
  if (stream == nullptr || stream->capture == nullptr) return 0;
  sim::capture_state const& capture = *stream->capture;
  if (capture.failed_call == nullptr) return 0;
  *call = capture.failed_call;
  *error = static_cast<int>(capture.failed_call_error);
  return 1;
}

// graphstepSimCaptureInvalidation(capturing, call, library_call, error): the first call that
// invalidated the capture under way on `capturing`, for the capture's error to name. Returns 1
// and sets `call` (the CUDA call), `library_call` (the simulated library entry point that made
// it, or null) and `error` when the capture is invalidated; 0 when it is not, or `capturing`
// is not capturing. No driver has the symbol.
int capture_invalidation(cudaStream_t capturing, char const** call, char const** library_call,
                         int* error) {
  if (call == nullptr || library_call == nullptr || error == nullptr) return 0;
  sim::lock_guard const lock{sim::state().mutex};
  sim::stream_state const* stream = sim::find_stream(capturing);
  if (stream == nullptr || stream->capture == nullptr) return 0;
  sim::capture_state const& capture = *stream->capture;
  if (capture.invalidated_by == cudaSuccess) return 0;
  *call = capture.invalidating_call;
  *library_call = capture.invalidating_library_call;
  *error = static_cast<int>(capture.invalidated_by);
  return 1;
}

struct entry_point {
  std::string_view name;
  void* function;
};

std::array<entry_point, 14> const entry_points{{
    {"cuGetErrorName", reinterpret_cast<void*>(&get_error_name)},
    {"cuGetErrorString", reinterpret_cast<void*>(&get_error_string)},
    {"cuDeviceGet", reinterpret_cast<void*>(&device_get)},
    {"cuDeviceGetAttribute", reinterpret_cast<void*>(&device_get_attribute)},
    {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&mem_get_allocation_granularity)},
    {"cuMemAddressReserve", reinterpret_cast<void*>(&mem_address_reserve)},
    {"cuMemAddressFree", reinterpret_cast<void*>(&mem_address_free)},
    {"cuMemCreate", reinterpret_cast<void*>(&mem_create)},
    {"cuMemRelease", reinterpret_cast<void*>(&mem_release)},
    {"cuMemMap", reinterpret_cast<void*>(&mem_map)},
    {"cuMemUnmap", reinterpret_cast<void*>(&mem_unmap)},
    {"cuMemSetAccess", reinterpret_cast<void*>(&mem_set_access)},
    {"graphstepSimCaptureFailedCall", reinterpret_cast<void*>(&capture_failed_call)},
    {"graphstepSimCaptureInvalidation", reinterpret_cast<void*>(&capture_invalidation)},
}};

}  // namespace

cudaError_t cudaGetDriverEntryPointByVersion(char const* symbol, void** function,
                                             unsigned int /*version*/, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status) {
  if (symbol == nullptr || function == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (flags != cudaEnableDefault && flags != cudaEnableLegacyStream &&
      flags != cudaEnablePerThreadDefaultStream) {
    return sim::fail(cudaErrorInvalidValue);
  }
  *function = nullptr;
  for (entry_point const& entry : entry_points) {
    if (entry.name == symbol) {
      *function = entry.function;
      if (status != nullptr) *status = cudaDriverEntryPointSuccess;
      return cudaSuccess;
    }
  }
  // Not modelled: the caller learns it as it would of a driver too old for the symbol.
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// cudaGetDriverEntryPoint (deprecated): cudaGetDriverEntryPointByVersion "with a hardcoded
// cudaVersion", the runtime's own (CUDART_VERSION): "the API will use the CUDA runtime version to
// return the address to the most recent ABI compatible driver symbol".
cudaError_t cudaGetDriverEntryPoint(char const* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
  return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}
