#pragma once

// A small trainer written the way llm.c writes one, and knowing nothing of graphstep: one flat
// parameter buffer cut into tensors at offsets it computes, its own token and target buffers,
// kernels in this header, cuBLASLt called directly, a host learning-rate schedule, AdamW with
// the step's scalars passed by value. The model predicts the next token from the current one:
// logits = wte[token] · wprojᵀ + bproj, softmax cross-entropy. Every reduction runs in a fixed
// order, so a run is reproducible bit for bit. llmc_port_gpu_test.cu ports it to graphstep.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace llmc {

#define LLMC_CHECK(call)                                                                  \
  do {                                                                                    \
    if (cudaError_t const e_ = (call); e_ != cudaSuccess) {                               \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));    \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
#define LLMC_CUBLAS(call)                                                                 \
  do {                                                                                    \
    if (cublasStatus_t const s_ = (call); s_ != CUBLAS_STATUS_SUCCESS) {                  \
      std::fprintf(stderr, "%s:%d: cuBLAS status %d\n", __FILE__, __LINE__, int(s_));     \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

constexpr int num_parameter_tensors = 3;  // wte (V×C), wproj (V×C), bproj (V)

struct config {
  int vocab = 64;     // V
  int channels = 32;  // C
  int positions = 16; // B·T
};

struct model {
  config cfg;
  std::size_t param_sizes[num_parameter_tensors];  // in floats
  std::size_t num_parameters;
  float* params_memory;  // one cudaMalloc, tensors back to back
  float* grads_memory;
  float* m_memory;
  float* v_memory;
  float* params[num_parameter_tensors];
  float* grads[num_parameter_tensors];
  int* inputs;   // device, B·T
  int* targets;  // device, B·T
  float* embedded;  // B·T × C
  float* logits;    // B·T × V: logits, then probabilities, then their gradient
  float* losses;    // B·T
  float* mean_loss; // device scalar
  float* dembedded; // B·T × C
  cublasLtHandle_t lt;
  void* lt_workspace;
  std::size_t lt_workspace_bytes;
};

// --- kernels ---------------------------------------------------------------------------------

__global__ void encoder_forward(float* out, int const* inputs, float const* wte, int positions,
                                int channels) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= positions * channels) return;
  int const p = i / channels;
  out[i] = wte[inputs[p] * channels + i % channels];
}

// One thread per position: bias, softmax, loss, in order.
__global__ void softmax_loss_forward(float* logits, float* losses, float const* bias,
                                     int const* targets, int positions, int vocab) {
  int const p = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (p >= positions) return;
  float* row = logits + static_cast<std::ptrdiff_t>(p) * vocab;
  float high = -INFINITY;
  for (int v = 0; v < vocab; ++v) {
    row[v] += bias[v];
    high = fmaxf(high, row[v]);
  }
  float sum = 0.0F;
  for (int v = 0; v < vocab; ++v) sum += expf(row[v] - high);
  for (int v = 0; v < vocab; ++v) row[v] = expf(row[v] - high) / sum;
  losses[p] = -logf(row[targets[p]]);
}

__global__ void mean_loss_forward(float* mean, float const* losses, int positions) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float sum = 0.0F;
  for (int p = 0; p < positions; ++p) sum += losses[p];
  *mean = sum / static_cast<float>(positions);
}

// dlogits = (probs − onehot(target)) / positions, in place.
__global__ void softmax_loss_backward(float* probs, int const* targets, int positions, int vocab) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= positions * vocab) return;
  int const p = i / vocab;
  float const onehot = (i % vocab == targets[p]) ? 1.0F : 0.0F;
  probs[i] = (probs[i] - onehot) / static_cast<float>(positions);
}

// dbias[v] = Σ_p dlogits[p, v], one thread per column.
__global__ void bias_backward(float* dbias, float const* dlogits, int positions, int vocab) {
  int const v = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (v >= vocab) return;
  float sum = 0.0F;
  for (int p = 0; p < positions; ++p) sum += dlogits[p * vocab + v];
  dbias[v] += sum;
}

// dwte[token] += dembedded[p] for each position of that token, in position order.
__global__ void encoder_backward(float* dwte, float const* dembedded, int const* inputs,
                                 int positions, int vocab, int channels) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= vocab * channels) return;
  int const token = i / channels;
  int const c = i % channels;
  for (int p = 0; p < positions; ++p) {
    if (inputs[p] == token) dwte[i] += dembedded[p * channels + c];
  }
}

__global__ void adamw_kernel(float* params, float const* grads, float* m, float* v,
                             std::size_t count, float learning_rate, float beta1, float beta2,
                             float beta1_correction, float beta2_correction, float eps,
                             float weight_decay) {
  std::size_t const i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  float const g = grads[i];
  float const mi = beta1 * m[i] + (1.0F - beta1) * g;
  float const vi = beta2 * v[i] + (1.0F - beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  float const update = (mi / beta1_correction) / (sqrtf(vi / beta2_correction) + eps);
  params[i] -= learning_rate * (update + weight_decay * params[i]);
}

// --- cuBLASLt, as llm.c calls it: descriptors made per call --------------------------------

// Column-major D[m,n] = op(A)·op(B).
inline void matmul(model& mdl, float* d, float const* a, float const* b, int m, int n, int k,
                   bool transa, bool transb, cudaStream_t stream) {
  cublasLtMatmulDesc_t desc;
  LLMC_CUBLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t const opa = transa ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t const opb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  LLMC_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  LLMC_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  cublasLtMatrixLayout_t la, lb, ld;
  LLMC_CUBLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, transa ? k : m, transa ? m : k,
                                         transa ? k : m));
  LLMC_CUBLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, transb ? n : k, transb ? k : n,
                                         transb ? n : k));
  LLMC_CUBLAS(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
  cublasLtMatmulPreference_t pref;
  LLMC_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  LLMC_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref,
                                                   CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &mdl.lt_workspace_bytes,
                                                   sizeof mdl.lt_workspace_bytes));
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  LLMC_CUBLAS(cublasLtMatmulAlgoGetHeuristic(mdl.lt, desc, la, lb, ld, ld, pref, 1, &heuristic,
                                             &found));
  if (found == 0) std::abort();
  float const one = 1.0F;
  float const zero = 0.0F;
  LLMC_CUBLAS(cublasLtMatmul(mdl.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld,
                             &heuristic.algo, mdl.lt_workspace, mdl.lt_workspace_bytes, stream));
  LLMC_CUBLAS(cublasLtMatmulPreferenceDestroy(pref));
  LLMC_CUBLAS(cublasLtMatrixLayoutDestroy(la));
  LLMC_CUBLAS(cublasLtMatrixLayoutDestroy(lb));
  LLMC_CUBLAS(cublasLtMatrixLayoutDestroy(ld));
  LLMC_CUBLAS(cublasLtMatmulDescDestroy(desc));
}

// --- the model ---------------------------------------------------------------------------------

inline float* malloc_floats(std::size_t count) {
  float* p = nullptr;
  LLMC_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(float)));
  return p;
}

// A fixed pseudo-random stream (xorshift), so every run starts from the same weights.
inline float next_uniform(unsigned long long& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return static_cast<float>(state >> 40) / static_cast<float>(1ULL << 24) - 0.5F;
}

inline void model_init(model& mdl, config cfg, unsigned long long seed) {
  mdl.cfg = cfg;
  int const V = cfg.vocab, C = cfg.channels, P = cfg.positions;
  mdl.param_sizes[0] = static_cast<std::size_t>(V) * C;
  mdl.param_sizes[1] = static_cast<std::size_t>(V) * C;
  mdl.param_sizes[2] = static_cast<std::size_t>(V);
  mdl.num_parameters = 0;
  for (std::size_t size : mdl.param_sizes) mdl.num_parameters += size;
  mdl.params_memory = malloc_floats(mdl.num_parameters);
  mdl.grads_memory = malloc_floats(mdl.num_parameters);
  mdl.m_memory = malloc_floats(mdl.num_parameters);
  mdl.v_memory = malloc_floats(mdl.num_parameters);
  std::size_t offset = 0;
  for (int t = 0; t < num_parameter_tensors; ++t) {
    mdl.params[t] = mdl.params_memory + offset;
    mdl.grads[t] = mdl.grads_memory + offset;
    offset += mdl.param_sizes[t];
  }
  std::vector<float> init(mdl.num_parameters);
  for (float& x : init) x = 0.2F * next_uniform(seed);
  LLMC_CHECK(cudaMemcpy(mdl.params_memory, init.data(), init.size() * sizeof(float),
                        cudaMemcpyHostToDevice));
  LLMC_CHECK(cudaMemset(mdl.m_memory, 0, mdl.num_parameters * sizeof(float)));
  LLMC_CHECK(cudaMemset(mdl.v_memory, 0, mdl.num_parameters * sizeof(float)));
  LLMC_CHECK(cudaMalloc(reinterpret_cast<void**>(&mdl.inputs), P * sizeof(int)));
  LLMC_CHECK(cudaMalloc(reinterpret_cast<void**>(&mdl.targets), P * sizeof(int)));
  mdl.embedded = malloc_floats(static_cast<std::size_t>(P) * C);
  mdl.dembedded = malloc_floats(static_cast<std::size_t>(P) * C);
  mdl.logits = malloc_floats(static_cast<std::size_t>(P) * V);
  mdl.losses = malloc_floats(static_cast<std::size_t>(P));
  mdl.mean_loss = malloc_floats(1);
  LLMC_CUBLAS(cublasLtCreate(&mdl.lt));
  mdl.lt_workspace_bytes = std::size_t{1} << 20;
  LLMC_CHECK(cudaMalloc(&mdl.lt_workspace, mdl.lt_workspace_bytes));
  LLMC_CHECK(cudaDeviceSynchronize());
}

inline void model_free(model& mdl) {
  LLMC_CHECK(cudaDeviceSynchronize());
  for (void* p : {static_cast<void*>(mdl.params_memory), static_cast<void*>(mdl.grads_memory),
                  static_cast<void*>(mdl.m_memory), static_cast<void*>(mdl.v_memory),
                  static_cast<void*>(mdl.inputs), static_cast<void*>(mdl.targets),
                  static_cast<void*>(mdl.embedded), static_cast<void*>(mdl.dembedded),
                  static_cast<void*>(mdl.logits), static_cast<void*>(mdl.losses),
                  static_cast<void*>(mdl.mean_loss), mdl.lt_workspace}) {
    LLMC_CHECK(cudaFree(p));
  }
  LLMC_CUBLAS(cublasLtDestroy(mdl.lt));
}

inline unsigned blocks(int n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

// Reads mdl.inputs and mdl.targets; leaves the mean loss in mdl.mean_loss.
inline void model_forward(model& mdl, cudaStream_t stream) {
  int const V = mdl.cfg.vocab, C = mdl.cfg.channels, P = mdl.cfg.positions;
  encoder_forward<<<blocks(P * C, 128), 128, 0, stream>>>(mdl.embedded, mdl.inputs, mdl.params[0],
                                                          P, C);
  // logits[P,V] = embedded[P,C] · wprojᵀ: column-major logitsᵀ = wprojᵀᵀ · embeddedᵀ
  matmul(mdl, mdl.logits, mdl.params[1], mdl.embedded, V, P, C, true, false, stream);
  softmax_loss_forward<<<blocks(P, 64), 64, 0, stream>>>(mdl.logits, mdl.losses, mdl.params[2],
                                                         mdl.targets, P, V);
  mean_loss_forward<<<1, 1, 0, stream>>>(mdl.mean_loss, mdl.losses, P);
}

inline void model_zero_grad(model& mdl, cudaStream_t stream) {
  LLMC_CHECK(cudaMemsetAsync(mdl.grads_memory, 0, mdl.num_parameters * sizeof(float), stream));
}

inline void model_backward(model& mdl, cudaStream_t stream) {
  int const V = mdl.cfg.vocab, C = mdl.cfg.channels, P = mdl.cfg.positions;
  softmax_loss_backward<<<blocks(P * V, 128), 128, 0, stream>>>(mdl.logits, mdl.targets, P, V);
  bias_backward<<<blocks(V, 64), 64, 0, stream>>>(mdl.grads[2], mdl.logits, P, V);
  // dwproj[V,C] = dlogitsᵀ · embedded: column-major dwprojᵀ[C,V] = embeddedᵀ · dlogits
  matmul(mdl, mdl.grads[1], mdl.embedded, mdl.logits, C, V, P, false, true, stream);
  // dembedded[P,C] = dlogits · wproj: column-major dembeddedᵀ[C,P] = wprojᵀ · dlogitsᵀ
  matmul(mdl, mdl.dembedded, mdl.params[1], mdl.logits, C, P, V, false, false, stream);
  encoder_backward<<<blocks(V * C, 128), 128, 0, stream>>>(mdl.grads[0], mdl.dembedded,
                                                           mdl.inputs, P, V, C);
}

// AdamW step `t` (from 1), the scalars by value as llm.c passes them.
inline void model_update(model& mdl, float learning_rate, int t, cudaStream_t stream) {
  float const beta1 = 0.9F, beta2 = 0.95F;
  float const beta1_correction = 1.0F - std::pow(beta1, static_cast<float>(t));
  float const beta2_correction = 1.0F - std::pow(beta2, static_cast<float>(t));
  int const n = static_cast<int>(mdl.num_parameters);
  adamw_kernel<<<blocks(n, 256), 256, 0, stream>>>(mdl.params_memory, mdl.grads_memory,
                                                   mdl.m_memory, mdl.v_memory, mdl.num_parameters,
                                                   learning_rate, beta1, beta2, beta1_correction,
                                                   beta2_correction, 1e-8F, 0.01F);
}

// The host schedule: linear warm-up, then cosine decay to a tenth.
inline float learning_rate_at(int step, int steps) {
  float const peak = 3e-2F;
  int const warmup = 3;
  if (step < warmup) return peak * static_cast<float>(step + 1) / static_cast<float>(warmup);
  float const progress = static_cast<float>(step - warmup) / static_cast<float>(steps - warmup);
  return peak * (0.1F + 0.45F * (1.0F + std::cos(3.14159265F * progress)));
}

// The data loader: batch `step` of a fixed token stream, inputs and their next tokens.
inline void next_batch(int step, config const& cfg, int* inputs, int* targets) {
  for (int p = 0; p < cfg.positions; ++p) {
    int const token = (step * 7 + p * 5 + (p * p) % 11) % cfg.vocab;
    inputs[p] = token;
    targets[p] = (token * 3 + 1) % cfg.vocab;
  }
}

// The trainer's own loop, as it runs without graphstep: losses[step] for steps [first, last).
inline void train(model& mdl, int first, int last, int steps, std::vector<float>& losses,
                  cudaStream_t stream) {
  std::vector<int> inputs(mdl.cfg.positions), targets(mdl.cfg.positions);
  for (int step = first; step < last; ++step) {
    next_batch(step, mdl.cfg, inputs.data(), targets.data());
    LLMC_CHECK(cudaMemcpyAsync(mdl.inputs, inputs.data(), inputs.size() * sizeof(int),
                               cudaMemcpyHostToDevice, stream));
    LLMC_CHECK(cudaMemcpyAsync(mdl.targets, targets.data(), targets.size() * sizeof(int),
                               cudaMemcpyHostToDevice, stream));
    model_forward(mdl, stream);
    model_zero_grad(mdl, stream);
    model_backward(mdl, stream);
    model_update(mdl, learning_rate_at(step, steps), step + 1, stream);
    float loss = 0.0F;
    LLMC_CHECK(cudaMemcpyAsync(&loss, mdl.mean_loss, sizeof loss, cudaMemcpyDeviceToHost, stream));
    LLMC_CHECK(cudaStreamSynchronize(stream));
    losses.push_back(loss);
  }
}

}  // namespace llmc
