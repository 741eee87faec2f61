// What the simulated device cannot run from a node's parameters, and says so: a kernel no
// <<<...>>> launch has run (it knows a kernel from its first launch), arguments packed in
// `extra`, CUDA array operands of a memcpy node, and kernel node attributes it does not keep.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "sim_test.hpp"

namespace {

__global__ void never_launched(int* value) {
  *value = 1;
}

__global__ void launched(int* value) {
  *value = 2;
}

class graph_nodes_refused : public ::testing::Test {
 protected:
  void SetUp() override {
    SIM_TEST_TRY(cudaMalloc(&value_, sizeof(int)));
    launched<<<1, 1>>>(value_);
    SIM_TEST_TRY(cudaDeviceSynchronize());
    SIM_TEST_TRY(cudaGraphCreate(&graph_, 0));
  }
  void TearDown() override {
    SIM_TEST_EXPECT_SUCCESS(cudaGraphDestroy(graph_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(value_));
  }
  cudaKernelNodeParams params_of(void* func) {
    cudaKernelNodeParams params{};
    params.func = func;
    params.gridDim = dim3{1};
    params.blockDim = dim3{1};
    params.kernelParams = arguments_;
    return params;
  }

  int* value_{};
  void* arguments_[1] = {&value_};
  cudaGraph_t graph_{};
};

}  // namespace

TEST_F(graph_nodes_refused, a_kernel_never_launched_is_an_invalid_device_function_and_said_so) {
  cudaKernelNodeParams const params = params_of(reinterpret_cast<void*>(&never_launched));
  cudaGraphNode_t node{};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph_, nullptr, 0, &params),
            cudaErrorInvalidDeviceFunction);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("knows a kernel from its first launch"), std::string::npos) << said;
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cudaKernelNodeParams null_function = params;
  null_function.func = nullptr;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph_, nullptr, 0, &null_function),
            cudaErrorInvalidDeviceFunction);
  static_cast<void>(testing::internal::GetCapturedStderr());
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_nodes_refused, arguments_packed_in_extra_are_not_modelled) {
  cudaKernelNodeParams params = params_of(reinterpret_cast<void*>(&launched));
  params.kernelParams = nullptr;
  void* extra[] = {nullptr};
  params.extra = extra;
  cudaGraphNode_t node{};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph_, nullptr, 0, &params), cudaErrorNotSupported);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("packed in extra"), std::string::npos) << said;
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_nodes_refused, a_memcpy_node_with_an_array_operand_is_not_modelled) {
  cudaMemcpy3DParms params{};
  params.srcArray = reinterpret_cast<cudaArray_t>(value_);  // never dereferenced
  params.dstPtr = cudaPitchedPtr{value_, sizeof(int), sizeof(int), 1};
  params.extent = cudaExtent{sizeof(int), 1, 1};
  params.kind = cudaMemcpyDefault;
  cudaGraphNode_t node{};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaGraphAddMemcpyNode(&node, graph_, nullptr, 0, &params), cudaErrorNotSupported);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("CUDA array operand"), std::string::npos) << said;
  static_cast<void>(cudaGetLastError());
}

TEST_F(graph_nodes_refused, kernel_node_attributes_not_kept_are_not_modelled) {
  cudaKernelNodeParams const params = params_of(reinterpret_cast<void*>(&launched));
  cudaGraphNode_t node{};
  ASSERT_EQ(cudaGraphAddKernelNode(&node, graph_, nullptr, 0, &params), cudaSuccess);
  cudaLaunchAttributeValue value{};
  value.clusterDim.x = 2;
  value.clusterDim.y = 1;
  value.clusterDim.z = 1;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributeClusterDimension, &value),
            cudaErrorNotSupported);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("is not modelled"), std::string::npos) << said;
  static_cast<void>(cudaGetLastError());
}
