#pragma once

/// @file nccl/collectives.hpp
/// @brief Capturable collectives on checked device buffers, `group_guard` to launch several as
/// one, and the check that every rank captured the same collectives. Each takes an
/// `nccl_comm_view`: of an `nccl_comm`, or of a raw `ncclComm_t` made elsewhere.

#include <chrono>
#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>

namespace graphstep::nccl {

/// @brief Each collective checks its buffers (types equal, element counts consistent with the
/// world size, positive, non-null, aligned to their type), runs on `stream`, and may be
/// captured: inside a capture it is recorded in the communicator's log. A kind of collective
/// must have run once eagerly on the communicator before it is captured (NCCL connects lazily,
/// which a capture cannot do).
/// Enqueueing holds the communicator's lock, so a watchdog thread cannot abort it mid-call.
/// @throws usage_error (bad buffers, capture before warm-up), nccl_error (NCCL failure, or the
/// communicator was aborted: the message says why, e.g. the watchdog's rank, step and state)
void all_reduce(device_span send, device_span recv, reduce_op op, nccl_comm_view const& comm,
                cuda::stream_view stream);
/// @brief recv.count() × world size == send.count().
void reduce_scatter(device_span send, device_span recv, reduce_op op, nccl_comm_view const& comm,
                    cuda::stream_view stream);
/// @brief recv.count() == send.count() × world size.
void all_gather(device_span send, device_span recv, nccl_comm_view const& comm,
                cuda::stream_view stream);
/// @brief From `root`'s send buffer into every rank's recv buffer (same size).
void broadcast(device_span send, device_span recv, int root, nccl_comm_view const& comm,
               cuda::stream_view stream);

/// @brief ncclGroupStart/ncclGroupEnd around a scope: the collectives inside launch as one.
/// It takes no communicator's enqueue lock (a group may span several), so a background
/// watchdog must not abort a communicator while a group is open on it.
class group_guard {
 public:
  /// @brief Calls ncclGroupStart.
  /// @throws nccl_error
  group_guard();
  /// @brief Ends the group if `end()` was not called; a failure is reported, not thrown.
  /// When an exception leaves the scope, the group is dropped instead: none of its
  /// collectives is launched, since launching the part issued so far would pair this rank's
  /// collectives with its peers' in another order. (The peers, which issued the whole group,
  /// then wait: the watchdog or a deadline ends that.) With one rank, NCCL runs each
  /// collective as a copy when it is called, so those have run already.
  ~group_guard();
  group_guard(group_guard const&) = delete;
  group_guard& operator=(group_guard const&) = delete;
  /// @brief Calls ncclGroupEnd.
  /// @throws nccl_error, usage_error (called twice)
  void end();

 private:
  bool open_{true};
  int exceptions_at_start_;
};

/// @brief Runs each kind of collective once, eagerly, on a few bytes of scratch memory, so
/// NCCL has made its connections before a capture records the collectives. Call it on every
/// rank (it is collective), outside a capture. An eager run of the real step is the better
/// warm-up where sizes matter (NCCL may pick other algorithms, hence other connections, for
/// large messages).
/// @throws usage_error (called during a capture), nccl_error (aborted communicator, NCCL
/// failure), cuda_error
void warm_up(nccl_comm_view const& comm, cuda::stream_view stream);

/// @brief How long `verify_captured_sequence` waits for the other ranks by default.
inline constexpr std::chrono::milliseconds default_sequence_check_timeout{std::chrono::minutes{5}};

/// @brief After a capture, exchanges the hash and count of the collectives each rank captured
/// (one eager all-gather) and clears the log. Call it on every rank, outside the capture. When
/// the sequences differ, a second all-gather of per-collective prefix hashes finds the first
/// collective where they part (all ranks take this branch together, so none hangs). A rank
/// that does not come (it failed before, say) cannot hold the others: at `timeout`, the
/// communicator is aborted (its kernels exit) and the check throws.
/// @throws nccl_error naming the ranks whose sequence differs, the counts and the first
/// differing collective, or, at the deadline, that the other ranks did not join (the
/// communicator is then aborted); usage_error (called during a capture, non-positive timeout)
void verify_captured_sequence(nccl_comm_view const& comm, cuda::stream_view stream,
                              std::chrono::milliseconds timeout = default_sequence_check_timeout);

}  // namespace graphstep::nccl
