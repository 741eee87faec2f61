// CUDA source constructs as real trainers write them, their kernels in a header
// (source_constructs_kernels.cuh, which includes source_constructs/affine.cuh): template arguments
// deduced at a launch, or named in part and the rest deduced, dynamic shared memory declared in
// the header, overloaded kernels, kernels declared through macros, a launch inside a function
// template, a kernel in a subfolder's header and kernels in a header of another folder reached
// through the include path (sim/testing/strided_kernels.cuh). On the simulated device they check
// that the headers are rewritten and that a launch chooses the kernel a call would; on a GPU the
// same tests check the tests.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

#include "sim_test.hpp"
#include "strided_kernels.cuh"
#include "source_constructs_kernels.cuh"

namespace {

namespace sc = source_constructs;
namespace gt = sim_testing;

class source_constructs : public sim_testing::gpu_test {};

template <typename T>
T* device_array(std::size_t count) {
  T* pointer = nullptr;
  SIM_TEST_TRY(cudaMalloc(&pointer, count * sizeof(T)));
  return pointer;
}

using sim_testing::read_back;

TEST_F(source_constructs, a_template_kernel_launched_with_deduced_arguments_runs_its_instance) {
  int const n = 300;
  float* floats = device_array<float>(n);
  int* ints = device_array<int>(n);
  sc::fill<<<(n + 63) / 64, 64>>>(floats, 1.5F, n);  // T = float
  sc::fill<<<(n + 63) / 64, 64>>>(ints, 7, n);       // T = int
  SIM_TEST_TRY(cudaGetLastError());
  for (float const value : read_back(floats, n)) EXPECT_EQ(value, 1.5F);
  for (int const value : read_back(ints, n)) EXPECT_EQ(value, 7);
  // Named template arguments still work, and the value converts to T as in a call.
  sc::fill<double><<<(n + 63) / 64, 64>>>(reinterpret_cast<double*>(floats), 2, n / 2);
  SIM_TEST_TRY(cudaGetLastError());
  for (double const value : read_back(reinterpret_cast<double*>(floats), n / 2)) {
    EXPECT_EQ(value, 2.0);
  }
  SIM_TEST_TRY(cudaFree(floats));
  SIM_TEST_TRY(cudaFree(ints));
}

TEST_F(source_constructs, a_deduced_launch_is_a_launch_of_the_instance_itself) {
  float* out = device_array<float>(1);
  sc::fill<<<1, 1>>>(out, 3.0F, 1);
  SIM_TEST_TRY(cudaDeviceSynchronize());
  // The instance the launch chose is the function the runtime knows: fill<float>, with its
  // parameters float*, float, int at offsets 0, 8 and 12.
  auto const* function = reinterpret_cast<void const*>(&sc::fill<float>);
  char const* name = nullptr;
  ASSERT_EQ(cudaFuncGetName(&name, function), cudaSuccess);
  ASSERT_NE(name, nullptr);
  EXPECT_NE(std::string{name}.find("fill"), std::string::npos) << name;
  std::vector<std::size_t> const offsets{0, 8, 12};
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    std::size_t offset = 0;
    std::size_t size = 0;
    ASSERT_EQ(cudaFuncGetParamInfo(function, i, &offset, &size), cudaSuccess) << i;
    EXPECT_EQ(offset, offsets[i]) << "parameter " << i;
  }
  EXPECT_EQ(read_back(out, 1)[0], 3.0F);
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(source_constructs, a_const_pointer_parameter_takes_a_pointer_and_t_is_deduced) {
  int const n = 257;
  std::vector<float> host(n);
  std::iota(host.begin(), host.end(), 0.0F);
  float* in = device_array<float>(n);
  float* out = device_array<float>(n);
  sim_testing::copy_to_device(in, host.data(), n * sizeof(float));
  sc::scale<<<(n + 127) / 128, 128>>>(in, out, 2.0F, n);  // in: float* for float const*
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<float> const scaled = read_back(out, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(scaled[static_cast<std::size_t>(i)], 2.0F * i) << i;
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(source_constructs, a_launch_inside_a_header_function_template_runs_on_its_stream) {
  int const n = 1000;
  std::vector<double> host(n);
  std::iota(host.begin(), host.end(), 1.0);
  double* in = device_array<double>(n);
  double* out = device_array<double>(n);
  sim_testing::copy_to_device(in, host.data(), n * sizeof(double));
  cudaStream_t stream = nullptr;
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  sc::scale_async(in, out, 0.5, n, stream);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<double> result(n);
  SIM_TEST_TRY(
      cudaMemcpyAsync(result.data(), out, n * sizeof(double), cudaMemcpyDeviceToHost, stream));
  SIM_TEST_TRY(cudaStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) EXPECT_EQ(result[static_cast<std::size_t>(i)], 0.5 * (i + 1)) << i;
  SIM_TEST_TRY(cudaStreamDestroy(stream));
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(source_constructs, extern_shared_memory_declared_in_a_header_holds_each_blocks_slice) {
  unsigned const block = 96;
  unsigned const blocks = 5;
  std::size_t const n = std::size_t{block} * blocks;
  std::vector<int> host(n);
  std::iota(host.begin(), host.end(), 0);
  int* in = device_array<int>(n);
  int* out = device_array<int>(n);
  sim_testing::copy_to_device(in, host.data(), n * sizeof(int));
  sc::reverse_blocks<<<blocks, block, block * sizeof(int)>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<int> const reversed = read_back(out, n);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t const b = i / block;
    EXPECT_EQ(reversed[i], static_cast<int>(b * block + (block - 1 - i % block))) << i;
  }
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(source_constructs, a_kernel_in_a_subfolders_header_takes_a_struct_of_its_neighbour) {
  int const n = 100;
  std::vector<float> host(n);
  std::iota(host.begin(), host.end(), 0.0F);
  float* values = device_array<float>(n);
  sim_testing::copy_to_device(values, host.data(), n * sizeof(float));
  sc::apply_affine<<<1, 128>>>(values, sc::affine<float>{2.0F, 1.0F}, n);  // T = float
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<float> const mapped = read_back(values, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(mapped[static_cast<std::size_t>(i)], 2.0F * i + 1.0F) << i;
  SIM_TEST_TRY(cudaFree(values));
}

TEST_F(source_constructs, overloaded_kernels_are_chosen_by_their_arguments) {
  int const n = 70;
  int* ints = device_array<int>(n);
  float* floats = device_array<float>(n);
  sc::fill<<<1, n>>>(ints, 1, n);
  sc::fill<<<1, n>>>(floats, 1.0F, n);
  sc::add_one<<<1, n>>>(ints, n);    // add_one(int*, int)
  sc::add_one<<<1, n>>>(floats, n);  // add_one(float*, int)
  // A pointer to one of them, launched through the pointer.
  void (*const add_one_to_ints)(int*, int) = sc::add_one;
  add_one_to_ints<<<1, n>>>(ints, n);
  SIM_TEST_TRY(cudaGetLastError());
  for (int const value : read_back(ints, n)) EXPECT_EQ(value, 3);
  for (float const value : read_back(floats, n)) EXPECT_EQ(value, 1.5F);
  SIM_TEST_TRY(cudaFree(ints));
  SIM_TEST_TRY(cudaFree(floats));
}

TEST_F(source_constructs, a_kernel_template_of_a_header_on_the_include_path_deduces_its_type) {
  int const n = 64;
  std::vector<float> host(3 * n);
  std::iota(host.begin(), host.end(), 0.0F);
  float* in = device_array<float>(3 * n);
  sim_testing::copy_to_device(in, host.data(), host.size() * sizeof(float));
  gt::negate<<<1, 3 * n>>>(in, 3 * n);  // T = float, a kernel declared through a macro
  SIM_TEST_TRY(cudaGetLastError());
  for (float const value : read_back(in, 3 * n)) EXPECT_LE(value, 0.0F);
  gt::negate<<<1, 3 * n>>>(in, 3 * n);
  SIM_TEST_TRY(cudaGetLastError());
  EXPECT_EQ(read_back(in, 3 * n), host);
  SIM_TEST_TRY(cudaFree(in));
}

TEST_F(source_constructs, template_arguments_named_in_part_leave_the_rest_to_deduction) {
  int const n = 50;
  std::vector<double> host(3 * n);
  std::iota(host.begin(), host.end(), 0.0);
  double* in = device_array<double>(3 * n);
  double* out = device_array<double>(n);
  sim_testing::copy_to_device(in, host.data(), host.size() * sizeof(double));
  // Stride named, T = double deduced, as the call gt::gather_strided<3>(in, out, n) would.
  gt::gather_strided<3><<<1, 64>>>(in, out, n);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<double> gathered = read_back(out, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(gathered[static_cast<std::size_t>(i)], 3.0 * i) << i;
  // The overload with a scale, chosen by its arguments; all template arguments named.
  gt::gather_strided<2><<<1, 64>>>(in, out, n, 0.5);
  SIM_TEST_TRY(cudaGetLastError());
  gathered = read_back(out, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(gathered[static_cast<std::size_t>(i)], 1.0 * i) << i;
  gt::gather_strided<1, double><<<1, 64>>>(in, out, n);
  SIM_TEST_TRY(cudaGetLastError());
  gathered = read_back(out, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(gathered[static_cast<std::size_t>(i)], 1.0 * i) << i;
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(source_constructs, kernels_declared_through_macros_are_chosen_by_their_arguments) {
  int const n = 40;
  int* ints = device_array<int>(n);
  float* floats = device_array<float>(n);
  sc::fill<<<1, n>>>(ints, 6, n);
  sc::fill<<<1, n>>>(floats, 3.0F, n);
  sc::square<<<1, n>>>(ints, n);    // T = int
  sc::square<<<1, n>>>(floats, n);  // T = float
  sc::halve<<<1, n>>>(ints, n);     // halve(int*, int)
  sc::halve<<<1, n>>>(floats, n);   // halve(float*, int)
  SIM_TEST_TRY(cudaGetLastError());
  for (int const value : read_back(ints, n)) EXPECT_EQ(value, 18);
  for (float const value : read_back(floats, n)) EXPECT_EQ(value, 4.5F);
  SIM_TEST_TRY(cudaFree(ints));
  SIM_TEST_TRY(cudaFree(floats));
}

}  // namespace
