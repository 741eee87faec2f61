// nccl_comm_view over a raw ncclComm_t that the test makes and destroys itself, as a program that
// built its communicator without graphstep would: collectives eager and captured, the sequence
// check, the bucketed all-reduce and the watchdog through such a view, and one state shared
// with an owning nccl_comm of the same handle.

#include <cuda_runtime_api.h>

#include <atomic>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/nccl.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/nccl_test.hpp"

namespace gs = graphstep;
namespace gn = graphstep::nccl;

namespace {

// A one-rank communicator on device 0 that the program owns, not graphstep. Declared before
// the views of it, so they are gone when it is destroyed.
struct user_communicator {
  ncclComm_t handle{};
  user_communicator() {
    int const device = 0;
    GRAPHSTEP_NCCL_TRY(ncclCommInitAll(&handle, 1, &device));
  }
  ~user_communicator() {
    if (handle != nullptr) static_cast<void>(ncclCommDestroy(handle));
  }
  user_communicator(user_communicator const&) = delete;
  user_communicator& operator=(user_communicator const&) = delete;
  /// graphstep freed it (ncclCommAbort, or an nccl_comm that adopted it): not ours to destroy.
  void forget() noexcept { handle = nullptr; }
};

using raw_view_test = gs::testing::nccl_buffer_test;

}  // namespace

TEST_F(raw_view_test, runs_every_collective_eager_and_captured) {
  user_communicator user;
  gn::nccl_comm_view const view{user.handle};
  EXPECT_EQ(view.get(), user.handle);
  EXPECT_EQ(view.rank(), 0);
  EXPECT_EQ(view.size(), 1);
  EXPECT_EQ(view.device(), 0);
  EXPECT_EQ(view.slot(), 0);
  EXPECT_FALSE(view.aborted());
  EXPECT_FALSE(view.failure());
  std::size_t const n = 512;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) - 7.5F;
  float* x = upload(values);
  float* y = upload(std::vector<float>(n, 0.0F));
  gn::warm_up(view, *stream_);
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] {
    gn::all_reduce(buffer(x, n), buffer(y, n), gn::reduce_op::sum, view, *stream_);
    gn::reduce_scatter(buffer(y, n), buffer(x, n), gn::reduce_op::max, view, *stream_);
    gn::all_gather(buffer(x, n), buffer(y, n), view, *stream_);
    gn::broadcast(buffer(y, n), buffer(x, n), 0, view, *stream_);
  });
  ASSERT_EQ(view.captured().records().size(), 4U);
  EXPECT_EQ(gn::describe(view.captured().records()[1]),
            "reduce_scatter(float32 x 512, max, slot 0)");
  gn::verify_captured_sequence(view, *stream_);
  EXPECT_TRUE(view.captured().records().empty());
  g.replay(*stream_);
  EXPECT_EQ(download(x, n), values);
  EXPECT_EQ(download(y, n), values);
  EXPECT_FALSE(view.aborted());
}

TEST_F(raw_view_test, an_owner_and_a_raw_view_of_its_handle_share_one_state) {
  auto comms = gn::nccl_comm::for_local_devices({0});
  gn::nccl_comm& owner = comms.front();
  gn::nccl_comm_view const raw{owner.get()};
  EXPECT_TRUE(raw == owner.view());
  EXPECT_FALSE(raw != owner.view());
  std::size_t const n = 64;
  float* x = upload(std::vector<float>(n, 3.0F));
  gn::warm_up(raw, *stream_);  // warms the owner's communicator: one state
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] {
    gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::avg, owner.view(), *stream_);
  });
  EXPECT_EQ(raw.captured().records().size(), 1U) << "the raw view sees the owner's log";
  gn::verify_captured_sequence(raw, *stream_);
  EXPECT_TRUE(owner.view().captured().records().empty());
  g.replay(*stream_);
  EXPECT_EQ(download(x, n), std::vector<float>(n, 3.0F));

  owner.abort();
  EXPECT_TRUE(raw.aborted());
  EXPECT_EQ(raw.get(), nullptr);
  ASSERT_TRUE(raw.failure());
  EXPECT_EQ(*raw.failure(), *owner.view().failure());
  try {
    gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::sum, raw, *stream_);
    FAIL() << "a collective ran on an aborted communicator";
  } catch (gs::nccl_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("aborted by nccl_comm::abort"), std::string::npos)
        << e.what();
  }
}

TEST_F(raw_view_test, adopting_a_viewed_handle_keeps_the_views_state) {
  user_communicator user;
  std::size_t const n = 32;
  float* x = upload(std::vector<float>(n, 1.0F));
  gn::nccl_comm_view const view{user.handle};
  gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::sum, view, *stream_);  // warm-up
  {
    gn::nccl_comm owner = gn::nccl_comm::adopt(user.handle, gn::nccl_comm_options{3});
    user.forget();  // the nccl_comm destroys it now
    EXPECT_TRUE(owner.view() == view);
    EXPECT_EQ(view.slot(), 3);
    EXPECT_THROW(static_cast<void>(gn::nccl_comm::adopt(owner.get())), gs::usage_error)
        << "a second owner would destroy it twice";
    EXPECT_EQ(owner.get(), view.get()) << "the refused adoption leaves the handle alone";
    gs::graphs::graph_exec g;
    gs::graphs::capture(g, *stream_, [&] {  // warmed up through the view
      gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::sum, owner, *stream_);
    });
    ASSERT_EQ(view.captured().records().size(), 1U);
    EXPECT_EQ(view.captured().records()[0].slot, 3);
    gn::verify_captured_sequence(view, *stream_);
    g.replay(*stream_);
    EXPECT_EQ(download(x, n), std::vector<float>(n, 1.0F));
  }
  // The owner destroyed the communicator; the view left over refuses instead of reaching NCCL.
  EXPECT_EQ(view.get(), nullptr);
  EXPECT_FALSE(view.aborted());
  EXPECT_THROW(gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::sum, view, *stream_),
               gs::usage_error);
}

TEST_F(raw_view_test, the_state_of_a_raw_handle_lasts_as_long_as_a_view_of_it) {
  user_communicator user;
  std::size_t const n = 16;
  float* x = upload(std::vector<float>(n, 2.0F));
  {
    gn::nccl_comm_view const first{user.handle};
    gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::sum, first, *stream_);
    gn::nccl_comm_view const second{user.handle};
    EXPECT_TRUE(second == first) << "views made while one is alive share its state";
    gs::graphs::graph_exec g;
    gs::graphs::capture(g, *stream_, [&] {
      gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::sum, second, *stream_);
    });
    EXPECT_EQ(first.captured().records().size(), 1U);
  }
  // Every view is gone, and their state with them: a new view starts afresh.
  gn::nccl_comm_view const later{user.handle};
  EXPECT_TRUE(later.captured().records().empty());
  gs::graphs::graph_exec g;
  EXPECT_THROW(
      gs::graphs::capture(
          g, *stream_,
          [&] { gn::all_reduce(buffer(x, n), buffer(x, n), gn::reduce_op::sum, later, *stream_); }),
      gs::usage_error);
}

TEST_F(raw_view_test, views_made_on_several_threads_share_one_state) {
  user_communicator user;
  std::vector<std::optional<gn::nccl_comm_view>> views(8);
  std::vector<std::thread> threads;
  threads.reserve(views.size());
  for (auto& slot : views) {
    threads.emplace_back([&slot, &user] {
      for (int i = 0; i < 100; ++i) slot.emplace(user.handle);
    });
  }
  for (auto& t : threads) t.join();
  for (auto const& view : views) EXPECT_TRUE(*view == *views.front());
}

TEST_F(raw_view_test, bucketed_all_reduce_takes_a_raw_view) {
  user_communicator user;
  gn::nccl_comm_view const view{user.handle};
  auto const plan = gn::plan_buckets(gs::dtype::float32, {4000, 300, 20000}, 40000, 8192, 256);
  ASSERT_GT(plan.buckets.size(), 1U);
  std::size_t const n = plan.buffer_count;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 31) * 0.25F;
  float* flat = upload(values);
  gn::bucketed_all_reduce reducer{view, {flat, gs::dtype::float32, n}, plan};
  reducer.all(*stream_);  // eager, also the warm-up
  EXPECT_EQ(download(flat, n), values);
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] { reducer.all(*stream_); });
  EXPECT_EQ(view.captured().records().size(), plan.buckets.size());
  gn::verify_captured_sequence(view, *stream_);
  g.replay(*stream_);
  EXPECT_EQ(download(flat, n), values);
}

TEST_F(raw_view_test, a_watchdog_on_a_raw_view_aborts_the_hung_communicator) {
  user_communicator user;
  gn::nccl_comm_view const view{user.handle};
  auto now = std::chrono::steady_clock::now();
  gn::watchdog dog{view, std::chrono::milliseconds{100}, [&] { return now; }};
  gs::testing::stalled_stream blocked;
  dog.launched(blocked.get(), 5);
  EXPECT_FALSE(dog.poll());
  now += std::chrono::milliseconds{150};
  EXPECT_THROW(static_cast<void>(dog.poll()), gs::nccl_error);
  // ncclCommAbort freed the program's communicator: it must not destroy it again.
  EXPECT_TRUE(view.aborted());
  EXPECT_EQ(view.get(), nullptr);
  user.forget();
  ASSERT_TRUE(view.failure());
  EXPECT_NE(view.failure()->find("step 5"), std::string::npos) << *view.failure();
  EXPECT_THROW(dog.check(), gs::nccl_error);
  blocked.finish();
}
