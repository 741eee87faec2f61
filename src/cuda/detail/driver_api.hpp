#pragma once

// CUDA driver API entry points, resolved at run time through the runtime's
// cudaGetDriverEntryPointByVersion. graphstep never links libcuda: a binary that needs
// libcuda.so.1 does not even start on a machine without a driver.

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace graphstep::cuda::detail {

struct driver_api {
  PFN_cuGetErrorName_v6000 get_error_name{};
  PFN_cuGetErrorString_v6000 get_error_string{};
  PFN_cuDeviceGet_v2000 device_get{};
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute{};
  PFN_cuMemAddressReserve_v10020 mem_address_reserve{};
  PFN_cuMemAddressFree_v10020 mem_address_free{};
  PFN_cuMemCreate_v10020 mem_create{};
  PFN_cuMemRelease_v10020 mem_release{};
  PFN_cuMemMap_v10020 mem_map{};
  PFN_cuMemUnmap_v10020 mem_unmap{};
  PFN_cuMemSetAccess_v10020 mem_set_access{};
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity{};

  /// True when every entry point above was found.
  [[nodiscard]] bool complete() const noexcept;
};

/// The entry points, resolved once (thread-safe). Missing ones stay null, e.g. without a driver.
[[nodiscard]] driver_api const& driver() noexcept;

/// "CUDA_ERROR_OUT_OF_MEMORY", or "CUresult N" when the driver cannot be asked.
[[nodiscard]] std::string driver_error_name(int code);
/// The driver's description of the code, or "" when the driver cannot be asked.
[[nodiscard]] std::string driver_error_text(int code);

/// The message that starts every no_device_error.
[[nodiscard]] std::string const& no_device_advice();

}  // namespace graphstep::cuda::detail
