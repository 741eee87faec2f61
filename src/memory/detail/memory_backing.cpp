#include "memory/detail/memory_backing.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <string>
#include <vector>

#include "cuda/detail/driver_api.hpp"
#include "cuda/detail/relaxed_capture_mode.hpp"
#include "detail/logger.hpp"
#include "memory/detail/pool_engine.hpp"

namespace graphstep::memory::detail {
namespace {

// A segment is never part of a graph: the pool may map or unmap one while a capture is under
// way on this or another thread. cudaMalloc, cudaFree and cuMemUnmap (synchronous) are
// "potentially unsafe" during a capture, so they run in Relaxed capture mode.
using cuda::detail::relaxed_capture_mode;

std::size_t round_up(std::size_t bytes, std::size_t unit) {
  return (bytes + unit - 1) / unit * unit;
}

class virtual_memory_backing final : public memory_backing {
 public:
  virtual_memory_backing(int device, CUdevice cu_device, std::vector<CUdevice> const& peers,
                         std::size_t granularity, std::size_t reserve_bytes)
      : device_{device},
        granularity_{granularity},
        reserved_{round_up(reserve_bytes, granularity)} {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = cu_device;
    // Mapped memory is accessible to no device until cuMemSetAccess names it, its own included.
    for (CUdevice const reader : peers) {
      CUmemAccessDesc& access = access_.emplace_back();
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = reader;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    CUdeviceptr base = 0;
    GRAPHSTEP_CU_TRY(
        cuda::detail::driver().mem_address_reserve(&base, reserved_, granularity_, 0, 0));
    base_ = base;
  }

  virtual_memory_backing(virtual_memory_backing const&) = delete;
  virtual_memory_backing& operator=(virtual_memory_backing const&) = delete;
  ~virtual_memory_backing() override {
    // The pool has waited for the work that used this memory (pool_state::~pool_state).
    cuda::device_guard const on_device{device_};
    relaxed_capture_mode const relaxed;
    auto const& api = cuda::detail::driver();
    std::size_t offset = 0;
    for (auto const& chunk : chunks_) {
      report(api.mem_unmap(base_ + offset, chunk.bytes), "cuMemUnmap");
      report(api.mem_release(chunk.handle), "cuMemRelease");
      offset += chunk.bytes;
    }
    report(api.mem_address_free(base_, reserved_), "cuMemAddressFree");
  }

  // cuMemUnmap takes "the entire contiguous address range that was mapped to", so the last
  // chunks go whole, the newest first.
  std::size_t shrink(std::uintptr_t base, std::size_t region_bytes,
                     std::size_t free_bytes) override {
    GRAPHSTEP_EXPECTS(base == base_ && region_bytes == mapped_,
                      "virtual memory backing: shrink names a range it does not map");
    cuda::device_guard const on_device{device_};
    relaxed_capture_mode const relaxed;
    auto const& api = cuda::detail::driver();
    std::size_t given_back = 0;
    while (!chunks_.empty() && given_back + chunks_.back().bytes <= free_bytes) {
      chunk const last = chunks_.back();
      CUdeviceptr const at = base_ + mapped_ - last.bytes;
      GRAPHSTEP_CU_TRY(api.mem_unmap(at, last.bytes));
      chunks_.pop_back();
      mapped_ -= last.bytes;
      given_back += last.bytes;
      report(api.mem_release(last.handle), "cuMemRelease");
    }
    return given_back;
  }

  [[nodiscard]] std::size_t granularity() const noexcept override { return granularity_; }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept override { return reserved_; }
  [[nodiscard]] std::size_t mapped_bytes() const noexcept override { return mapped_; }
  [[nodiscard]] pool_backing kind() const noexcept override { return pool_backing::virtual_memory; }

 private:
  struct chunk {
    CUmemGenericAllocationHandle handle;
    std::size_t bytes;
  };

  static void report(CUresult status, char const* call) noexcept {
    if (status != CUDA_SUCCESS && status != CUDA_ERROR_DEINITIALIZED) {
      graphstep::detail::log_lazily(log_level::error, [&] {
        return std::string{"cleanup failed, continuing: "} + call + ": " +
               cuda::detail::driver_error_name(status);
      });
    }
  }

  growth_status do_grow(std::size_t bytes, growth& out) override {
    std::size_t const step = round_up(bytes, granularity_);
    if (step > reserved_ - mapped_) return growth_status::address_range_full;
    auto const& api = cuda::detail::driver();
    CUmemGenericAllocationHandle handle{};
    CUresult const created = api.mem_create(&handle, step, &prop_, 0);
    if (created == CUDA_ERROR_OUT_OF_MEMORY) return growth_status::device_out_of_memory;
    GRAPHSTEP_CU_TRY(created);
    CUdeviceptr const at = base_ + mapped_;
    if (CUresult const mapped = api.mem_map(at, step, 0, handle, 0); mapped != CUDA_SUCCESS) {
      report(api.mem_release(handle), "cuMemRelease");
      GRAPHSTEP_CU_TRY(mapped);
    }
    if (CUresult const allowed = api.mem_set_access(at, step, access_.data(), access_.size());
        allowed != CUDA_SUCCESS) {
      report(api.mem_unmap(at, step), "cuMemUnmap");
      report(api.mem_release(handle), "cuMemRelease");
      GRAPHSTEP_CU_TRY(allowed);
    }
    chunks_.push_back({handle, step});
    // The first chunk starts the one region; every later chunk extends it in place.
    out = {static_cast<std::uintptr_t>(base_), step, mapped_ > 0};
    mapped_ += step;
    return growth_status::grown;
  }

  int device_;
  std::size_t granularity_;
  CUmemAllocationProp prop_{};
  std::vector<CUmemAccessDesc> access_;  // the pool's device, then its peers
  CUdeviceptr base_{};
  std::size_t reserved_{};
  std::size_t mapped_{};
  std::vector<chunk> chunks_;
};

// Separate segments, each from one allocation call and given back only whole (cudaFree and
// cudaFreeHost take what cudaMalloc and cudaHostAlloc returned): cudaMalloc segments, or
// page-locked host segments, which a captured copy reads at every replay as the engine's
// graph marks allow.
class segment_backing final : public memory_backing {
 public:
  using allocate_call = cudaError_t (*)(void** segment, std::size_t bytes);
  using release_call = cudaError_t (*)(void* segment);

  segment_backing(int device, pool_backing kind, std::size_t granularity, allocate_call allocate,
                  release_call release)
      : device_{device},
        kind_{kind},
        granularity_{granularity},
        allocate_{allocate},
        release_{release} {}

  segment_backing(segment_backing const&) = delete;
  segment_backing& operator=(segment_backing const&) = delete;
  ~segment_backing() override {
    cuda::device_guard const on_device{device_};
    relaxed_capture_mode const relaxed;
    for (void* segment : segments_) GRAPHSTEP_ASSERT_CUDA_SUCCESS(release_(segment));
  }

  std::size_t shrink(std::uintptr_t base, std::size_t region_bytes,
                     std::size_t free_bytes) override {
    if (free_bytes < region_bytes) return 0;
    auto const found = std::find(segments_.begin(), segments_.end(),
                                 reinterpret_cast<void*>(base));  // NOLINT(*-no-int-to-ptr)
    GRAPHSTEP_EXPECTS(found != segments_.end(),
                      "memory_pool: shrink names a segment the backing does not hold");
    cuda::device_guard const on_device{device_};
    {
      relaxed_capture_mode const relaxed;
      GRAPHSTEP_CUDA_TRY(release_(*found));
    }
    segments_.erase(found);
    mapped_ -= region_bytes;
    return region_bytes;
  }

  [[nodiscard]] std::size_t granularity() const noexcept override { return granularity_; }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept override { return mapped_; }
  [[nodiscard]] std::size_t mapped_bytes() const noexcept override { return mapped_; }
  [[nodiscard]] pool_backing kind() const noexcept override { return kind_; }

 private:
  growth_status do_grow(std::size_t bytes, growth& out) override {
    std::size_t const step = round_up(bytes, granularity_);
    void* segment = nullptr;
    cudaError_t status = cudaSuccess;
    {
      relaxed_capture_mode const relaxed;
      status = allocate_(&segment, step);
    }
    if (status == cudaErrorMemoryAllocation) {
      static_cast<void>(cudaGetLastError());
      return growth_status::device_out_of_memory;
    }
    GRAPHSTEP_CUDA_TRY(status);
    segments_.push_back(segment);
    mapped_ += step;
    out = {reinterpret_cast<std::uintptr_t>(segment), step, false};
    return growth_status::grown;
  }

  int device_;
  pool_backing kind_;
  std::size_t granularity_;
  allocate_call allocate_;
  release_call release_;
  std::size_t mapped_{};
  std::vector<void*> segments_;
};

}  // namespace

std::unique_ptr<memory_backing> make_pinned_host_backing(int device) {
  // Pinning works by pages, and staging pools are small: 64 KiB steps.
  return std::make_unique<segment_backing>(
      device, pool_backing::pinned_host, std::size_t{64} << 10,
      [](void** segment, std::size_t bytes) {
        return cudaHostAlloc(segment, bytes, cudaHostAllocPortable);
      },
      [](void* segment) { return cudaFreeHost(segment); });
}
std::unique_ptr<memory_backing> make_virtual_memory_backing(int device, std::size_t reserve_bytes,
                                                            std::vector<int> const& peers,
                                                            std::string& why_not) {
  auto const& api = cuda::detail::driver();
  if (!api.complete()) {
    why_not = "the CUDA driver does not provide the virtual memory management API";
    return nullptr;
  }
  CUdevice cu_device{};
  GRAPHSTEP_CU_TRY(api.device_get(&cu_device, device));
  int supported = 0;
  GRAPHSTEP_CU_TRY(api.device_get_attribute(
      &supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu_device));
  if (supported == 0) {
    why_not = "device " + std::to_string(device) + " does not support virtual memory management";
    return nullptr;
  }
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cu_device;
  std::size_t granularity = 0;
  GRAPHSTEP_CU_TRY(api.mem_get_allocation_granularity(&granularity, &prop,
                                                      CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  GRAPHSTEP_EXPECTS(reserve_bytes <= largest_pool_size,
                    "pool_options::reserve_bytes of " + std::to_string(reserve_bytes) +
                        " bytes is more address space than any device can reserve (a negative "
                        "size converted to size_t?); give the range the pool may grow to, or 0 "
                        "for the device's memory size");
  if (reserve_bytes == 0) {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    GRAPHSTEP_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
    reserve_bytes = total_bytes;
  }
  std::vector<CUdevice> readers{cu_device};
  for (int const peer : peers) {
    GRAPHSTEP_CU_TRY(api.device_get(&readers.emplace_back(), peer));
  }
  return std::make_unique<virtual_memory_backing>(device, cu_device, readers, granularity,
                                                  reserve_bytes);
}

std::unique_ptr<memory_backing> make_device_malloc_backing(int device,
                                                           std::vector<int> const& peers) {
  for (int const peer : peers) {
    cuda::device_guard const on_peer{peer};
    cudaError_t const enabled = cudaDeviceEnablePeerAccess(device, 0);
    if (enabled == cudaErrorPeerAccessAlreadyEnabled) {
      static_cast<void>(cudaGetLastError());  // enabled before, by this pool or another
      continue;
    }
    GRAPHSTEP_CUDA_TRY(enabled);
  }
  return std::make_unique<segment_backing>(
      device, pool_backing::device_malloc, std::size_t{2} << 20,
      [](void** segment, std::size_t bytes) { return cudaMalloc(segment, bytes); },
      [](void* segment) { return cudaFree(segment); });
}
}  // namespace graphstep::memory::detail
