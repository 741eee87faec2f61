#pragma once

// The arithmetic of a cuBLASLt matmul on the simulated device: D = epilogue(alpha·op(A)·op(B) +
// beta·C), column-major, read and written as the GPU would (cublasLt.h, cublasLtMatmul and
// cublasLtEpilogue_t). The API layer (sim/cublaslt_api.cpp) checks the call and fills a
// matmul_problem; this part only computes.

#include <cstddef>
#include <cstdint>

namespace graphstep::sim::detail {

/// @brief The storage types the simulated matmul reads and writes.
enum class element_type { float32, float16, bfloat16 };

[[nodiscard]] std::int64_t size_of(element_type type) noexcept;

/// @brief Reads element `index` of `base` as a float (fp16 and bf16 widen exactly).
[[nodiscard]] float load_element(void const* base, element_type type, std::int64_t index) noexcept;
/// @brief Writes `value` rounded to nearest even in `type`, as a GPU's conversion does.
void store_element(void* base, element_type type, std::int64_t index, float value) noexcept;
/// @brief `value` with its mantissa rounded to TF32's 10 bits.
[[nodiscard]] float round_to_tf32(float value) noexcept;
/// @brief GELU in its tanh form and that form's derivative, in fp32.
[[nodiscard]] float gelu_tanh(float x) noexcept;
[[nodiscard]] float gelu_tanh_derivative(float x) noexcept;

/// @brief A column-major matrix in device memory: element (row, col) of batch b is at
/// data + b·batch_stride + col·ld + row.
struct matrix_operand {
  void const* data{};
  element_type type{element_type::float32};
  std::int64_t ld{};
  std::int64_t batch_stride{};
};

/// @brief Bytes from a matrix's first element to one past its last: `rows` x `cols`,
/// column-major with leading dimension `ld`, `batch_count` of them `batch_stride` elements
/// apart (0 repeats one matrix). 0, meaning unknown, for an empty shape or a negative stride or
/// leading dimension, whose elements would lie before the address.
[[nodiscard]] std::size_t span_bytes(element_type type, std::int64_t rows, std::int64_t cols,
                                     std::int64_t ld, std::int64_t batch_count,
                                     std::int64_t batch_stride) noexcept;

/// @brief What the epilogue does besides scaling (cublasLtEpilogue_t, decomposed).
struct epilogue_steps {
  bool add_bias{};            ///< BIAS, GELU_BIAS, GELU_AUX_BIAS: bias[row] added before GELU
  bool gelu{};                ///< GELU*: D = GELU(x)
  bool store_aux{};           ///< GELU_AUX*: aux = x, the GELU input
  bool gelu_gradient{};       ///< DGELU*: D = x · GELU'(aux)
  bool bias_gradient_of_d{};  ///< DGELU_BGRAD: bias_gradient[row] = Σ_col D
  bool bias_gradient_of_a{};  ///< BGRADA: bias_gradient[row] = Σ_k op(A)
  bool bias_gradient_of_b{};  ///< BGRADB: bias_gradient[col] = Σ_k op(B)
};

/// @brief One matmul with every descriptor value copied (cuBLASLt reads descriptors at call time).
struct matmul_problem {
  std::int64_t m{}, n{}, k{};
  std::int32_t batch_count{1};
  bool transpose_a{}, transpose_b{};
  bool tf32{};  ///< CUBLAS_COMPUTE_32F_FAST_TF32: fp32 inputs rounded to TF32 before multiplying
  float alpha{1.0F}, beta{};
  matrix_operand a, b, c;
  void* d{};
  element_type d_type{element_type::float32};
  std::int64_t ldd{};
  std::int64_t d_batch_stride{};
  epilogue_steps steps;
  void const* bias{};     ///< input of the bias epilogues
  void* bias_gradient{};  ///< output of the gradient epilogues (the same attribute on the GPU)
  element_type bias_type{element_type::float32};
  std::int64_t bias_batch_stride{};
  void* aux{};  ///< written by GELU_AUX*, read by DGELU*
  element_type aux_type{element_type::float32};
  std::int64_t aux_ld{};
  std::int64_t aux_batch_stride{};
};

/// @brief Computes the whole product with its epilogue, on the host, in fp32 accumulation.
void run_matmul(matmul_problem const& p);

}  // namespace graphstep::sim::detail
