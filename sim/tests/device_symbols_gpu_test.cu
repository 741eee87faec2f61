// Variables of device memory and the runtime's symbol functions, as programs use them: a
// `__constant__` table filled by cudaMemcpyToSymbol before kernels read it, a `__device__`
// counter kernels add to and the host reads back with cudaMemcpyFromSymbol, the address and
// size of a symbol used as plain device memory, the asynchronous forms captured into a graph,
// and the errors cuda_runtime_api.h documents for a symbol, a direction or a range it refuses.

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <vector>

#include "sim_test.hpp"

namespace {

__constant__ float coefficients[4];
__device__ unsigned long long counter;

namespace nested {
__device__ int table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
}  // namespace nested

// out[i] = c0 + c1 x + c2 x^2 + c3 x^3 of in[i], the coefficients read from constant memory.
__global__ void polynomial(float* out, float const* in, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  float const x = in[i];
  out[i] = coefficients[0] + x * (coefficients[1] + x * (coefficients[2] + x * coefficients[3]));
}

// Every thread adds its value to the counter.
template <typename T>
__global__ void count(T const* values, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) atomicAdd(&counter, static_cast<unsigned long long>(values[i]));
}

// table[i] *= factor, in place.
__global__ void scale_table(int factor) {
  unsigned const i = threadIdx.x;
  if (i < 8) nested::table[i] *= factor;
}

class device_symbols : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    SIM_TEST_EXPECT_SUCCESS(cudaStreamSynchronize(stream_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }

  cudaStream_t stream_{};
};

}  // namespace

// cudaMemcpyToSymbol "Copies count bytes from the memory area pointed to by src to the memory
// area pointed to by offset bytes from the start of symbol symbol"; the kernels launched after
// it read what it wrote. The template overload of cuda_runtime.h takes the variable itself.
TEST_F(device_symbols, a_constant_table_written_by_the_host_is_what_kernels_read) {
  std::array<float, 4> const host{1.0F, 2.0F, 0.5F, -1.0F};
  SIM_TEST_TRY(cudaMemcpyToSymbol(coefficients, host.data(), sizeof host));
  // The last coefficient again, through an offset.
  float const cubic = 0.25F;
  SIM_TEST_TRY(cudaMemcpyToSymbol(coefficients, &cubic, sizeof cubic, 3 * sizeof(float)));
  int const n = 70;
  std::vector<float> xs(n);
  for (int i = 0; i < n; ++i) xs[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) - 3.0F;
  float* in = nullptr;
  float* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, n * sizeof(float)));
  SIM_TEST_TRY(cudaMalloc(&out, n * sizeof(float)));
  sim_testing::copy_to_device(in, xs.data(), n * sizeof(float));
  polynomial<<<3, 32>>>(out, in, n);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<float> const got = sim_testing::read_back(out, n);
  for (int i = 0; i < n; ++i) {
    float const x = xs[static_cast<std::size_t>(i)];
    EXPECT_EQ(got[static_cast<std::size_t>(i)], 1.0F + x * (2.0F + x * (0.5F + x * 0.25F)))
        << "element " << i;
  }
  // What the host wrote reads back unchanged.
  std::array<float, 4> back{};
  SIM_TEST_TRY(cudaMemcpyFromSymbol(back.data(), coefficients, sizeof back));
  EXPECT_EQ(back, (std::array<float, 4>{1.0F, 2.0F, 0.5F, 0.25F}));
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

// A __device__ counter set by the host, added to by kernels and read back with
// cudaMemcpyFromSymbol, which waits for the kernels before it on the legacy stream.
TEST_F(device_symbols, a_device_counter_is_set_added_to_and_read_back) {
  unsigned long long const start = 1000;
  SIM_TEST_TRY(cudaMemcpyToSymbol(counter, &start, sizeof start));
  int const n = 100;
  std::vector<int> values(n);
  for (int i = 0; i < n; ++i) values[static_cast<std::size_t>(i)] = i;
  int* device = nullptr;
  SIM_TEST_TRY(cudaMalloc(&device, n * sizeof(int)));
  sim_testing::copy_to_device(device, values.data(), n * sizeof(int));
  count<<<4, 32>>>(device, n);
  count<<<4, 32>>>(device, n);
  unsigned long long total = 0;
  SIM_TEST_TRY(cudaMemcpyFromSymbol(&total, counter, sizeof total));
  EXPECT_EQ(total, 1000ULL + 2ULL * (99ULL * 100ULL / 2ULL));
  SIM_TEST_TRY(cudaFree(device));
}

// cudaGetSymbolAddress "Returns in *devPtr the address of symbol symbol on the device",
// cudaGetSymbolSize its size: the address is device memory for every other call (a memset, a
// copy by address, a kernel through it).
TEST_F(device_symbols, a_symbols_address_and_size_serve_as_device_memory) {
  void* address = nullptr;
  SIM_TEST_TRY(cudaGetSymbolAddress(&address, nested::table));
  std::size_t size = 0;
  SIM_TEST_TRY(cudaGetSymbolSize(&size, nested::table));
  EXPECT_EQ(size, sizeof nested::table);
  // The initializer is what the device holds first.
  std::array<int, 8> values{};
  SIM_TEST_TRY(cudaMemcpy(values.data(), address, sizeof values, cudaMemcpyDeviceToHost));
  EXPECT_EQ(values, (std::array<int, 8>{1, 2, 3, 4, 5, 6, 7, 8}));
  scale_table<<<1, 8, 0, stream_>>>(3);
  SIM_TEST_TRY(cudaMemsetAsync(static_cast<int*>(address) + 7, 0, sizeof(int), stream_));
  SIM_TEST_TRY(cudaMemcpyFromSymbolAsync(values.data(), nested::table, sizeof values, 0,
                                         cudaMemcpyDeviceToHost, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  EXPECT_EQ(values, (std::array<int, 8>{3, 6, 9, 12, 15, 18, 21, 0}));
  // cudaMemcpyDefault takes each side's kind from its address.
  std::array<int, 8> const reset{1, 2, 3, 4, 5, 6, 7, 8};
  SIM_TEST_TRY(cudaMemcpy(address, reset.data(), sizeof reset, cudaMemcpyDefault));
  SIM_TEST_TRY(cudaDeviceSynchronize());
}

// The asynchronous forms are ordered in their stream, and captured as copies: replayed, the
// graph copies device memory into the table, scales it and copies it back out each time.
TEST_F(device_symbols, asynchronous_symbol_copies_are_captured_and_replayed) {
  int* staging = nullptr;
  SIM_TEST_TRY(cudaMalloc(&staging, sizeof nested::table));
  std::array<int, 8> const input{10, 20, 30, 40, 50, 60, 70, 80};
  sim_testing::copy_to_device(staging, input.data(), sizeof input);
  cudaGraph_t graph{};
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  SIM_TEST_TRY(cudaMemcpyToSymbolAsync(nested::table, staging, sizeof input, 0,
                                       cudaMemcpyDeviceToDevice, stream_));
  scale_table<<<1, 8, 0, stream_>>>(2);
  SIM_TEST_TRY(cudaMemcpyFromSymbolAsync(staging, nested::table, sizeof input, 0,
                                         cudaMemcpyDeviceToDevice, stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  std::size_t nodes = 0;
  SIM_TEST_TRY(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 3U);
  cudaGraphExec_t exec{};
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  // Nothing ran during the capture: the table is still its initializer.
  std::array<int, 8> table{};
  SIM_TEST_TRY(cudaMemcpyFromSymbol(table.data(), nested::table, sizeof table));
  EXPECT_EQ(table, (std::array<int, 8>{1, 2, 3, 4, 5, 6, 7, 8}));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  std::vector<int> const out = sim_testing::copy_to_host(staging, 8, stream_);
  EXPECT_EQ(out, (std::vector<int>{40, 80, 120, 160, 200, 240, 280, 320}));
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
  std::array<int, 8> const reset{1, 2, 3, 4, 5, 6, 7, 8};
  SIM_TEST_TRY(cudaMemcpyToSymbol(nested::table, reset.data(), sizeof reset));
  SIM_TEST_TRY(cudaFree(staging));
}

// What the calls refuse: an address that is no symbol (cudaErrorInvalidSymbol), a direction a
// call does not list (cudaErrorInvalidMemcpyDirection), a range past the variable's end
// (cudaErrorInvalidValue), each also the last error.
TEST_F(device_symbols, a_non_symbol_a_wrong_direction_and_a_range_past_the_end_are_refused) {
  static int host_variable = 0;
  int value = 7;
  EXPECT_EQ(cudaMemcpyToSymbol(&host_variable, &value, sizeof value), cudaErrorInvalidSymbol);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidSymbol);
  void* address = nullptr;
  EXPECT_EQ(cudaGetSymbolAddress(&address, &host_variable), cudaErrorInvalidSymbol);
  static_cast<void>(cudaGetLastError());
  // A symbol is named by its start, not by an address inside it.
  EXPECT_EQ(cudaGetSymbolAddress(&address, &nested::table[1]), cudaErrorInvalidSymbol);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaMemcpyToSymbol(nested::table, &value, sizeof value, 0, cudaMemcpyDeviceToHost),
            cudaErrorInvalidMemcpyDirection);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaMemcpyFromSymbol(&value, nested::table, sizeof value, 0, cudaMemcpyHostToDevice),
            cudaErrorInvalidMemcpyDirection);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaMemcpyToSymbol(nested::table, &value, sizeof value, sizeof nested::table),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  std::array<int, 9> too_many{};
  EXPECT_EQ(cudaMemcpyFromSymbol(too_many.data(), nested::table, sizeof too_many),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  // The table is as it was.
  std::array<int, 8> table{};
  SIM_TEST_TRY(cudaMemcpyFromSymbol(table.data(), nested::table, sizeof table));
  EXPECT_EQ(table, (std::array<int, 8>{1, 2, 3, 4, 5, 6, 7, 8}));
}

// The memcpy node forms that name a symbol: a graph built by hand copies device memory into the
// table's second half and the whole table out; the executable's first copy is then pointed at
// the table's first half. An unknown symbol or a range past the end is refused; the header lists
// cudaErrorInvalidValue alone, which the simulated device answers (a GPU's code is printed).
TEST_F(device_symbols, memcpy_nodes_name_a_symbol_in_a_graph_and_an_executable) {
  int* staging = nullptr;  // [0, 8): input, [8, 16): the table copied out
  SIM_TEST_TRY(cudaMalloc(&staging, 16 * sizeof(int)));
  std::array<int, 8> const input{10, 20, 30, 40, 50, 60, 70, 80};
  sim_testing::copy_to_device(staging, input.data(), sizeof input);
  cudaGraph_t graph{};
  SIM_TEST_TRY(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t to{};
  cudaGraphNode_t from{};
  std::size_t const half = 4 * sizeof(int);
  SIM_TEST_TRY(cudaGraphAddMemcpyNodeToSymbol(&to, graph, nullptr, 0, nested::table, staging, half,
                                              half, cudaMemcpyDeviceToDevice));
  SIM_TEST_TRY(cudaGraphAddMemcpyNodeFromSymbol(&from, graph, &to, 1, staging + 8, nested::table,
                                                sizeof nested::table, 0, cudaMemcpyDeviceToDevice));
  cudaGraphExec_t exec{};
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  EXPECT_EQ(sim_testing::copy_to_host(staging + 8, 8, stream_),
            (std::vector<int>{1, 2, 3, 4, 10, 20, 30, 40}));
  SIM_TEST_TRY(cudaGraphExecMemcpyNodeSetParamsToSymbol(exec, to, nested::table, staging + 4, half,
                                                        0, cudaMemcpyDeviceToDevice));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  EXPECT_EQ(sim_testing::copy_to_host(staging + 8, 8, stream_),
            (std::vector<int>{50, 60, 70, 80, 10, 20, 30, 40}));

  static int host_variable = 0;
  cudaGraphNode_t refused{};
  cudaError_t const unknown =
      cudaGraphAddMemcpyNodeToSymbol(&refused, graph, nullptr, 0, &host_variable, staging,
                                     sizeof(int), 0, cudaMemcpyDeviceToDevice);
  static_cast<void>(cudaGetLastError());
  cudaError_t const past_the_end = cudaGraphMemcpyNodeSetParamsFromSymbol(
      from, staging, nested::table, sizeof nested::table, sizeof(int), cudaMemcpyDeviceToDevice);
  static_cast<void>(cudaGetLastError());
  std::printf("an unknown symbol: %s; a range past the end: %s\n", cudaGetErrorName(unknown),
              cudaGetErrorName(past_the_end));
  EXPECT_NE(unknown, cudaSuccess);
  EXPECT_NE(past_the_end, cudaSuccess);
  if (sim_testing::simulated_device) {
    EXPECT_EQ(unknown, cudaErrorInvalidValue);
    EXPECT_EQ(past_the_end, cudaErrorInvalidValue);
  }
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
  std::array<int, 8> const reset{1, 2, 3, 4, 5, 6, 7, 8};
  SIM_TEST_TRY(cudaMemcpyToSymbol(nested::table, reset.data(), sizeof reset));
  SIM_TEST_TRY(cudaFree(staging));
}
