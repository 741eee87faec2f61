// conv_block: existing cuDNN training code — three convolutions with bias and ReLU, forward and
// backward, an MSE loss and SGD — captured whole into one graph with a capture scope, and
// checked step by step against the same code run eagerly.

#include <cudnn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <graphstep/graphstep.hpp>
#include <random>
#include <vector>

#include "../common/command_line.hpp"

namespace gs = graphstep;
namespace gt = graphstep::train;

namespace {

constexpr int batch = 32;
constexpr int height = 32;
constexpr int width = 32;
constexpr int channels[] = {8, 16, 16, 8};  // input, then the output of each layer
constexpr int layers = 3;

std::size_t activation_count(int c) {
  return std::size_t(batch) * c * height * width;
}
std::size_t filter_count(int l) {
  return std::size_t(channels[l + 1]) * channels[l] * 9;
}

// The "existing" model code: plain cuDNN calls on whatever stream the handle is set to.
struct conv_layer {
  cudnnTensorDescriptor_t in{}, out{}, bias{};
  cudnnFilterDescriptor_t filter{};
  cudnnConvolutionDescriptor_t conv{};
  cudnnConvolutionFwdAlgo_t forward_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  float* w{};
  float* b{};
  float* dw{};
  float* db{};
  float* pre{};   // convolution + bias
  float* post{};  // after ReLU (the last layer has none)
  float* dpre{};
  float* dpost{};
};

struct model {
  model() { GRAPHSTEP_CUDNN_TRY(cudnnCreate(&handle)); }
  ~model() {
    for (conv_layer& c : layer) {
      cudnnDestroyTensorDescriptor(c.in);
      cudnnDestroyTensorDescriptor(c.out);
      cudnnDestroyTensorDescriptor(c.bias);
      cudnnDestroyFilterDescriptor(c.filter);
      cudnnDestroyConvolutionDescriptor(c.conv);
    }
    cudnnDestroyActivationDescriptor(relu);
    cudnnDestroy(handle);
  }
  model(model const&) = delete;
  model& operator=(model const&) = delete;

  cudnnHandle_t handle{};
  cudnnActivationDescriptor_t relu{};
  conv_layer layer[layers];
  float* input{};
  float* target{};
  float* loss{};
  void* workspace{};
  std::size_t workspace_bytes{};
};

void make_descriptors(model& m) {
  GRAPHSTEP_CUDNN_TRY(cudnnCreateActivationDescriptor(&m.relu));
  GRAPHSTEP_CUDNN_TRY(
      cudnnSetActivationDescriptor(m.relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  for (int l = 0; l < layers; ++l) {
    conv_layer& c = m.layer[l];
    GRAPHSTEP_CUDNN_TRY(cudnnCreateTensorDescriptor(&c.in));
    GRAPHSTEP_CUDNN_TRY(cudnnCreateTensorDescriptor(&c.out));
    GRAPHSTEP_CUDNN_TRY(cudnnCreateTensorDescriptor(&c.bias));
    GRAPHSTEP_CUDNN_TRY(cudnnCreateFilterDescriptor(&c.filter));
    GRAPHSTEP_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&c.conv));
    GRAPHSTEP_CUDNN_TRY(cudnnSetTensor4dDescriptor(c.in, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, batch,
                                                   channels[l], height, width));
    GRAPHSTEP_CUDNN_TRY(cudnnSetTensor4dDescriptor(c.out, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                   batch, channels[l + 1], height, width));
    GRAPHSTEP_CUDNN_TRY(cudnnSetTensor4dDescriptor(c.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                                   channels[l + 1], 1, 1));
    GRAPHSTEP_CUDNN_TRY(cudnnSetFilter4dDescriptor(c.filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                   channels[l + 1], channels[l], 3, 3));
    GRAPHSTEP_CUDNN_TRY(cudnnSetConvolution2dDescriptor(c.conv, 1, 1, 1, 1, 1, 1,
                                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // Deterministic algorithms, so the graphed run can be compared with the eager one.
    int found = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    GRAPHSTEP_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(
        m.handle, c.in, c.filter, c.conv, c.out, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, fwd));
    for (int i = found - 1; i >= 0; --i) {
      if (fwd[i].status == CUDNN_STATUS_SUCCESS && fwd[i].determinism == CUDNN_DETERMINISTIC) {
        c.forward_algo = fwd[i].algo;
      }
    }
    cudnnConvolutionBwdDataAlgoPerf_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    GRAPHSTEP_CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        m.handle, c.filter, c.out, c.conv, c.in, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found,
        bwd_data));
    for (int i = found - 1; i >= 0; --i) {
      if (bwd_data[i].status == CUDNN_STATUS_SUCCESS &&
          bwd_data[i].determinism == CUDNN_DETERMINISTIC) {
        c.data_algo = bwd_data[i].algo;
      }
    }
    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    GRAPHSTEP_CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        m.handle, c.in, c.out, c.conv, c.filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found,
        bwd_filter));
    for (int i = found - 1; i >= 0; --i) {
      if (bwd_filter[i].status == CUDNN_STATUS_SUCCESS &&
          bwd_filter[i].determinism == CUDNN_DETERMINISTIC) {
        c.filter_algo = bwd_filter[i].algo;
      }
    }
    std::size_t bytes = 0;
    GRAPHSTEP_CUDNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(m.handle, c.in, c.filter, c.conv,
                                                                c.out, c.forward_algo, &bytes));
    m.workspace_bytes = std::max(m.workspace_bytes, bytes);
    GRAPHSTEP_CUDNN_TRY(cudnnGetConvolutionBackwardDataWorkspaceSize(
        m.handle, c.filter, c.out, c.conv, c.in, c.data_algo, &bytes));
    m.workspace_bytes = std::max(m.workspace_bytes, bytes);
    GRAPHSTEP_CUDNN_TRY(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        m.handle, c.in, c.out, c.conv, c.filter, c.filter_algo, &bytes));
    m.workspace_bytes = std::max(m.workspace_bytes, bytes);
  }
}

void forward_backward(model& m, gt::mse_loss const& mse, gs::cuda::stream_view stream) {
  float const one = 1.0F;
  float const zero = 0.0F;
  GRAPHSTEP_CUDNN_TRY(cudnnSetStream(m.handle, stream.get()));
  float const* x = m.input;
  for (int l = 0; l < layers; ++l) {
    conv_layer& c = m.layer[l];
    GRAPHSTEP_CUDNN_TRY(cudnnConvolutionForward(m.handle, &one, c.in, x, c.filter, c.w, c.conv,
                                                c.forward_algo, m.workspace, m.workspace_bytes,
                                                &zero, c.out, c.pre));
    GRAPHSTEP_CUDNN_TRY(cudnnAddTensor(m.handle, &one, c.bias, c.b, &one, c.out, c.pre));
    if (l + 1 < layers) {
      GRAPHSTEP_CUDNN_TRY(
          cudnnActivationForward(m.handle, m.relu, &one, c.out, c.pre, &zero, c.out, c.post));
      x = c.post;
    }
  }
  conv_layer& last = m.layer[layers - 1];
  auto const floats = [&](float* data) {
    return gs::device_span{data, gs::dtype::float32, mse.count()};
  };
  mse.forward_backward(floats(last.pre), floats(m.target), floats(last.dpre),
                       {m.loss, gs::dtype::float32, 1}, stream);
  for (int l = layers - 1; l >= 0; --l) {
    conv_layer& c = m.layer[l];
    if (l + 1 < layers) {
      GRAPHSTEP_CUDNN_TRY(cudnnActivationBackward(m.handle, m.relu, &one, c.out, c.post, c.out,
                                                  c.dpost, c.out, c.pre, &zero, c.out, c.dpre));
    }
    float const* layer_input = l == 0 ? m.input : m.layer[l - 1].post;
    GRAPHSTEP_CUDNN_TRY(
        cudnnConvolutionBackwardBias(m.handle, &one, c.out, c.dpre, &zero, c.bias, c.db));
    GRAPHSTEP_CUDNN_TRY(cudnnConvolutionBackwardFilter(m.handle, &one, c.in, layer_input, c.out,
                                                       c.dpre, c.conv, c.filter_algo, m.workspace,
                                                       m.workspace_bytes, &zero, c.filter, c.dw));
    if (l > 0) {
      GRAPHSTEP_CUDNN_TRY(cudnnConvolutionBackwardData(
          m.handle, &one, c.filter, c.w, c.out, c.dpre, c.conv, c.data_algo, m.workspace,
          m.workspace_bytes, &zero, c.in, m.layer[l - 1].dpost));
    }
  }
}

std::vector<float> random_vector(std::size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> dist{0.0F, scale};
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

float read_loss(model const& m, gs::cuda::stream_view stream) {
  float loss = 0.0F;
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(&loss, m.loss, sizeof loss, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return loss;
}

int run() {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  model m;
  make_descriptors(m);
  // Every buffer from the pool, given back when it goes (before the pool: declared after it).
  std::vector<gs::cuda::device_buffer> storage;
  auto buffer = [&](std::size_t n) {
    storage.emplace_back(gs::tensor_spec{{static_cast<std::int64_t>(n)}, gs::dtype::float32},
                         stream, pool);
    return static_cast<float*>(storage.back().data());
  };
  std::mt19937 rng{5};
  auto upload = [&](float* device, std::vector<float> const& host) {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, stream.get()));
    stream.synchronize();
  };
  m.input = buffer(activation_count(channels[0]));
  m.target = buffer(activation_count(channels[layers]));
  m.loss = buffer(1);
  m.workspace = storage.emplace_back(m.workspace_bytes, stream, pool).data();  // null for 0 bytes
  std::vector<std::vector<float>> initial_weights;
  std::vector<gt::parameter> parameters;
  for (int l = 0; l < layers; ++l) {
    conv_layer& c = m.layer[l];
    std::size_t const out = activation_count(channels[l + 1]);
    c.w = buffer(filter_count(l));
    c.b = buffer(channels[l + 1]);
    c.dw = buffer(filter_count(l));
    c.db = buffer(channels[l + 1]);
    c.pre = buffer(out);
    c.post = buffer(out);
    c.dpre = buffer(out);
    c.dpost = buffer(out);
    initial_weights.push_back(
        random_vector(filter_count(l), std::sqrt(2.0F / (9.0F * channels[l])), rng));
    initial_weights.push_back(std::vector<float>(channels[l + 1], 0.0F));
    parameters.push_back(
        {{c.w, gs::dtype::float32, filter_count(l)}, {c.dw, gs::dtype::float32, filter_count(l)}});
    parameters.push_back({{c.b, gs::dtype::float32, std::size_t(channels[l + 1])},
                          {c.db, gs::dtype::float32, std::size_t(channels[l + 1])}});
  }
  upload(m.input, random_vector(activation_count(channels[0]), 1.0F, rng));
  upload(m.target, random_vector(activation_count(channels[layers]), 1.0F, rng));
  auto reset_weights = [&] {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      upload(static_cast<float*>(parameters[i].value.data()), initial_weights[i]);
    }
  };
  gt::mse_loss const mse{activation_count(channels[layers]), stream};
  gt::lr_schedule schedule;
  schedule.base = 0.05F;
  gt::sgd_options const options{0.9F};
  int const steps = 20;

  // Eager: the existing code as it always ran.
  reset_weights();
  std::vector<float> eager;
  {
    gt::sgd optimizer{parameters, options, schedule, {}, stream};
    for (int i = 0; i < steps; ++i) {
      forward_backward(m, mse, stream);
      optimizer.step(stream);
      eager.push_back(read_loss(m, stream));
    }
  }

  // Graphed: the same code, captured once, replayed every step.
  reset_weights();
  gt::sgd optimizer{parameters, options, schedule, {}, stream};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, pool,
                      [&] {
                        forward_backward(m, mse, stream);
                        optimizer.step(stream);
                      },
                      {gs::graphs::capture_mode::this_thread, "conv_block step"});
  auto const nodes = step.node_counts();
  std::printf("captured one training step: %zu nodes (%zu kernels)\n", nodes.total, nodes.kernel);
  double worst = 0.0;
  for (int i = 0; i < steps; ++i) {
    step.replay(stream);
    float const loss = read_loss(m, stream);
    double const difference = std::fabs(loss - eager[i]) / std::max(1e-12F, std::fabs(eager[i]));
    worst = std::max(worst, difference);
    std::printf("step %2d  loss eager %.6f  graphed %.6f\n", i + 1, eager[i], loss);
  }
  bool const learned = eager.back() < eager.front();
  bool const ok = worst <= 1e-5 && learned;
  std::printf("%s: graphed losses %s eager (worst relative difference %.3g); loss %s\n",
              ok ? "OK" : "FAILED", worst <= 1e-5 ? "match" : "differ from", worst,
              learned ? "decreased" : "did not decrease");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  examples::command_line{
      argc, argv, "conv_block", "",
      "Existing cuDNN training code (three convolutions with bias and ReLU, forward and\n"
      "backward, an MSE loss and SGD) captured whole into one CUDA graph with a capture scope,\n"
      "and checked step by step against the same code run eagerly. Takes no arguments.\n"}
      .expect_none();
  if (gs::cuda::device_count() == 0) {
    std::fprintf(stderr, "conv_block: no CUDA device visible; this example needs an NVIDIA GPU\n");
    return 1;
  }
#if defined(GRAPHSTEP_CUDA_SIM)
  std::fprintf(stderr,
               "conv_block: not run: it calls cuDNN, which is not modelled on the simulated CUDA "
               "device yet\n");
  return 1;
#endif
  try {
    return run();
  } catch (std::exception const& e) {  // graphstep::error, or out_of_memory (a std::bad_alloc)
    std::fprintf(stderr, "conv_block: %s\n", e.what());
    return 1;
  }
}
