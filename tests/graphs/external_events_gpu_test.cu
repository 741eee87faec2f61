// External events: a graph that signals another graph and eager work at every replay, a graph
// that waits for an event recorded outside it, and timing events inside a graph.

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/external_events.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

__global__ void increment_kernel(std::int32_t* x) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *x += 1;
}

__global__ void copy_kernel(std::int32_t* to, std::int32_t const* from) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *to = *from;
}

class external_events_test : public gs::testing::stream_pool_test {
 protected:
  std::int32_t read(std::int32_t const* device) {
    std::int32_t value = 0;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(&value, device, sizeof value, cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return value;
  }
};

}  // namespace

// Graph A increments x and signals; graph B, replayed on another stream, waits for that signal
// and copies x. With the work queued, nothing but the event orders B after A: the race checker
// of the simulated device reports B's read of x otherwise.
TEST_F(external_events_test, one_graph_signals_another_on_another_stream_at_every_replay) {
  gs::testing::queued_work const queued;
  auto* x = blocks_->get<std::int32_t>(1);
  auto* y = blocks_->get<std::int32_t>(1);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(std::int32_t), stream_->get()));
  stream_->synchronize();
  gs::cuda::event done;
  gs::cuda::stream other;
  gs::graphs::graph_exec producer;
  gs::graphs::capture(producer, *stream_, *pool_, [&] {
    increment_kernel<<<1, 32, 0, stream_->get()>>>(x);
    gs::graphs::record_external(done, *stream_);
  });
  gs::graphs::graph_exec consumer;
  gs::graphs::capture(consumer, other, [&] {
    gs::graphs::wait_external(other, done);
    copy_kernel<<<1, 32, 0, other.get()>>>(y, x);
  });
  EXPECT_EQ(producer.node_counts().event_record, 1U);
  EXPECT_EQ(consumer.node_counts().event_wait, 1U);
  for (std::int32_t k = 1; k <= 3; ++k) {
    producer.replay(*stream_);
    consumer.replay(other);
    // The producer's next replay writes x again: it must follow the consumer's read.
    gs::graphs::record_external(done, other);
    gs::graphs::wait_external(*stream_, done);
  }
  other.synchronize();
  EXPECT_EQ(read(y), 3);
}

// Eager work on another stream waits for the point of the replay where the event was recorded.
TEST_F(external_events_test, eager_work_waits_for_an_event_a_replay_records) {
  gs::testing::queued_work const queued;
  auto* x = blocks_->get<std::int32_t>(1);
  auto* y = blocks_->get<std::int32_t>(1);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(std::int32_t), stream_->get()));
  stream_->synchronize();
  gs::cuda::event done;
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    increment_kernel<<<1, 32, 0, stream_->get()>>>(x);
    gs::graphs::record_external(done, *stream_);
  });
  gs::cuda::stream eager;
  step.replay(*stream_);
  eager.view().wait(done);
  copy_kernel<<<1, 32, 0, eager.get()>>>(y, x);
  eager.synchronize();
  stream_->synchronize();
  EXPECT_EQ(read(y), 1);
  EXPECT_TRUE(done.query());
}

// PyTorch's test_graph_external_wait_and_record: an event recorded as the last work of a graph
// means, once it has completed, that the replay's stream is done, so a replay adds no work of its
// own after the launch (not even with a pool, whose replays it orders). On the simulated device
// in every execution mode, interleaved with several seeds; on a GPU as it runs.
TEST_F(external_events_test, an_event_recorded_last_in_a_graph_means_its_stream_is_done) {
  auto* x = blocks_->get<std::int32_t>(1);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(std::int32_t), stream_->get()));
  stream_->synchronize();
  gs::cuda::event started;
  gs::cuda::event ended;
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    gs::graphs::record_external(started, *stream_);
    increment_kernel<<<1, 32, 0, stream_->get()>>>(x);
    gs::graphs::record_external(ended, *stream_);
  });
  std::int32_t replays = 0;
  auto const replay_and_check = [&](char const* mode) {
    for (int i = 0; i < 4; ++i) {
      step.replay(*stream_);
      ++replays;
      ended.synchronize();
      EXPECT_TRUE(started.query()) << mode;
      EXPECT_EQ(cudaStreamQuery(stream_->get()), cudaSuccess)
          << mode << ", replay " << i << ": the stream still holds work after the graph's end";
      static_cast<void>(cudaGetLastError());
    }
  };
#if defined(GRAPHSTEP_CUDA_SIM)
  struct restore_mode {
    gs::sim::execution_mode previous = gs::sim::current_execution_mode();
    ~restore_mode() { gs::sim::set_execution_mode(previous); }
  } const restore;
  gs::sim::set_execution_mode(gs::sim::execution_mode::immediate);
  replay_and_check("immediate");
  gs::sim::set_execution_mode(gs::sim::execution_mode::deferred);
  replay_and_check("deferred");
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    gs::sim::set_execution_mode(gs::sim::execution_mode::interleaved, seed);
    replay_and_check("interleaved");
  }
#else
  replay_and_check("on the device");
#endif
  EXPECT_EQ(read(x), replays);
}

TEST_F(external_events_test, timing_events_recorded_in_a_graph_time_each_replay) {
  auto* x = blocks_->get<std::int32_t>(1);
  gs::cuda::timed_event start;
  gs::cuda::timed_event end;
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    gs::graphs::record_external(start, *stream_);
    for (int i = 0; i < 8; ++i) increment_kernel<<<1, 32, 0, stream_->get()>>>(x);
    gs::graphs::record_external(end, *stream_);
  });
  // Never recorded yet: CUDA has no time to give.
  EXPECT_THROW(static_cast<void>(gs::cuda::timed_event::elapsed_ms(start, end)), gs::cuda_error);
  for (int replay = 0; replay < 2; ++replay) {
    step.replay(*stream_);
    stream_->synchronize();
    float const ms = gs::cuda::timed_event::elapsed_ms(start, end);
    EXPECT_GE(ms, 0.0F);
  }
}

TEST_F(external_events_test, outside_a_capture_they_are_a_plain_record_and_wait) {
  auto* x = blocks_->get<std::int32_t>(1);
  auto* y = blocks_->get<std::int32_t>(1);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(std::int32_t), stream_->get()));
  gs::cuda::event done;
  increment_kernel<<<1, 32, 0, stream_->get()>>>(x);
  gs::graphs::record_external(done, *stream_);
  gs::cuda::stream other;
  gs::graphs::wait_external(other, done);
  copy_kernel<<<1, 32, 0, other.get()>>>(y, x);
  other.synchronize();
  EXPECT_EQ(read(y), 1);
  gs::cuda::event moved = std::move(done);
  EXPECT_PRED2(gs::testing::contains, gs::testing::message_of([&] {
                 gs::graphs::record_external(done, other);
               }),  // NOLINT
               "moved from");
}
