// NCCL on one GPU: a one-rank communicator, every collective eager and captured, the bucketed
// all-reduce, the sequence check and the watchdog. Multi-rank logic is tested on the CPU.

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/diagnostics/verify_replay.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/nccl.hpp>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/error_message.hpp"
#include "common/nccl_test.hpp"
#include "nccl/detail/comm_state.hpp"

namespace gs = graphstep;
namespace gn = graphstep::nccl;

// Ownership traits hold on any machine, GPU or not.
static_assert(
    std::is_same_v<std::unique_ptr<ncclComm, gn::detail::comm_deleter>::pointer, ncclComm_t>);
static_assert(std::is_nothrow_move_constructible_v<gn::nccl_comm>);
static_assert(std::is_nothrow_move_assignable_v<gn::nccl_comm>);
static_assert(!std::is_copy_constructible_v<gn::nccl_comm>);
static_assert(std::is_nothrow_copy_constructible_v<gn::nccl_comm_view>);
static_assert(!std::is_copy_constructible_v<gn::group_guard>);

namespace {

// An all-reduce as a step, and its capture.
struct captured_all_reduce {
  float* recv;
  std::function<void(gs::cuda::stream_view)> step;
  gs::graphs::graph graph;
};

class nccl_test : public gs::testing::nccl_buffer_test {
 protected:
  void SetUp() override {
    gs::testing::nccl_buffer_test::SetUp();
    if (IsSkipped()) return;
    comms_ = gn::nccl_comm::for_local_devices({0});
  }
  // A sum all-reduce of `n` floats (each 1.5) on the first communicator, warmed up and captured.
  captured_all_reduce capture_all_reduce(std::size_t n) {
    float* send = upload(std::vector<float>(n, 1.5F));
    float* recv = upload(std::vector<float>(n, 0.0F));
    auto const comm = comms_.front().view();
    gn::warm_up(comm, *stream_);
    captured_all_reduce out{recv,
                            [send, recv, n, comm](gs::cuda::stream_view s) {
                              gn::all_reduce(buffer(send, n), buffer(recv, n), gn::reduce_op::sum,
                                             comm, s);
                            },
                            {}};
    gs::graphs::capture(out.graph, *stream_, [&] { out.step(*stream_); });
    return out;
  }
  std::vector<gn::nccl_comm> comms_;
};

}  // namespace

TEST_F(nccl_test, one_rank_communicator) {
  auto const view = comms_.front().view();
  EXPECT_EQ(view.rank(), 0);
  EXPECT_EQ(view.size(), 1);
  EXPECT_EQ(view.device(), 0);
  EXPECT_EQ(view.slot(), 0);
  EXPECT_FALSE(view.failure());
  gn::nccl_comm moved = std::move(comms_.front());
  EXPECT_TRUE(comms_.front().empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(comms_.front().get(), nullptr);
  EXPECT_EQ(moved.view().rank(), 0);
  EXPECT_TRUE(moved.view() == view) << "views survive a move";
  EXPECT_THROW(static_cast<void>(comms_.front().view()), gs::usage_error);
  comms_.front() = std::move(moved);
}

// NCCL runs a one-rank collective as a copy: its graph holds a memcpy node, no NCCL kernel, and
// verify_replay checks it like any other step. (A graph holding a collective of several ranks is
// refused: ranks_test, on the simulated device.)
TEST_F(nccl_test, verify_replay_checks_a_one_rank_collective_like_any_step) {
  std::size_t const n = 256;
  captured_all_reduce const reduce = capture_all_reduce(n);
  auto const report = gs::diagnostics::verify_replay(
      *stream_, reduce.step, reduce.graph,
      {gs::diagnostics::watch("recv", {reduce.recv, gs::dtype::float32, n})});
  EXPECT_TRUE(report.identical()) << report.describe();
  EXPECT_EQ(download(reduce.recv, n), std::vector<float>(n, 0.0F)) << "the regions are restored";
}

// ncclLaunchOneRank (NCCL's src/device/onerank.cu) copies with cudaMemcpyAsync unless the
// reduction premultiplies (ncclAvg on floating types, hostToDevRedOp in src/enqueue.cc): a
// captured one-rank collective is a memcpy node, nothing at all when in place, and a kernel of
// NCCL's only for an average.
TEST_F(nccl_test, a_captured_one_rank_collective_is_a_memcpy_node_and_nothing_in_place) {
  std::size_t const n = 256;
  float* send = upload(std::vector<float>(n, 1.5F));
  float* recv = upload(std::vector<float>(n, 0.0F));
  auto const comm = comms_.front().view();
  gn::warm_up(comm, *stream_);
  auto const captured = [&](auto&& body) {
    gs::graphs::graph graph;
    gs::graphs::capture(graph, *stream_, body);
    return graph.node_counts();
  };
  auto const copies = captured([&] {
    gn::all_reduce(buffer(send, n), buffer(recv, n), gn::reduce_op::sum, comm, *stream_);
    gn::all_gather(buffer(send, n), buffer(recv, n), comm, *stream_);
    gn::reduce_scatter(buffer(send, n), buffer(recv, n), gn::reduce_op::max, comm, *stream_);
    gn::broadcast(buffer(send, n), buffer(recv, n), 0, comm, *stream_);
  });
  EXPECT_EQ(copies.memcpy, 4U);
  EXPECT_EQ(copies.kernel, 0U);
  EXPECT_EQ(copies.total, 4U);
  auto const in_place = captured([&] {
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(send, 0, sizeof(float), stream_->get()));  // not empty
    gn::all_reduce(buffer(recv, n), buffer(recv, n), gn::reduce_op::sum, comm, *stream_);
    gn::broadcast(buffer(recv, n), buffer(recv, n), 0, comm, *stream_);
  });
  EXPECT_EQ(in_place.memcpy, 0U);
  EXPECT_EQ(in_place.kernel, 0U);
  EXPECT_EQ(in_place.total, 1U);
  auto const average = captured([&] {
    gn::all_reduce(buffer(send, n), buffer(recv, n), gn::reduce_op::avg, comm, *stream_);
  });
  EXPECT_EQ(average.kernel, 1U);
  EXPECT_EQ(average.memcpy, 0U);
}

TEST_F(nccl_test, one_rank_all_reduce_is_a_copy_eager_and_captured) {
  std::size_t const n = 4096;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) * 0.25F - 100.0F;
  float* send = upload(values);
  float* recv = upload(std::vector<float>(n, 0.0F));
  auto comm = comms_.front().view();
  gn::warm_up(comm, *stream_);
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] {
    gn::all_reduce(buffer(send, n), buffer(recv, n), gn::reduce_op::sum, comm, *stream_);
  });
  EXPECT_EQ(download(recv, n), std::vector<float>(n, 0.0F)) << "capture runs nothing";
  g.replay(*stream_);
  EXPECT_EQ(download(recv, n), values);
  // New inputs, same addresses: the replay reads them.
  for (auto& v : values) v = -v;
  graphstep::testing::copy_to_device(send, values.data(), n * sizeof(float));
  g.replay(*stream_);
  EXPECT_EQ(download(recv, n), values);
  ASSERT_EQ(comm.captured().records().size(), 1U);
  EXPECT_EQ(gn::describe(comm.captured().records()[0]), "all_reduce(float32 x 4096, sum, slot 0)");
  gn::verify_captured_sequence(comm, *stream_);  // one rank: always agrees
  EXPECT_TRUE(comm.captured().records().empty());
}

TEST_F(nccl_test, warm_up_allows_every_kind_to_be_captured_and_refuses_a_capture) {
  std::size_t const n = 64;
  float* x = upload(std::vector<float>(n, 2.0F));
  float* y = upload(std::vector<float>(n, 0.0F));
  auto comm = comms_.front().view();
  gs::graphs::graph_exec inside;
  EXPECT_THROW(gs::graphs::capture(inside, *stream_, [&] { gn::warm_up(comm, *stream_); }),
               gs::usage_error);
  gn::warm_up(comm, *stream_);
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] {
    gn::all_reduce(buffer(x, n), buffer(y, n), gn::reduce_op::max, comm, *stream_);
    gn::reduce_scatter(buffer(y, n), buffer(x, n), gn::reduce_op::min, comm, *stream_);
    gn::all_gather(buffer(x, n), buffer(y, n), comm, *stream_);
    gn::broadcast(buffer(y, n), buffer(x, n), 0, comm, *stream_);
  });
  EXPECT_EQ(comm.captured().records().size(), 4U);
  gn::verify_captured_sequence(comm, *stream_);
  g.replay(*stream_);
  EXPECT_EQ(download(x, n), std::vector<float>(n, 2.0F));
}

TEST_F(nccl_test, collectives_on_one_rank_copy_and_are_checked) {
  std::size_t const n = 1000;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);
  float* send = upload(values);
  float* recv = upload(std::vector<float>(n, -1.0F));
  auto comm = comms_.front().view();
  for (auto op : {gn::reduce_op::sum, gn::reduce_op::avg, gn::reduce_op::max, gn::reduce_op::min}) {
    gn::all_reduce(buffer(send, n), buffer(recv, n), op, comm, *stream_);
    EXPECT_EQ(download(recv, n), values);
  }
  gn::reduce_scatter(buffer(send, n), buffer(recv, n), gn::reduce_op::sum, comm, *stream_);
  gn::all_gather(buffer(send, n), buffer(recv, n), comm, *stream_);
  gn::broadcast(buffer(send, n), buffer(recv, n), 0, comm, *stream_);
  EXPECT_EQ(download(recv, n), values);
  EXPECT_THROW(
      gn::all_reduce(buffer(send, n), buffer(recv, n - 1), gn::reduce_op::sum, comm, *stream_),
      gs::usage_error);
  EXPECT_THROW(gn::broadcast(buffer(send, n), buffer(recv, n), 1, comm, *stream_), gs::usage_error);
  EXPECT_THROW(gn::all_reduce({send, gs::dtype::float32, n}, {recv, gs::dtype::float16, 2 * n},
                              gn::reduce_op::sum, comm, *stream_),
               gs::usage_error);
}

// Integer spans (token counts, flags) go to NCCL as its integer types: one rank copies each
// int32 element's bytes, and a uint8 span moves as many bytes as it has elements, no more.
TEST_F(nccl_test, integer_collectives_on_one_rank_copy_exactly_their_elements) {
  std::size_t const n = 64;
  std::vector<float> pattern(n);
  for (std::size_t i = 0; i < n; ++i) pattern[i] = static_cast<float>(i) + 0.25F;
  float* send = upload(pattern);
  std::vector<float> const cleared(n, -1.0F);
  float* recv = upload(cleared);
  auto comm = comms_.front().view();
  gn::all_reduce({send, gs::dtype::int32, n}, {recv, gs::dtype::int32, n}, gn::reduce_op::sum, comm,
                 *stream_);
  EXPECT_EQ(download(recv, n), pattern);

  graphstep::testing::copy_to_device(recv, cleared.data(), n * sizeof(float));
  std::size_t const bytes = 10;
  gn::all_reduce({send, gs::dtype::uint8, bytes}, {recv, gs::dtype::uint8, bytes},
                 gn::reduce_op::max, comm, *stream_);
  std::vector<float> const got = download(recv, n);
  std::vector<unsigned char> want(n * sizeof(float));
  std::memcpy(want.data(), cleared.data(), want.size());
  std::memcpy(want.data(), pattern.data(), bytes);
  std::vector<unsigned char> have(n * sizeof(float));
  std::memcpy(have.data(), got.data(), have.size());
  EXPECT_EQ(have, want);
}

TEST_F(nccl_test, a_collective_must_run_eagerly_before_it_is_captured) {
  std::size_t const n = 256;
  float* x = upload(std::vector<float>(n, 1.0F));
  auto comm = comms_.front().view();
  gs::graphs::graph_exec g;
  EXPECT_THROW(
      gs::graphs::capture(g, *stream_,
                          [&] { gn::all_gather(buffer(x, n), buffer(x, n), comm, *stream_); }),
      gs::usage_error);
  gn::all_gather(buffer(x, n), buffer(x, n), comm, *stream_);  // warm-up
  gs::graphs::capture(g, *stream_,
                      [&] { gn::all_gather(buffer(x, n), buffer(x, n), comm, *stream_); });
  EXPECT_EQ(comm.captured().records().size(), 1U);
  gn::verify_captured_sequence(comm, *stream_);
  EXPECT_TRUE(comm.captured().records().empty());
  g.replay(*stream_);
  EXPECT_EQ(download(x, n), std::vector<float>(n, 1.0F));
}

TEST_F(nccl_test, bucketed_all_reduce_captured_equals_eager) {
  std::vector<std::size_t> const grads{3000, 1000, 70000, 5};
  auto plan = gn::plan_buckets(gs::dtype::float32, grads, 100000, 8192, 256);
  ASSERT_GT(plan.buckets.size(), 1U);
  std::size_t const n = plan.buffer_count;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 97) * 0.5F;
  float* flat = upload(values);
  auto comm = comms_.front().view();
  gn::bucketed_all_reduce reducer{comm, {flat, gs::dtype::float32, n}, plan};
  reducer.all(*stream_);                 // eager, also the warm-up
  EXPECT_EQ(download(flat, n), values);  // the average over one rank
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] {
    for (std::size_t b = plan.buckets.size(); b-- > 0;) reducer.bucket_ready(b, *stream_);
    reducer.join(*stream_);
  });
  EXPECT_GE(g.node_counts().total, plan.buckets.size());
  g.replay(*stream_);
  EXPECT_EQ(download(flat, n), values);
}

// The gradient buffer is one span: too small for the plan, empty, null, or of another dtype than
// the plan's, it is refused before anything is launched.
TEST_F(nccl_test, bucketed_all_reduce_refuses_a_buffer_that_does_not_fit_its_plan) {
  auto const plan = gn::plan_buckets(gs::dtype::float32, {1024, 1024}, 4096, 4096, 256);
  std::size_t const n = plan.buffer_count;
  float* flat = upload(std::vector<float>(n, 1.0F));
  auto const comm = comms_.front().view();
  auto const refused = [&](gs::device_span gradients, gn::bucket_plan const& p) {
    return gs::testing::message_of([&] { gn::bucketed_all_reduce{comm, gradients, p}; });
  };
  EXPECT_NE(refused({flat, gs::dtype::float32, n - 1}, plan)
                .find("holds " + std::to_string(n - 1) + " elements but the plan needs " +
                      std::to_string(n)),
            std::string::npos);
  EXPECT_NE(
      refused({flat, gs::dtype::float32, 0}, plan).find("the gradient buffer holds no element"),
      std::string::npos);
  EXPECT_NE(refused({nullptr, gs::dtype::float32, n}, plan).find("is a null pointer"),
            std::string::npos);
  auto const halves = gn::plan_buckets(gs::dtype::bfloat16, {1024, 1024}, 4096, 4096, 256);
  EXPECT_NE(refused({flat, gs::dtype::float32, n}, halves)
                .find("but the plan is of bfloat16; plan the buckets for the gradients' dtype"),
            std::string::npos);
}

// A bucket made ready ahead of one that never is cannot be reduced (it would pair with another
// bucket on the other ranks): the join says so, and the next step starts afresh.
TEST_F(nccl_test, bucketed_all_reduce_join_names_a_bucket_left_waiting) {
  auto plan = gn::plan_buckets(gs::dtype::float32, {1024, 1024, 1024}, 4096, 4096, 256);
  ASSERT_EQ(plan.buckets.size(), 3U);
  std::size_t const n = plan.buffer_count;
  float* flat = upload(std::vector<float>(n, 2.0F));
  gn::bucketed_all_reduce reducer{comms_.front().view(), {flat, gs::dtype::float32, n}, plan};
  reducer.bucket_ready(0, *stream_);
  reducer.bucket_ready(2, *stream_);
  std::string const what = gs::testing::message_of([&] { reducer.join(*stream_); });
  EXPECT_NE(what.find("bucket 2 was made ready but never reduced: it waits for bucket 1"),
            std::string::npos)
      << what;
  reducer.all(*stream_);  // every bucket again, in order
  EXPECT_EQ(download(flat, n), std::vector<float>(n, 2.0F));
}

TEST_F(nccl_test, watchdog_reports_a_step_past_its_deadline) {
  auto now = std::chrono::steady_clock::now();
  gn::watchdog dog{comms_.front(), std::chrono::milliseconds{100}, [&] { return now; }};
  EXPECT_TRUE(dog.poll());  // nothing outstanding
  // A step that cannot finish until the test releases it.
  gs::testing::stalled_stream blocked;
  dog.launched(blocked.get(), 7);
  EXPECT_FALSE(dog.poll());
  now += std::chrono::milliseconds{150};
  try {
    static_cast<void>(dog.poll());
    FAIL() << "no timeout";
  } catch (gs::nccl_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("step 7"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(comms_.front().view().aborted());
  blocked.finish();
  float* x = upload({1.0F});
  try {
    gn::all_reduce(buffer(x, 1), buffer(x, 1), gn::reduce_op::sum, comms_.front().view(), *stream_);
    FAIL() << "a collective on an aborted communicator ran";
  } catch (gs::nccl_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("step 7"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dog.check(), gs::nccl_error);
  EXPECT_THROW(dog.launched(*stream_, 8), gs::nccl_error);
}

TEST_F(nccl_test, background_watchdog_aborts_a_hung_step_and_the_training_thread_throws) {
  std::atomic<std::int64_t> now_ms{0};
  gn::watchdog_options options;
  options.timeout = std::chrono::milliseconds{100};
  options.background = true;
  options.poll_interval = std::chrono::milliseconds{5};
  options.clock = [&] {
    return std::chrono::steady_clock::time_point{std::chrono::milliseconds{now_ms.load()}};
  };
  gn::watchdog dog{comms_.front(), options};
  gs::testing::stalled_stream blocked;
  dog.launched(blocked.get(), 3);
  std::this_thread::sleep_for(std::chrono::milliseconds{50});
  EXPECT_NO_THROW(dog.check()) << "not late yet";
  EXPECT_EQ(dog.outstanding_step(), 3);
  now_ms = 250;  // the step is now 250 ms old
  for (int i = 0; i < 400 && !comms_.front().view().aborted(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  EXPECT_TRUE(comms_.front().view().aborted()) << "the background thread did not abort";
  auto const why = comms_.front().view().failure();
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("rank 0: step 3 has not finished after 250 ms"), std::string::npos) << *why;
  EXPECT_NE(why->find("NCCL's asynchronous state"), std::string::npos) << *why;
  try {
    dog.check();
    FAIL() << "no error on the training thread";
  } catch (gs::nccl_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("step 3"), std::string::npos) << e.what();
  }
  blocked.finish();
}

TEST_F(nccl_test, background_watchdog_does_not_break_a_capture_on_another_thread) {
  std::size_t const n = 256;
  float* x = upload(std::vector<float>(n, 1.0F));
  auto comm = comms_.front().view();
  gn::warm_up(comm, *stream_);
  gn::watchdog_options options;
  options.background = true;
  options.poll_interval = std::chrono::milliseconds{1};
  gn::watchdog dog{comm, options};
  // A step outstanding on another stream keeps the thread querying events during the capture.
  // It reduces a buffer of its own: nothing orders it before the replays, which write x.
  gs::cuda::stream other;
  float* outstanding = upload(std::vector<float>(n, 1.0F));
  gn::all_reduce(buffer(outstanding, n), buffer(outstanding, n), gn::reduce_op::sum, comm, other);
  dog.launched(other, 1);
  for (int round = 0; round < 20; ++round) {
    gs::graphs::graph_exec g;
    gs::graphs::capture(g, *stream_, [&] {
      gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::avg, comm, *stream_);
      std::this_thread::sleep_for(std::chrono::milliseconds{2});  // let the thread poll
    });
    g.replay(*stream_);
    // The strictest mode: any unsafe call from another thread would end this capture.
    gs::graphs::graph_exec strict;
    float* scratch = upload(std::vector<float>(n, 0.0F));
    gs::graphs::capture(
        strict, *stream_,
        [&] {
          GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(scratch, 0, n * sizeof(float), stream_->get()));
          std::this_thread::sleep_for(std::chrono::milliseconds{2});
        },
        gs::graphs::capture_options{gs::graphs::capture_mode::global});
    strict.replay(*stream_);
  }
  dog.wait();
  EXPECT_FALSE(comm.aborted());
  EXPECT_EQ(download(x, n), std::vector<float>(n, 1.0F));
}

// ncclCommAbort and ncclCommDestroy on a blocking communicator wait until every graph that
// captured its collectives is destroyed (NCCL's persistent references): an abort from a watchdog
// or an owner released before the graphs must not wait for that.
TEST_F(nccl_test, abort_and_release_return_while_a_graph_holds_the_collectives) {
  std::size_t const n = 64;
  float* x = upload(std::vector<float>(n, 2.0F));
  auto const comm = comms_.front().view();
  gn::warm_up(comm, *stream_);
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] {
    gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::sum, comm, *stream_);
  });
  g.replay(*stream_);
  auto returns_in_time = [](std::function<void()> call) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread{[call = std::move(call), done] {
      call();
      *done = true;
    }}.detach();  // left behind if it hangs, so that the test reports instead of hanging
    for (int i = 0; i < 500 && !*done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    return done->load();
  };
  EXPECT_TRUE(returns_in_time([&] { comms_.front().abort(); })) << "the abort waited for the graph";
  EXPECT_TRUE(comm.aborted());
  EXPECT_TRUE(returns_in_time([&] { comms_.clear(); })) << "the release waited for the graph";
  stream_->synchronize();
}
