// Device management on the simulated device beyond choosing the current device: device flags,
// initialization, choosing a device by its properties, PCI bus ids and resource limits.
// Prototypes from cuda_runtime_api.h; each follows the documentation there, and where it is
// silent the stricter behaviour is modelled (sim/docs/simulator.md).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "detail/runtime_state.hpp"

namespace sim = graphstep::sim::detail;

namespace {

sim::device_state* device_or_null(int device) {
  auto& devices = sim::state().devices;
  if (device < 0 || static_cast<std::size_t>(device) >= devices.size()) return nullptr;
  return devices[static_cast<std::size_t>(device)].get();
}

// cudaSetDeviceFlags: at most one of the scheduling flags (cudaDeviceScheduleAuto is none of
// them), with cudaDeviceMapHost, cudaDeviceLmemResizeToMax and cudaDeviceSyncMemops; any other
// bit, or two scheduling flags at once, is cudaErrorInvalidValue.
bool device_flags_valid(unsigned flags) {
  unsigned const known = cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax |
                         cudaDeviceSyncMemops;
  unsigned const schedule = flags & cudaDeviceScheduleMask;
  return (flags & ~known) == 0U &&
         (schedule == cudaDeviceScheduleAuto || schedule == cudaDeviceScheduleSpin ||
          schedule == cudaDeviceScheduleYield || schedule == cudaDeviceScheduleBlockingSync);
}

// [domain]:[bus]:[device].[function], each a hexadecimal number (cudaDeviceGetPCIBusId).
void format_bus_id(cudaDeviceProp const& p, char* out, std::size_t size) {
  static_cast<void>(std::snprintf(out, size, "%04x:%02x:%02x.0", static_cast<unsigned>(p.pciDomainID),
                                  static_cast<unsigned>(p.pciBusID),
                                  static_cast<unsigned>(p.pciDeviceID)));
}

// Reads a hexadecimal field ending at one of `ends`; false when there is none.
bool read_hex(char const*& text, char const* ends, unsigned long& value) {
  if (std::isxdigit(static_cast<unsigned char>(*text)) == 0) return false;
  char* stop = nullptr;
  value = std::strtoul(text, &stop, 16);
  if (std::strchr(ends, *stop) == nullptr) return false;
  text = stop;
  return true;
}

// The forms cudaDeviceGetByPCIBusId takes: [domain]:[bus]:[device].[function],
// [domain]:[bus]:[device] and [bus]:[device].[function].
struct bus_id {
  unsigned long domain{};
  unsigned long bus{};
  unsigned long device{};
  unsigned long function{};
};

bool parse_bus_id(char const* text, bus_id& id) {
  unsigned long first = 0;
  unsigned long second = 0;
  if (!read_hex(text, ":", first) || !read_hex(++text, ":.", second)) return false;
  if (*text == '.') {  // [bus]:[device].[function]
    id = bus_id{0, first, second, 0};
    return read_hex(++text, "", id.function);
  }
  id.domain = first;
  id.bus = second;
  if (!read_hex(++text, ".", id.device)) return false;
  if (*text == '\0') return true;  // [domain]:[bus]:[device]
  return read_hex(++text, "", id.function);
}

}  // namespace

// "Returns in flags the flags for the current device ... Flags returned by this function may
// specifically include cudaDeviceMapHost even though it is not accepted by cudaSetDeviceFlags
// because it is implicit in runtime API flags" (cudaGetDeviceFlags): it is included here.
cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (flags == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::device_state const* device = sim::current_device();
  if (device == nullptr) return sim::fail(cudaErrorInvalidDevice);
  *flags = device->flags | cudaDeviceMapHost;
  return cudaSuccess;
}

// "Records flags as the flags for the current device ... the previous flags are overwritten"
// (cudaSetDeviceFlags; cudaErrorInvalidValue is the only error listed). cudaDeviceMapHost is
// implicit; cudaDeviceSyncMemops makes cudaMemcpy and cudaMemset on the device block the host
// until they are done ("Ensures that synchronous memory operations initiated on this context will
// always synchronize"); the scheduling flags only change how a host waits.
cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (!device_flags_valid(flags)) return sim::fail(cudaErrorInvalidValue);
  sim::device_state* device = sim::current_device();
  if (device == nullptr) return sim::fail(cudaErrorInvalidDevice);
  device->flags = flags & ~static_cast<unsigned>(cudaDeviceMapHost);
  return cudaSuccess;
}

// "This function will initialize the CUDA Runtime structures and primary context on device when
// called, but the context will not be made current to device. When cudaInitDeviceFlagsAreValid is
// set in flags, deviceFlags are applied to the requested device" (cudaInitDevice). Other bits in
// flags, or device flags cudaSetDeviceFlags refuses, are cudaErrorInvalidValue (the stricter
// reading: the header lists only cudaErrorInvalidDevice).
cudaError_t cudaInitDevice(int device, unsigned int device_flags, unsigned int flags) {
  sim::lock_guard const lock{sim::state().mutex};
  if (sim::this_thread().in_host_function) return sim::fail(cudaErrorNotPermitted);
  sim::device_state* d = device_or_null(device);
  if (d == nullptr) return sim::fail(cudaErrorInvalidDevice);
  if ((flags & ~static_cast<unsigned>(cudaInitDeviceFlagsAreValid)) != 0U) {
    return sim::fail(cudaErrorInvalidValue);
  }
  bool const apply = (flags & cudaInitDeviceFlagsAreValid) != 0U;
  if (apply && !device_flags_valid(device_flags)) return sim::fail(cudaErrorInvalidValue);
  if (apply) d->flags = device_flags & ~static_cast<unsigned>(cudaDeviceMapHost);
  sim::use_primary_context_of(*d);
  return cudaSuccess;
}

// "Returns in *device the device which has properties that best match *prop" (cudaChooseDevice).
// Every simulated device has the same properties, so each matches as well as the others: the
// first one is chosen.
cudaError_t cudaChooseDevice(int* device, cudaDeviceProp const* properties) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (device == nullptr || properties == nullptr) return sim::fail(cudaErrorInvalidValue);
  if (sim::state().devices.empty()) return sim::fail(cudaErrorNoDevice);
  *device = 0;
  return cudaSuccess;
}

// cudaSetValidDevices: "CUDA will try devices from the list sequentially until it finds one that
// works", and "with a len of 0 ... CUDA will go back to its default behavior of trying devices
// sequentially from a default list containing all of the available CUDA devices". Every simulated
// device works, so the device a host thread uses before cudaSetDevice names one is the list's
// first (device 0 without a list); a thread that named a device or used a context keeps its own.
// "If a specified device ID in the list does not exist, this function will return
// cudaErrorInvalidDevice. If len is not 0 and device_arr is NULL or if len exceeds the number of
// devices in the system, then cudaErrorInvalidValue"; a negative len too (the stricter reading).
cudaError_t cudaSetValidDevices(int* device_arr, int len) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (len < 0 || (len != 0 && device_arr == nullptr) ||
      static_cast<std::size_t>(len) > sim::state().devices.size()) {
    return sim::fail(cudaErrorInvalidValue);
  }
  for (int i = 0; i < len; ++i) {
    if (device_or_null(device_arr[i]) == nullptr) return sim::fail(cudaErrorInvalidDevice);
  }
  int const first = len == 0 ? 0 : device_arr[0];
  sim::set_implicit_device(first);
  sim::thread_state& me = sim::this_thread();
  if (!me.device_chosen && me.contexts_used == 0U) me.device = first;
  return cudaSuccess;
}

// "Returns an ASCII string identifying the device dev in the NULL-terminated string pointed to by
// pciBusId ... [domain]:[bus]:[device].[function] where domain, bus, device, and function are all
// hexadecimal values. pciBusId should be large enough to store 13 characters including the
// NULL-terminator" (cudaDeviceGetPCIBusId), from cudaDeviceProp's pciDomainID, pciBusID and
// pciDeviceID. A shorter len is cudaErrorInvalidValue, the stricter reading (a GPU may truncate).
cudaError_t cudaDeviceGetPCIBusId(char* bus_id_out, int len, int device) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (bus_id_out == nullptr || len < 13) return sim::fail(cudaErrorInvalidValue);
  sim::device_state const* d = device_or_null(device);
  if (d == nullptr) return sim::fail(cudaErrorInvalidDevice);
  format_bus_id(d->properties, bus_id_out, static_cast<std::size_t>(len));
  return cudaSuccess;
}

// "Returns in *device a device ordinal given a PCI bus ID string" in one of three forms
// (cudaDeviceGetByPCIBusId). A string in none of them is cudaErrorInvalidValue; one naming no
// simulated device is cudaErrorInvalidDevice.
cudaError_t cudaDeviceGetByPCIBusId(int* device, char const* bus_id_text) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  bus_id id;
  if (device == nullptr || bus_id_text == nullptr || !parse_bus_id(bus_id_text, id)) {
    return sim::fail(cudaErrorInvalidValue);
  }
  for (auto const& candidate : sim::state().devices) {
    cudaDeviceProp const& p = candidate->properties;
    if (id.domain == static_cast<unsigned long>(p.pciDomainID) &&
        id.bus == static_cast<unsigned long>(p.pciBusID) &&
        id.device == static_cast<unsigned long>(p.pciDeviceID) && id.function == 0) {
      *device = candidate->ordinal;
      return cudaSuccess;
    }
  }
  return sim::fail(cudaErrorInvalidDevice);
}

// "Returns in *pValue the current size of limit" (cudaDeviceGetLimit), for the current device;
// cudaLimitDevRuntimeSyncDepth "will return error cudaErrorUnsupportedLimit" on compute
// capability 9.0, as does a value that names no limit.
cudaError_t cudaDeviceGetLimit(std::size_t* value, cudaLimit limit) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (value == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::device_state const* device = sim::current_device();
  if (device == nullptr) return sim::fail(cudaErrorInvalidDevice);
  auto const found = device->limits.find(limit);
  if (found == device->limits.end()) return sim::fail(cudaErrorUnsupportedLimit);
  *value = found->second;
  return cudaSuccess;
}

// cudaDeviceSetLimit, per limit: the printf FIFO and the malloc heap "must not be" set "after
// launching any kernel that uses" printf or malloc ("cudaErrorInvalidValue will be returned"):
// which kernels use them is not known here, so after any kernel launched on the device (the
// stricter reading); cudaLimitDevRuntimeSyncDepth is cudaErrorUnsupportedLimit on compute
// capability 9.0; cudaLimitMaxL2FetchGranularity "can range from 0B to 128B" (more is
// cudaErrorInvalidValue, the stricter reading of a hint); cudaLimitPersistingL2CacheSize is
// clamped to cudaDevAttrMaxPersistingL2CacheSize ("The driver is free to modify the requested
// value ... The application can use cudaDeviceGetLimit() to find out exactly what the limit has
// been set to"). Other values are stored as given.
cudaError_t cudaDeviceSetLimit(cudaLimit limit, std::size_t value) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  sim::device_state* device = sim::current_device();
  if (device == nullptr) return sim::fail(cudaErrorInvalidDevice);
  auto const found = device->limits.find(limit);
  if (found == device->limits.end()) return sim::fail(cudaErrorUnsupportedLimit);
  switch (limit) {
    case cudaLimitPrintfFifoSize:
    case cudaLimitMallocHeapSize:
      if (device->kernel_launched) return sim::fail(cudaErrorInvalidValue);
      break;
    case cudaLimitMaxL2FetchGranularity:
      if (value > 128) return sim::fail(cudaErrorInvalidValue);
      break;
    case cudaLimitPersistingL2CacheSize:
      value = std::min(value,
                       static_cast<std::size_t>(device->properties.persistingL2CacheMaxSize));
      break;
    default: break;
  }
  found->second = value;
  return cudaSuccess;
}

// cudaDeviceSetCacheConfig: "the preferred cache configuration for the current device. This is
// only a preference", one of cudaFuncCachePreferNone, ...PreferShared, ...PreferL1 and
// ...PreferEqual; kept for cudaDeviceGetCacheConfig (the L1 cache is not modelled). The header
// lists only cudaSuccess: another value is cudaErrorInvalidValue, the stricter reading
// (device_settings_gpu_test asks a GPU).
cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache cacheConfig) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  sim::device_state* device = sim::current_device();
  if (device == nullptr) return sim::fail(cudaErrorInvalidDevice);
  if (!sim::cache_config_valid(cacheConfig)) return sim::fail(cudaErrorInvalidValue);
  device->cache_config = cacheConfig;
  return cudaSuccess;
}

// cudaDeviceGetCacheConfig: the preference set, cudaFuncCachePreferNone "(default)". A null
// pointer is cudaErrorInvalidValue.
cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* pCacheConfig) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (pCacheConfig == nullptr) return sim::fail(cudaErrorInvalidValue);
  sim::device_state const* device = sim::current_device();
  if (device == nullptr) return sim::fail(cudaErrorInvalidDevice);
  *pCacheConfig = device->cache_config;
  return cudaSuccess;
}

// cudaDeviceSetSharedMemConfig (deprecated): "This function will do nothing on devices with fixed
// shared memory bank size", as compute capability 9.0's is (four bytes); a value no enumerator
// names is cudaErrorInvalidValue.
cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig config) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  return sim::shared_mem_config_valid(config) ? cudaSuccess : sim::fail(cudaErrorInvalidValue);
}

// cudaDeviceGetSharedMemConfig (deprecated): on a device with fixed banks "it will return the
// fixed bank size of the hardware": four bytes.
cudaError_t cudaDeviceGetSharedMemConfig(cudaSharedMemConfig* pConfig) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (pConfig == nullptr) return sim::fail(cudaErrorInvalidValue);
  *pConfig = cudaSharedMemBankSizeFourByte;
  return cudaSuccess;
}

// cudaDeviceGetP2PAttribute: "cudaErrorInvalidDevice if srcDevice or dstDevice are not valid or
// if they represent the same device", "cudaErrorInvalidValue if attrib is not valid or if value
// is a null pointer". Every pair of simulated devices reaches each other (as
// cudaDeviceCanAccessPeer says): rank 0 ("0 being the value used for most performant link"),
// access supported (the capability; cudaDeviceEnablePeerAccess turns it on), every native atomic
// supported (device atomics here are the host's on shared memory); CUDA arrays are not modelled,
// so no access to them.
cudaError_t cudaDeviceGetP2PAttribute(int* value, cudaDeviceP2PAttr attr, int srcDevice,
                                      int dstDevice) {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  if (device_or_null(srcDevice) == nullptr || device_or_null(dstDevice) == nullptr ||
      srcDevice == dstDevice) {
    return sim::fail(cudaErrorInvalidDevice);
  }
  if (value == nullptr) return sim::fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaDevP2PAttrPerformanceRank:
    case cudaDevP2PAttrCudaArrayAccessSupported:
    case cudaDevP2PAttrOnlyPartialNativeAtomicSupported: *value = 0; return cudaSuccess;
    case cudaDevP2PAttrAccessSupported:
    case cudaDevP2PAttrNativeAtomicSupported: *value = 1; return cudaSuccess;
    default: return sim::fail(cudaErrorInvalidValue);
  }
}

// cudaCtxResetPersistingL2Cache: "Resets all persisting lines in cache to normal status". No L2
// cache is modelled, so there is nothing to reset; the call succeeds.
cudaError_t cudaCtxResetPersistingL2Cache() {
  sim::lock_guard const lock{sim::state().mutex};
  if (cudaError_t const error = sim::enter_runtime_call(); error != cudaSuccess) return error;
  sim::use_primary_context();
  return cudaSuccess;
}
