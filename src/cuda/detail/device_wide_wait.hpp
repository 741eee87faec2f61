#pragma once

// Device-wide waits that never break a graphstep capture.
//
// cudaDeviceSynchronize fails, and invalidates every capture under way on the device, whatever
// the capture mode. Some teardown has no stream to wait on (memory any stream may still use), so
// it needs a device-wide wait: it is deferred while a graphstep capture is under way on the
// device and runs when the last of them ends. Captures begun with the raw CUDA API are not
// seen here.

#include <functional>
#include <memory>

namespace graphstep::cuda::detail {

/// Registers a capture on `device` until the returned token dies. Take it before
/// cudaStreamBeginCapture and drop it after cudaStreamEndCapture.
[[nodiscard]] std::shared_ptr<void> register_capture(int device);

/// Synchronizes `device`, then runs `release`: at once when no graphstep capture is under way
/// on it, else once the last of them has ended. A failure is reported on stderr, not thrown.
void after_device_idle(int device, std::function<void()> release) noexcept;

}  // namespace graphstep::cuda::detail
