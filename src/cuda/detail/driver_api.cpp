#include "cuda/detail/driver_api.hpp"

#include <cuda_runtime_api.h>

namespace graphstep::cuda::detail {
namespace {

template <typename Function>
void resolve(char const* symbol, int version, Function& out) noexcept {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &address, static_cast<unsigned>(version),
                                       cudaEnableDefault, &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    out = reinterpret_cast<Function>(address);
  } else {
    static_cast<void>(cudaGetLastError());
  }
}

driver_api load() noexcept {
  driver_api api;
  resolve("cuGetErrorName", 6000, api.get_error_name);
  resolve("cuGetErrorString", 6000, api.get_error_string);
  resolve("cuDeviceGet", 2000, api.device_get);
  resolve("cuDeviceGetAttribute", 2000, api.device_get_attribute);
  resolve("cuMemAddressReserve", 10020, api.mem_address_reserve);
  resolve("cuMemAddressFree", 10020, api.mem_address_free);
  resolve("cuMemCreate", 10020, api.mem_create);
  resolve("cuMemRelease", 10020, api.mem_release);
  resolve("cuMemMap", 10020, api.mem_map);
  resolve("cuMemUnmap", 10020, api.mem_unmap);
  resolve("cuMemSetAccess", 10020, api.mem_set_access);
  resolve("cuMemGetAllocationGranularity", 10020, api.mem_get_allocation_granularity);
  return api;
}

}  // namespace

bool driver_api::complete() const noexcept {
  return get_error_name != nullptr && get_error_string != nullptr && device_get != nullptr &&
         device_get_attribute != nullptr && mem_address_reserve != nullptr &&
         mem_address_free != nullptr && mem_create != nullptr && mem_release != nullptr &&
         mem_map != nullptr && mem_unmap != nullptr && mem_set_access != nullptr &&
         mem_get_allocation_granularity != nullptr;
}

driver_api const& driver() noexcept {
  static driver_api const api = load();
  return api;
}

std::string driver_error_name(int code) {
  char const* name = nullptr;
  if (auto get = driver().get_error_name; get != nullptr &&
                                          get(static_cast<CUresult>(code), &name) == CUDA_SUCCESS &&
                                          name != nullptr) {
    return name;
  }
  return "CUresult " + std::to_string(code);
}

std::string driver_error_text(int code) {
  char const* text = nullptr;
  if (auto get = driver().get_error_string;
      get != nullptr && get(static_cast<CUresult>(code), &text) == CUDA_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return "";
}

std::string const& no_device_advice() {
  static std::string const advice =
      "no CUDA device visible: graphstep needs an NVIDIA GPU and its driver. Check that "
      "`nvidia-smi` lists a GPU and that CUDA_VISIBLE_DEVICES does not hide it";
  return advice;
}

}  // namespace graphstep::cuda::detail
