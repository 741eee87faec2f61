#pragma once

/// @file graphs/external_events.hpp
/// @brief Events a captured graph records or waits for at every replay, so that one graph
/// signals another, or eager work, and timing events inside a graph measure each replay.

#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream_view.hpp>

namespace graphstep::graphs {

/// @brief Records `e` on `stream`. Inside a capture it becomes an event record node
/// (`cudaEventRecordWithFlags(…, cudaEventRecordExternal)`): every replay records `e` once the
/// work captured before it on `stream` is done, so eager work, another graph (through
/// `wait_external`) or the host can wait for that point of each replay, and a `timed_event`
/// recorded so gives elapsed times after the replay. Outside a capture, a plain record.
///
/// A plain `record` inside a capture does something else: it marks a point of the capture for
/// a fork or join within it, and the event cannot be waited on outside it.
/// @throws usage_error (a moved-from event), cuda_error
void record_external(cuda::event const& e, cuda::stream_view stream);

/// @brief Makes the work issued to `stream` after the call wait for `e`'s latest record. Inside
/// a capture it becomes an event wait node (`cudaStreamWaitEvent(…, cudaEventWaitExternal)`):
/// every replay waits for the record of `e` made before that replay was launched (by eager
/// work, or by another graph's `record_external`). Outside a capture, a plain wait.
///
/// A plain wait inside a capture on an event recorded outside it breaks the capture
/// (`cudaErrorStreamCaptureIsolation`).
/// @throws usage_error (a moved-from event), cuda_error
void wait_external(cuda::stream_view stream, cuda::event const& e);

}  // namespace graphstep::graphs
