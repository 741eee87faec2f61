// User objects on the simulated device: the destructor runs when the count reaches zero, and
// only once the queued launches holding references have run; no CUDA call may be made from it;
// releasing references nobody owns (undefined behaviour on a GPU) is refused.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/sim/sim.hpp>

#include "sim_test.hpp"

namespace gs = graphstep;

namespace {

int destroyed = 0;
cudaError_t called_from_destructor = cudaSuccess;

void count_destruction(void* /*data*/) {
  ++destroyed;
}

void call_cuda(void* /*data*/) {
  called_from_destructor = cudaDeviceSynchronize();
  ++destroyed;
}

cudaUserObject_t create(cudaHostFn_t destroy, unsigned references = 1) {
  cudaUserObject_t object{};
  SIM_TEST_TRY(
      cudaUserObjectCreate(&object, nullptr, destroy, references, cudaUserObjectNoDestructorSync));
  return object;
}

}  // namespace

TEST(user_objects, the_destructor_waits_for_queued_launches_holding_references) {
  destroyed = 0;
  auto const before = gs::sim::current_execution_mode();
  gs::sim::set_execution_mode(gs::sim::execution_mode::deferred);
  cudaStream_t stream{};
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph{};
  SIM_TEST_TRY(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t node{};
  SIM_TEST_TRY(cudaGraphAddEmptyNode(&node, graph, nullptr, 0));
  cudaUserObject_t const object = create(count_destruction);
  SIM_TEST_TRY(cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove));
  cudaGraphExec_t exec{};
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  EXPECT_EQ(destroyed, 0);  // the queued launch still holds a reference
  SIM_TEST_TRY(cudaStreamSynchronize(stream));
  EXPECT_EQ(destroyed, 1);
  SIM_TEST_TRY(cudaStreamDestroy(stream));
  gs::sim::set_execution_mode(before);
}

TEST(user_objects, a_destructor_cannot_call_cuda) {
  destroyed = 0;
  cudaUserObject_t const object = create(call_cuda);
  SIM_TEST_TRY(cudaUserObjectRelease(object, 1));
  EXPECT_EQ(destroyed, 1);
  EXPECT_EQ(called_from_destructor, cudaErrorNotPermitted);
  static_cast<void>(cudaGetLastError());
}

TEST(user_objects, releasing_references_nobody_owns_is_refused) {
  destroyed = 0;
  cudaUserObject_t const object = create(count_destruction, 2);
  cudaGraph_t graph{};
  SIM_TEST_TRY(cudaGraphCreate(&graph, 0));
  EXPECT_EQ(cudaUserObjectRelease(object, 3), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphReleaseUserObject(graph, object, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphRetainUserObject(graph, object, 3, cudaGraphUserObjectMove),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaGraphRetainUserObject(graph, object, 2, cudaGraphUserObjectMove));
  EXPECT_EQ(cudaUserObjectRelease(object, 1), cudaErrorInvalidValue);  // the graph owns them all
  static_cast<void>(cudaGetLastError());
  cudaGraph_t clone{};
  SIM_TEST_TRY(cudaGraphClone(&clone, graph));  // the clone owns as many again
  SIM_TEST_TRY(cudaGraphDestroy(graph));
  EXPECT_EQ(destroyed, 0);
  SIM_TEST_TRY(cudaGraphDestroy(clone));
  EXPECT_EQ(destroyed, 1);
  // The handle is gone with its last reference.
  EXPECT_EQ(cudaUserObjectRetain(object, 1), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}
