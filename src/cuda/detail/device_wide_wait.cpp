#include "cuda/detail/device_wide_wait.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_guard.hpp>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace graphstep::cuda::detail {
namespace {

struct device_captures {
  int under_way{};
  std::vector<std::function<void()>> deferred;
};

struct registry {
  // Held while a device is synchronized, so no graphstep capture can begin meanwhile.
  std::mutex mutex;
  std::map<int, device_captures> devices;
};

registry& the_registry() {
  // Never destroyed: tokens and releases may outlive static destruction order.
  static auto* const instance = new registry;  // NOLINT(cppcoreguidelines-owning-memory)
  return *instance;
}

void synchronize(int device) noexcept {
  try {
    device_guard const on_device{device};
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaDeviceSynchronize());
  } catch (std::exception const& e) {
    static_cast<void>(std::fprintf(
        stderr, "graphstep: waiting for device %d failed, continuing: %s\n", device, e.what()));
  }
}

void run(std::function<void()> const& release) noexcept {
  try {
    release();
  } catch (std::exception const& e) {
    static_cast<void>(std::fprintf(
        stderr, "graphstep: a release after waiting for the device failed: %s\n", e.what()));
  }
}

// Counts one capture under way; the last to end on a device runs what was deferred.
class registered_capture {
 public:
  explicit registered_capture(int device) : device_{device} {
    registry& r = the_registry();
    std::lock_guard const lock{r.mutex};
    ++r.devices[device].under_way;
  }
  registered_capture(registered_capture const&) = delete;
  registered_capture& operator=(registered_capture const&) = delete;
  registered_capture(registered_capture&&) = delete;
  registered_capture& operator=(registered_capture&&) = delete;

  ~registered_capture() {
    registry& r = the_registry();
    std::vector<std::function<void()>> releases;
    {
      std::lock_guard const lock{r.mutex};
      device_captures& captures = r.devices[device_];
      if (--captures.under_way > 0 || captures.deferred.empty()) return;
      releases = std::exchange(captures.deferred, {});
      synchronize(device_);
    }
    // Outside the lock: a release may end a pool, which may ask for a wait itself.
    for (auto const& release : releases) run(release);
  }

 private:
  int device_;
};

}  // namespace

std::shared_ptr<void> register_capture(int device) {
  return std::make_shared<registered_capture>(device);
}

void after_device_idle(int device, std::function<void()> release) noexcept {
  registry& r = the_registry();
  {
    std::lock_guard const lock{r.mutex};
    try {
      device_captures& captures = r.devices[device];
      if (captures.under_way > 0) {
        captures.deferred.push_back(std::move(release));
        return;
      }
    } catch (std::bad_alloc const&) {
      // No room to defer it: waiting now is better than never releasing.
    }
    synchronize(device);
  }
  run(release);
}

}  // namespace graphstep::cuda::detail
