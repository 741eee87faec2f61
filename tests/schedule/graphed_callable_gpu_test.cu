// graphed_callable: forward and backward graphs with static buffers equal the eager callables.

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/lifecycle_options.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/schedule/graphed_callable.hpp>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"
#include "common/pool_blocks.hpp"

namespace gs = graphstep;

namespace {

// y = tanh(w·x) elementwise; saves y for the backward: dx = w·(1 − y²)·dy.
__global__ void forward_kernel(float* y, float const* x, float w, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = tanhf(w * x[i]);
}
__global__ void backward_kernel(float* dx, float const* dy, float const* y, float w, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = w * (1.0F - y[i] * y[i]) * dy[i];
}

class graphed_test : public gs::testing::gpu_test {};

}  // namespace

TEST_F(graphed_test, forward_and_backward_graphs_equal_the_eager_callables) {
  int const n = 10000;
  float const w = 0.7F;
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::testing::pool_blocks blocks{pool, stream};
  auto buffer = [&] { return blocks.get(n); };
  float* x = buffer();
  float* y = buffer();
  float* dy = buffer();
  float* dx = buffer();
  auto forward = [&](gs::cuda::stream_view s) {
    forward_kernel<<<(n + 255) / 256, 256, 0, s.get()>>>(y, x, w, n);
  };
  auto backward = [&](gs::cuda::stream_view s) {
    backward_kernel<<<(n + 255) / 256, 256, 0, s.get()>>>(dx, dy, y, w, n);
  };
  std::size_t const bytes = sizeof(float) * n;
  auto const f32 = gs::dtype::float32;
  auto const count = static_cast<std::size_t>(n);
  auto view = [&](float* data, char const* name) {
    return gs::tensor_view{data, gs::tensor_spec{name, {n}, f32}};
  };
  gs::schedule::graphed_callable graphed{
      forward,          backward,         {view(x, "x")}, {view(y, "y")},
      {view(dy, "dy")}, {view(dx, "dx")}, pool,           stream};
  EXPECT_EQ(graphed.outputs()[0].name(), "y");
  EXPECT_EQ(graphed.forward_graph().node_counts().kernel, 1U);

  // New data from elsewhere in device memory, copied in by the call.
  float* data = buffer();
  float* grad = buffer();
  std::vector<float> host_x(n);
  std::vector<float> host_dy(n);
  for (int i = 0; i < n; ++i) {
    host_x[i] = static_cast<float>(i % 100) / 50.0F - 1.0F;
    host_dy[i] = static_cast<float>(i % 7) - 3.0F;
  }
  graphstep::testing::copy_to_device(data, host_x.data(), bytes);
  graphstep::testing::copy_to_device(grad, host_dy.data(), bytes);
  graphed.forward({{data, f32, count}}, stream);
  graphed.backward({{grad, f32, count}}, stream);
  std::vector<float> got_y(n);
  std::vector<float> got_dx(n);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(got_y.data(), graphed.outputs()[0].data(), bytes,
                                     cudaMemcpyDeviceToHost, stream.get()));
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(got_dx.data(), graphed.input_gradients()[0].data(), bytes,
                                     cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  // The eager callables on the same data.
  graphstep::testing::copy_to_device(x, host_x.data(), bytes);
  graphstep::testing::copy_to_device(dy, host_dy.data(), bytes);
  forward(stream);
  backward(stream);
  std::vector<float> want_y(n);
  std::vector<float> want_dx(n);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(want_y.data(), y, bytes, cudaMemcpyDeviceToHost, stream.get()));
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(want_dx.data(), dx, bytes, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  EXPECT_EQ(got_y, want_y);
  EXPECT_EQ(got_dx, want_dx);
  EXPECT_THROW(graphed.forward({}, stream), gs::usage_error);
  // A span of another dtype or count, or a null one, is refused before anything is copied.
  std::string const half = gs::testing::message_of([&] {
    graphed.forward({{data, f32, count / 2}}, stream);
  });
  EXPECT_NE(
      half.find("graphed_callable::forward: input 0 is " + std::to_string(count / 2) + " float32"),
      std::string::npos)
      << half;
  EXPECT_NE(half.find("its static tensor is 'x' [" + std::to_string(n) + "] float32"),
            std::string::npos)
      << half;
  EXPECT_NE(gs::testing::message_of([&] {
              graphed.backward({{grad, gs::dtype::float16, count}}, stream);
            }).find("float16"),
            std::string::npos);
  EXPECT_NE(gs::testing::message_of([&] {
              graphed.forward({{nullptr, f32, count}}, stream);
            }).find("null"),
            std::string::npos);
  EXPECT_THROW(static_cast<void>(
                   gs::schedule::graphed_callable(forward, nullptr, {}, {}, {}, {}, pool, stream)),
               gs::usage_error);
  EXPECT_NE(gs::testing::message_of([&] {
              gs::schedule::graphed_callable{
                  forward,        backward, {gs::tensor_view{x, gs::tensor_spec{{0}, f32}}},
                  {view(y, "y")}, {},       {},
                  pool,           stream};
            }).find("graphed_callable: input 0 holds no element"),
            std::string::npos);
}

TEST_F(graphed_test, static_buffers_from_the_pool_equal_the_eager_callables) {
  int const n = 4096;
  float const w = 1.3F;
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  // Both callables read and write only the static buffers they are handed.
  auto forward = [&](gs::schedule::graphed_tensors const& t, gs::cuda::stream_view s) {
    forward_kernel<<<(n + 255) / 256, 256, 0, s.get()>>>(
        static_cast<float*>(t.outputs[0].data()), static_cast<float const*>(t.inputs[0].data()), w,
        n);
  };
  auto backward = [&](gs::schedule::graphed_tensors const& t, gs::cuda::stream_view s) {
    backward_kernel<<<(n + 255) / 256, 256, 0, s.get()>>>(
        static_cast<float*>(t.input_gradients[0].data()),
        static_cast<float const*>(t.output_gradients[0].data()),
        static_cast<float const*>(t.outputs[0].data()), w, n);
  };
  gs::schedule::graphed_specs specs;
  specs.inputs = {{"x", {n}, gs::dtype::float32}};
  specs.outputs = {{{n}, gs::dtype::float32}};
  specs.output_gradients = {{{n}, gs::dtype::float32}};
  specs.input_gradients = {{{n}, gs::dtype::float32}};
  gs::schedule::graphed_callable graphed{forward, backward, specs,
                                         pool,    stream,   gs::graphs::lifecycle_options{2}};
  ASSERT_EQ(graphed.inputs().size(), 1U);
  EXPECT_EQ(graphed.inputs()[0].bytes(), sizeof(float) * n);
  EXPECT_EQ(graphed.inputs()[0].spec(), specs.inputs[0]);
  EXPECT_EQ(graphed.outputs()[0].shape(), (std::vector<std::int64_t>{n}));
  EXPECT_EQ(graphed.forward_graph().node_counts().kernel, 1U);
  EXPECT_EQ(graphed.backward_graph().node_counts().kernel, 1U);

  std::vector<float> host_x(n);
  std::vector<float> host_dy(n);
  std::vector<float> want_y(n);
  std::vector<float> want_dx(n);
  for (int i = 0; i < n; ++i) {
    host_x[i] = static_cast<float>(i % 37) / 18.0F - 1.0F;
    host_dy[i] = static_cast<float>(i % 5) - 2.0F;
  }
  std::size_t const bytes = sizeof(float) * n;
  for (int step = 0; step < 3; ++step) {  // new data every step, written into the statics
    for (float& v : host_x) v *= 0.9F;
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(graphed.inputs()[0].data(), host_x.data(), bytes,
                                       cudaMemcpyHostToDevice, stream.get()));
    graphed.forward({graphed.inputs()[0].span()}, stream);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(graphed.output_gradients()[0].data(), host_dy.data(), bytes,
                                       cudaMemcpyHostToDevice, stream.get()));
    graphed.backward({graphed.output_gradients()[0].span()}, stream);
    std::vector<float> got_y(n);
    std::vector<float> got_dx(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(got_y.data(), graphed.outputs()[0].data(), bytes,
                                       cudaMemcpyDeviceToHost, stream.get()));
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(got_dx.data(), graphed.input_gradients()[0].data(), bytes,
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    // The same arithmetic on the device, eagerly, in buffers of its own.
    float* x = static_cast<float*>(pool.allocate(bytes, stream));
    float* y = static_cast<float*>(pool.allocate(bytes, stream));
    float* dy = static_cast<float*>(pool.allocate(bytes, stream));
    float* dx = static_cast<float*>(pool.allocate(bytes, stream));
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(x, host_x.data(), bytes, cudaMemcpyHostToDevice, stream.get()));
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(dy, host_dy.data(), bytes, cudaMemcpyHostToDevice, stream.get()));
    forward_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(y, x, w, n);
    backward_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(dx, dy, y, w, n);
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(want_y.data(), y, bytes, cudaMemcpyDeviceToHost, stream.get()));
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(want_dx.data(), dx, bytes, cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    for (float* p : {x, y, dy, dx}) pool.deallocate(p, stream);
    EXPECT_EQ(got_y, want_y) << "step " << step;
    EXPECT_EQ(got_dx, want_dx) << "step " << step;
  }
  gs::schedule::graphed_specs empty_shape;
  empty_shape.inputs = {{{0}, gs::dtype::float32}};
  EXPECT_THROW((gs::schedule::graphed_callable{forward, backward, empty_shape, pool, stream}),
               gs::usage_error);
}
