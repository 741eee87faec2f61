// What code issuing work into a capture notes about it (capture_ref) travels with the graph that
// capture makes, and only with it: a capture on another thread, open at the same time, has its
// own facts, and is discarded or kept on its own.

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <future>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <mutex>
#include <stdexcept>

#include "common/gpu_test.hpp"

namespace gs = graphstep;
using gs::graphs::capture_ref;

namespace {

constexpr std::size_t bytes = 4096;

class capture_facts_test : public gs::testing::gpu_test {};

// Two threads meet here, again and again; a thread that never comes fails the wait instead of
// hanging the test.
class rendezvous {
 public:
  [[nodiscard]] bool arrive_and_wait() {
    std::unique_lock lock{mutex_};
    int const generation = generation_;
    if (++arrived_ == 2) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return true;
    }
    return changed_.wait_for(lock, std::chrono::seconds{60},
                             [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_{0};
  int generation_{0};
};

struct capture_outcome {
  capture_ref ref;
  bool made_a_graph{false};
  bool graph_waits_for_other_processes{false};
  bool met{true};
};

// Captures a memset on a stream of its own, meeting the other thread while both captures are
// open: once before noting (or not), once after, so the other capture has seen the note land.
capture_outcome capture_meeting(rendezvous& meeting, bool note, bool fail) {
  capture_outcome outcome;
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  void* const block = pool.allocate(bytes, stream);
  gs::graphs::graph_exec exec;
  try {
    gs::graphs::capture(exec, stream, pool, [&] {
      GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(block, 1, bytes, stream.get()));
      outcome.ref = capture_ref::of(stream);
      outcome.met = meeting.arrive_and_wait() && outcome.met;
      if (note) outcome.ref.note_waits_for_other_processes();
      outcome.met = meeting.arrive_and_wait() && outcome.met;
      if (fail) throw std::runtime_error{"the step failed"};
    });
  } catch (std::runtime_error const&) {
  }
  outcome.made_a_graph = !exec.empty();
  if (outcome.made_a_graph) {
    outcome.graph_waits_for_other_processes = exec.source().identity().waits_for_other_processes;
  }
  pool.deallocate(block, stream);
  stream.synchronize();
  return outcome;
}

}  // namespace

TEST_F(capture_facts_test, a_fact_noted_in_a_capture_travels_with_its_graph) {
  gs::cuda::stream stream;
  gs::cuda::stream side;
  gs::memory::memory_pool pool;
  void* const block = pool.allocate(bytes, stream);
  EXPECT_FALSE(capture_ref::of(stream)) << "a stream that is not capturing is in no capture";
  capture_ref{}.note_waits_for_other_processes();  // an empty reference ignores it
  EXPECT_FALSE(capture_ref{}.abandoned());

  capture_ref noted;
  capture_ref from_the_side;
  gs::graphs::graph_exec waits;
  {
    gs::graphs::capture_scope scope{waits, stream, pool};
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(block, 1, bytes, stream.get()));
    noted = capture_ref::of(stream);
    scope.fork(side);
    from_the_side = capture_ref::of(side);  // a forked stream is in the same capture
    from_the_side.note_waits_for_other_processes();
    scope.join(side);
    scope.end();
  }
  ASSERT_TRUE(noted);
  ASSERT_TRUE(from_the_side);
  EXPECT_TRUE(waits.source().identity().waits_for_other_processes);
  EXPECT_FALSE(noted.abandoned());

  gs::graphs::graph plain;
  gs::graphs::capture(plain, stream, pool,
                      [&] { GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(block, 2, bytes, stream.get())); });
  EXPECT_FALSE(plain.identity().waits_for_other_processes) << "the note stayed with its graph";
  // The executable of a graph carries it too.
  EXPECT_FALSE(plain.instantiate().source().identity().waits_for_other_processes);

  capture_ref discarded;
  gs::graphs::graph_exec failed;
  EXPECT_THROW(gs::graphs::capture(failed, stream, pool,
                                   [&] {
                                     discarded = capture_ref::of(stream);
                                     throw std::runtime_error{"the step failed"};
                                   }),
               std::runtime_error);
  ASSERT_TRUE(discarded);
  EXPECT_TRUE(discarded.abandoned());
  EXPECT_FALSE(noted.abandoned()) << "another capture's discard is not this one's";

  // A capture no capture_scope made (cudaStreamBeginCapture called directly) has no reference.
  GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  bool const found = static_cast<bool>(capture_ref::of(stream));
  cudaGraph_t raw = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(stream.get(), &raw));
  GRAPHSTEP_CUDA_TRY(cudaGraphDestroy(raw));
  EXPECT_FALSE(found);
  pool.deallocate(block, stream);
  stream.synchronize();
}

TEST_F(capture_facts_test, two_captures_on_two_threads_do_not_see_each_others_facts) {
  rendezvous meeting;
  {
    // One notes, the other does not; both make graphs.
    auto noting =
        std::async(std::launch::async, [&] { return capture_meeting(meeting, true, false); });
    capture_outcome const silent = capture_meeting(meeting, false, false);
    capture_outcome const noted = noting.get();
    ASSERT_TRUE(noted.met && silent.met) << "a thread did not reach the other's capture";
    ASSERT_TRUE(noted.ref && silent.ref);
    ASSERT_TRUE(noted.made_a_graph && silent.made_a_graph);
    EXPECT_TRUE(noted.graph_waits_for_other_processes);
    EXPECT_FALSE(silent.graph_waits_for_other_processes);
    EXPECT_FALSE(noted.ref.abandoned());
    EXPECT_FALSE(silent.ref.abandoned());
  }
  {
    // One notes and fails, the other makes its graph meanwhile.
    auto failing =
        std::async(std::launch::async, [&] { return capture_meeting(meeting, true, true); });
    capture_outcome const kept = capture_meeting(meeting, false, false);
    capture_outcome const discarded = failing.get();
    ASSERT_TRUE(kept.met && discarded.met) << "a thread did not reach the other's capture";
    EXPECT_FALSE(discarded.made_a_graph);
    EXPECT_TRUE(discarded.ref.abandoned());
    ASSERT_TRUE(kept.made_a_graph);
    EXPECT_FALSE(kept.ref.abandoned());
    EXPECT_FALSE(kept.graph_waits_for_other_processes);
  }
}
