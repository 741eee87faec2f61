#pragma once

// The captures graphstep discarded (the body threw, ending or instantiating failed), by CUDA's
// capture id (cudaStreamGetCaptureInfo), so that what was logged during them (the collectives
// a communicator recorded) can be left out of later checks. Defined in capture_scope.cpp.

namespace graphstep::graphs::detail {

/// Remembers that the capture `capture_id` was discarded; the most recent 4096 are kept.
void note_abandoned_capture(unsigned long long capture_id) noexcept;

/// True when graphstep discarded the capture `capture_id` (0, no capture, never was).
[[nodiscard]] bool capture_was_abandoned(unsigned long long capture_id);

}  // namespace graphstep::graphs::detail
