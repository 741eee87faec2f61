// cuBLASLt, and the cuBLAS calls graphstep's tests and examples make, on the simulated device.
//
// Signatures as cublasLt.h and cublas_api.h declare them. A matmul is stream work: it becomes a
// kernel_task enqueued with enqueue_kernel, so it runs in stream order, is recorded as one kernel
// node while the stream captures (reading its operands when the node runs), and is seen by the
// stream-race checker. Descriptors are read when cublasLtMatmul is called and copied into the
// task: cuBLASLt reads them at call time, so changing a descriptor later does not change a
// recorded node. Rules cite the header comments (cublasLt.h) and the cuBLAS documentation
// ("cuBLASLt API"); where they are silent the simulator takes the stricter reading, said so.

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "detail/cublaslt_log.hpp"
#include "detail/matmul.hpp"
#include "detail/runtime_state.hpp"
#include "graphstep/sim/kernel_task.hpp"

namespace sim = graphstep::sim;
namespace detail = graphstep::sim::detail;
namespace cublaslt_log = graphstep::sim::detail::cublaslt_log;

// The handles' opaque structures (cublasLt.h: "typedef struct cublasLtContext* cublasLtHandle_t";
// cublas_api.h: "typedef struct cublasContext* cublasHandle_t").
struct cublasLtContext {
  std::uint32_t magic{};
};
struct cublasContext {
  std::uint32_t magic{};
  cudaStream_t stream{};
};

namespace {

constexpr std::uint32_t lt_handle_magic = 0x4C544831U;
constexpr std::uint32_t blas_handle_magic = 0x424C4831U;
constexpr std::uint64_t algorithm_magic = 0x53494D414C474F31ULL;

// Descriptor contents, kept inside the caller-visible opaque structures (cublasLt.h declares
// them as plain arrays of uint64_t, "semi-opaque").
struct matmul_descriptor {
  std::int32_t compute_type{};
  std::int32_t scale_type{};
  std::int32_t pointer_mode{CUBLASLT_POINTER_MODE_HOST};
  std::int32_t transa{CUBLAS_OP_N};
  std::int32_t transb{CUBLAS_OP_N};
  std::int32_t transc{CUBLAS_OP_N};
  std::int32_t fill_mode{CUBLAS_FILL_MODE_FULL};
  std::uint32_t epilogue{CUBLASLT_EPILOGUE_DEFAULT};
  void const* bias{};
  std::int64_t bias_batch_stride{};
  void const* aux{};
  std::int64_t aux_ld{};
  std::int64_t aux_batch_stride{};
  std::int32_t aux_data_type{-1};   // -1: D's type (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE)
  std::int32_t bias_data_type{-1};  // -1: D's type (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE)
  std::int32_t sm_count_target{};
};

struct layout_descriptor {
  std::uint32_t type{};
  std::int32_t order{CUBLASLT_ORDER_COL};
  std::uint64_t rows{};
  std::uint64_t cols{};
  std::int64_t ld{};
  std::int32_t batch_count{1};
  std::int64_t batch_stride{};
  std::int64_t plane_offset{};
  std::uint32_t batch_mode{};
};

struct preference_descriptor {
  std::uint32_t search_mode{};
  std::uint64_t max_workspace_bytes{};
  std::uint32_t reduction_scheme_mask{};
  std::uint32_t alignment_a{256}, alignment_b{256}, alignment_c{256}, alignment_d{256};
  float max_waves{};
  std::uint64_t impl_mask{~std::uint64_t{0}};
};

static_assert(sizeof(matmul_descriptor) <= sizeof(cublasLtMatmulDescOpaque_t));
static_assert(sizeof(layout_descriptor) <= sizeof(cublasLtMatrixLayoutOpaque_t));
static_assert(sizeof(preference_descriptor) <= sizeof(cublasLtMatmulPreferenceOpaque_t));
static_assert(std::is_trivially_copyable_v<matmul_descriptor> &&
              std::is_trivially_copyable_v<layout_descriptor> &&
              std::is_trivially_copyable_v<preference_descriptor>);

// The simulator's one algorithm, id 0, kept in cublasLtMatmulAlgo_t ("semi-opaque" uint64_t
// data): the types it was made for and its configuration (CUBLASLT_ALGO_CONFIG_*, whose
// defaults cublasLt.h gives); it runs only with those defaults.
constexpr std::int32_t the_algorithm_id = 0;
struct algorithm {
  std::uint64_t magic{algorithm_magic};
  std::int32_t compute_type{};
  std::int32_t scale_type{};
  std::uint32_t a_type{}, b_type{}, c_type{}, d_type{};
  std::int32_t id{the_algorithm_id};
  std::uint32_t tile{CUBLASLT_MATMUL_TILE_UNDEFINED};
  std::int32_t splitk{1};
  std::uint32_t reduction{CUBLASLT_REDUCTION_SCHEME_NONE};
  std::uint32_t swizzling{};
  std::uint32_t custom_option{};
  std::uint32_t stages{CUBLASLT_MATMUL_STAGES_UNDEFINED};
  std::uint16_t inner_shape{};
  std::uint16_t cluster_shape{};
};
static_assert(sizeof(algorithm) <= sizeof(cublasLtMatmulAlgo_t) &&
              std::is_trivially_copyable_v<algorithm>);

template <typename Descriptor, typename Opaque>
Descriptor read(Opaque const* opaque) noexcept {
  Descriptor d;
  std::memcpy(static_cast<void*>(&d), opaque, sizeof d);  // trivially copyable, see above
  return d;
}

template <typename Descriptor, typename Opaque>
void write(Opaque* opaque, Descriptor const& d) noexcept {
  std::memcpy(opaque, &d, sizeof d);
}

// An attribute value of the size the header gives it ("CUBLAS_STATUS_INVALID_VALUE if buf is NULL
// or sizeInBytes doesn't match size of internal storage for selected attribute").
template <typename T>
cublasStatus_t set_value(T& field, void const* buf, std::size_t size) noexcept {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// cublasLt*GetAttribute: "sizeWritten ... If sizeInBytes is non-zero: number of bytes actually
// written, if sizeInBytes is 0: number of bytes needed to write full contents";
// CUBLAS_STATUS_INVALID_VALUE "if sizeInBytes is 0 and sizeWritten is NULL, or if sizeInBytes is
// non-zero and buf is NULL or sizeInBytes doesn't match size of internal storage".
template <typename T>
cublasStatus_t get_value(T const& field, void* buf, std::size_t size,
                         std::size_t* written) noexcept {
  if (size == 0) {
    if (written == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *written = sizeof(T);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &field, sizeof(T));
  if (written != nullptr) *written = sizeof(T);
  return CUBLAS_STATUS_SUCCESS;
}

// Each descriptor's attributes, as fields of the value type the header gives each: `access` is
// called with the attribute's field; an attribute the simulator does not keep is refused.
template <typename Descriptor, typename Access>
cublasStatus_t with_field(Descriptor& d, cublasLtMatmulDescAttributes_t attr,
                          Access const& access) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return access(d.compute_type);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return access(d.scale_type);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return access(d.pointer_mode);
    case CUBLASLT_MATMUL_DESC_TRANSA: return access(d.transa);
    case CUBLASLT_MATMUL_DESC_TRANSB: return access(d.transb);
    case CUBLASLT_MATMUL_DESC_TRANSC: return access(d.transc);
    case CUBLASLT_MATMUL_DESC_FILL_MODE: return access(d.fill_mode);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return access(d.epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return access(d.bias);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return access(d.bias_batch_stride);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return access(d.aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return access(d.aux_ld);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return access(d.aux_batch_stride);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return access(d.aux_data_type);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return access(d.bias_data_type);
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: return access(d.sm_count_target);  // a hint, kept
    default:
      // Scale pointers, amax, fp8 fast accumulation, emulation and the rest are not modelled:
      // refused, so that a program relying on them does not get numbers the GPU would not give.
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

template <typename Descriptor, typename Access>
cublasStatus_t with_field(Descriptor& l, cublasLtMatrixLayoutAttribute_t attr,
                          Access const& access) {
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return access(l.type);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return access(l.order);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return access(l.rows);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return access(l.cols);
    case CUBLASLT_MATRIX_LAYOUT_LD: return access(l.ld);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return access(l.batch_count);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return access(l.batch_stride);
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return access(l.plane_offset);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: return access(l.batch_mode);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

template <typename Descriptor, typename Access>
cublasStatus_t with_field(Descriptor& p, cublasLtMatmulPreferenceAttributes_t attr,
                          Access const& access) {
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return access(p.search_mode);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return access(p.max_workspace_bytes);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return access(p.reduction_scheme_mask);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return access(p.alignment_a);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return access(p.alignment_b);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return access(p.alignment_c);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return access(p.alignment_d);
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return access(p.max_waves);
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: return access(p.impl_mask);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

template <typename Algorithm, typename Access>
cublasStatus_t with_field(Algorithm& a, cublasLtMatmulAlgoConfigAttributes_t attr,
                          Access const& access) {
  switch (attr) {
    case CUBLASLT_ALGO_CONFIG_ID: return access(a.id);
    case CUBLASLT_ALGO_CONFIG_TILE_ID: return access(a.tile);
    case CUBLASLT_ALGO_CONFIG_SPLITK_NUM: return access(a.splitk);
    case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME: return access(a.reduction);
    case CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING: return access(a.swizzling);
    case CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION: return access(a.custom_option);
    case CUBLASLT_ALGO_CONFIG_STAGES_ID: return access(a.stages);
    case CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID: return access(a.inner_shape);
    case CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID: return access(a.cluster_shape);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

// SetAttribute and GetAttribute of one descriptor kind, through its field map.
template <typename Descriptor, typename Opaque, typename Attribute>
cublasStatus_t set_attribute(Opaque* opaque, Attribute attr, void const* buf,
                             std::size_t size) noexcept {
  if (opaque == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto d = read<Descriptor>(opaque);
  cublasStatus_t const status =
      with_field(d, attr, [&](auto& field) { return set_value(field, buf, size); });
  if (status == CUBLAS_STATUS_SUCCESS) write(opaque, d);
  return status;
}

template <typename Descriptor, typename Opaque, typename Attribute>
cublasStatus_t get_attribute(Opaque const* opaque, Attribute attr, void* buf, std::size_t size,
                             std::size_t* written) noexcept {
  if (opaque == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto const d = read<Descriptor>(opaque);
  return with_field(d, attr,
                    [&](auto const& field) { return get_value(field, buf, size, written); });
}

// cublasLt*Init_internal: the descriptor in the caller's storage of `size` bytes,
// "CUBLAS_STATUS_ALLOC_FAILED if size of the pre-allocated space is insufficient".
template <typename Opaque, typename Descriptor>
cublasStatus_t init_in_place(Opaque* opaque, std::size_t size, Descriptor const& initial) noexcept {
  if (opaque == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (size < sizeof(Opaque)) return CUBLAS_STATUS_ALLOC_FAILED;
  write(opaque, initial);
  return CUBLAS_STATUS_SUCCESS;
}

bool element_type_of(std::uint32_t type, detail::element_type& out) noexcept {
  switch (type) {
    case CUDA_R_32F: out = detail::element_type::float32; return true;
    case CUDA_R_16F: out = detail::element_type::float16; return true;
    case CUDA_R_16BF: out = detail::element_type::bfloat16; return true;
    default: return false;
  }
}

bool aligned(void const* p, detail::element_type type) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(detail::size_of(type)) ==
         0;
}

bool transposes(std::int32_t op) noexcept {
  // CUBLAS_OP_C on real data is the transpose (cuBLAS documentation, cublasOperation_t).
  return op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// The epilogues the simulator models, decomposed (cublasLt.h, cublasLtEpilogue_t). RELU and its
// kin are not modelled: NOT_SUPPORTED.
bool steps_of(std::uint32_t epilogue, detail::epilogue_steps& steps) noexcept {
  steps = {};
  switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: return true;
    case CUBLASLT_EPILOGUE_BIAS: steps.add_bias = true; return true;
    case CUBLASLT_EPILOGUE_GELU: steps.gelu = true; return true;
    case CUBLASLT_EPILOGUE_GELU_BIAS: steps.gelu = steps.add_bias = true; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX: steps.gelu = steps.store_aux = true; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
      steps.gelu = steps.store_aux = steps.add_bias = true;
      return true;
    case CUBLASLT_EPILOGUE_DGELU: steps.gelu_gradient = true; return true;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
      steps.gelu_gradient = steps.bias_gradient_of_d = true;
      return true;
    case CUBLASLT_EPILOGUE_BGRADA: steps.bias_gradient_of_a = true; return true;
    case CUBLASLT_EPILOGUE_BGRADB: steps.bias_gradient_of_b = true; return true;
    default: return false;
  }
}

bool uses_aux(detail::epilogue_steps const& s) noexcept {
  return s.store_aux || s.gelu_gradient;
}
bool uses_bias_pointer(detail::epilogue_steps const& s) noexcept {
  return s.add_bias || s.bias_gradient_of_d || s.bias_gradient_of_a || s.bias_gradient_of_b;
}

// Compute and scale types: fp32 accumulation, fp32 alpha and beta (cuBLAS documentation,
// cublasLtMatmul, table of supported type combinations). Other compute types: not modelled.
bool compute_supported(std::int32_t compute, std::int32_t scale) noexcept {
  return (compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_FAST_TF32) &&
         scale == CUDA_R_32F;
}

// Element types: A and B alike, C and D alike; D of A's type or fp32; TF32 only for fp32 data
// (cuBLAS documentation, cublasLtMatmul, supported type combinations). Fills `out` with A's, B's,
// C's and D's element types where the combination is supported.
bool element_types_supported(std::int32_t compute, std::uint32_t a, std::uint32_t b,
                             std::uint32_t c, std::uint32_t d,
                             std::array<detail::element_type, 4>& out) noexcept {
  auto& [at, bt, ct, dt] = out;
  if (!element_type_of(a, at) || !element_type_of(b, bt) || !element_type_of(c, ct) ||
      !element_type_of(d, dt)) {
    return false;
  }
  if (at != bt || ct != dt || (dt != at && dt != detail::element_type::float32)) return false;
  return compute != CUBLAS_COMPUTE_32F_FAST_TF32 || at == detail::element_type::float32;
}

bool element_types_supported(std::int32_t compute, std::uint32_t a, std::uint32_t b,
                             std::uint32_t c, std::uint32_t d) noexcept {
  std::array<detail::element_type, 4> unused{};
  return element_types_supported(compute, a, b, c, d, unused);
}

// Everything cublasLtMatmul and cublasLtMatmulAlgoGetHeuristic check alike: the descriptors
// against each other, and the bias and aux pointers' values (the heuristic "depend[s] on its
// value to determine expected pointer alignment", cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER).
// Fills `p` without the operand pointers and scalars.
cublasStatus_t describe(cublasLtMatmulDesc_t desc_handle, cublasLtMatrixLayout_t a_handle,
                        cublasLtMatrixLayout_t b_handle, cublasLtMatrixLayout_t c_handle,
                        cublasLtMatrixLayout_t d_handle, detail::matmul_problem& p) noexcept {
  if (desc_handle == nullptr || a_handle == nullptr || b_handle == nullptr || c_handle == nullptr ||
      d_handle == nullptr) {
    return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE, "a descriptor or layout is null");
  }
  auto const desc = read<matmul_descriptor>(desc_handle);
  auto const a = read<layout_descriptor>(a_handle);
  auto const b = read<layout_descriptor>(b_handle);
  auto const c = read<layout_descriptor>(c_handle);
  auto const d = read<layout_descriptor>(d_handle);

  if (!compute_supported(desc.compute_type, desc.scale_type))
    return cublaslt_log::because(CUBLAS_STATUS_NOT_SUPPORTED,
                                 "only CUBLAS_COMPUTE_32F (or 32F_FAST_TF32) with CUDA_R_32F "
                                 "scales is modelled by the simulated device");
  // Device pointer modes, row-major and other orders, planar complex, pointer-array batches,
  // TRANSC ("Currently only CUBLAS_OP_N is supported") and fill modes are not modelled.
  if (desc.pointer_mode != CUBLASLT_POINTER_MODE_HOST || desc.transc != CUBLAS_OP_N ||
      desc.fill_mode != CUBLAS_FILL_MODE_FULL) {
    return cublaslt_log::because(CUBLAS_STATUS_NOT_SUPPORTED,
                                 "device pointer mode, TRANSC other than N and fill modes are not "
                                 "modelled by the simulated device");
  }
  for (layout_descriptor const* l : {&a, &b, &c, &d}) {
    if (l->order != CUBLASLT_ORDER_COL || l->plane_offset != 0 || l->batch_mode != 0)
      return cublaslt_log::because(
          CUBLAS_STATUS_NOT_SUPPORTED,
          "orders other than CUBLASLT_ORDER_COL, planar complex and pointer-array batches are not "
          "modelled by the simulated device");
    // "Usually only values that can be expressed as int32_t are supported" (ROWS, COLS).
    if (l->rows > std::numeric_limits<std::int32_t>::max() ||
        l->cols > std::numeric_limits<std::int32_t>::max()) {
      return cublaslt_log::because(CUBLAS_STATUS_NOT_SUPPORTED,
                                   "rows or columns beyond int32 are not supported");
    }
    // LD "must be large enough so that matrix memory locations are not overlapping (e.g.
    // greater or equal to CUBLASLT_MATRIX_LAYOUT_ROWS in case of CUBLASLT_ORDER_COL)"; an empty
    // matrix still needs ld >= 1, as BLAS asks max(1, rows).
    if (l->ld < 1 || static_cast<std::uint64_t>(l->ld) < l->rows)
      return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE,
                                   "a leading dimension is below 1 or below its matrix's rows");
    if (l->batch_count < 1)
      return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE, "a batch count is below 1");
  }
  std::array<detail::element_type, 4> types{};
  if (!element_types_supported(desc.compute_type, a.type, b.type, c.type, d.type, types)) {
    return cublaslt_log::because(
        CUBLAS_STATUS_NOT_SUPPORTED,
        "that combination of A, B, C and D types is not one cublasLtMatmul supports (or "
        "fp8/integer types, not modelled by the simulated device)");
  }
  auto const [at, bt, ct, dt] = types;
  bool const tf32 = desc.compute_type == CUBLAS_COMPUTE_32F_FAST_TF32;
  if (desc.transa != CUBLAS_OP_N && !transposes(desc.transa))
    return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE, "TRANSA is not a cublasOperation_t");
  if (desc.transb != CUBLAS_OP_N && !transposes(desc.transb))
    return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE, "TRANSB is not a cublasOperation_t");

  // Shapes: op(A) is m x k, op(B) k x n, C and D m x n ("D = alpha*(A*B) + beta*(C)").
  bool const ta = transposes(desc.transa);
  bool const tb = transposes(desc.transb);
  std::uint64_t const m = d.rows;
  std::uint64_t const n = d.cols;
  std::uint64_t const k = ta ? a.rows : a.cols;
  if ((ta ? a.cols : a.rows) != m || (tb ? b.cols : b.rows) != k || (tb ? b.rows : b.cols) != n ||
      c.rows != m || c.cols != n) {
    return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE,
                                 "the shapes of op(A), op(B), C and D do not agree");
  }
  // Strided batches: every layout the same count (the simulator does not broadcast a single A or
  // B over a batch; the documentation does not promise it).
  if (a.batch_count != d.batch_count || b.batch_count != d.batch_count ||
      c.batch_count != d.batch_count) {
    return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE, "the layouts' batch counts differ");
  }

  detail::epilogue_steps steps;
  if (!steps_of(desc.epilogue, steps))
    return cublaslt_log::because(
        CUBLAS_STATUS_NOT_SUPPORTED,
        "that epilogue is not modelled by the simulated device (RELU and its kin, fp8 amax)");
  // Beyond cublasLt.h, as an H100 with cuBLASLt 13.0 answers (docs/validation.md): BGRADA runs
  // only with op(A) = N and BGRADB only with op(B) = T, in every type; a bias pointer set for an
  // epilogue that neither reads nor writes a bias is INVALID_VALUE.
  if ((steps.bias_gradient_of_a && ta) || (steps.bias_gradient_of_b && !tb))
    return cublaslt_log::because(
        CUBLAS_STATUS_NOT_SUPPORTED,
        "BGRADA needs op(A) = N and BGRADB op(B) = T (as an H100 answers)");
  if (!uses_bias_pointer(steps) && desc.bias != nullptr)
    return cublaslt_log::because(
        CUBLAS_STATUS_INVALID_VALUE,
        "a bias pointer is set for an epilogue that neither reads nor writes a bias");
  // Bias and bias-gradient elements have D's type by default; fp32 is accepted too
  // (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE). Aux elements have D's type (EPILOGUE_AUX_DATA_TYPE:
  // "the same as the type of elements of the output matrix"; the fp8 exceptions are not modelled).
  detail::element_type bias_type = dt;
  if (desc.bias_data_type != -1) {
    if (!element_type_of(static_cast<std::uint32_t>(desc.bias_data_type), bias_type) ||
        (bias_type != dt && bias_type != detail::element_type::float32)) {
      return cublaslt_log::because(CUBLAS_STATUS_NOT_SUPPORTED,
                                   "the bias data type must be D's type or fp32");
    }
  }
  if (desc.aux_data_type != -1) {
    detail::element_type aux_type{};
    if (!element_type_of(static_cast<std::uint32_t>(desc.aux_data_type), aux_type) ||
        aux_type != dt) {
      return cublaslt_log::because(CUBLAS_STATUS_NOT_SUPPORTED,
                                   "the aux data type must be D's type");
    }
  }
  if (uses_aux(steps)) {
    // EPILOGUE_AUX_LD: "Must be divisible by 8 and be no less than the number of rows in the
    // output matrix"; AUX_BATCH_STRIDE: "Must be divisible by 8".
    if (desc.aux_ld % 8 != 0 ||
        desc.aux_ld < static_cast<std::int64_t>(std::max<std::uint64_t>(m, 1)))
      return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE,
                                   "EPILOGUE_AUX_LD must be divisible by 8 and at least D's rows");
    if (desc.aux_batch_stride % 8 != 0)
      return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE,
                                   "EPILOGUE_AUX_BATCH_STRIDE must be divisible by 8");
    if (desc.aux != nullptr && !aligned(desc.aux, dt))
      return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE,
                                   "the aux pointer is not aligned to its element type");
  }
  if (uses_bias_pointer(steps) && desc.bias != nullptr && !aligned(desc.bias, bias_type))
    return cublaslt_log::because(CUBLAS_STATUS_INVALID_VALUE,
                                 "the bias pointer is not aligned to its element type");

  p = detail::matmul_problem{};
  p.m = static_cast<std::int64_t>(m);
  p.n = static_cast<std::int64_t>(n);
  p.k = static_cast<std::int64_t>(k);
  p.batch_count = d.batch_count;
  p.transpose_a = ta;
  p.transpose_b = tb;
  p.tf32 = tf32;
  p.a = {nullptr, at, a.ld, a.batch_stride};
  p.b = {nullptr, bt, b.ld, b.batch_stride};
  p.c = {nullptr, ct, c.ld, c.batch_stride};
  p.d_type = dt;
  p.ldd = d.ld;
  p.d_batch_stride = d.batch_stride;
  p.steps = steps;
  p.bias_type = bias_type;
  p.bias_batch_stride = desc.bias_batch_stride;
  p.aux_type = dt;
  p.aux_ld = desc.aux_ld;
  p.aux_batch_stride = desc.aux_batch_stride;
  bool const gradient =
      steps.bias_gradient_of_d || steps.bias_gradient_of_a || steps.bias_gradient_of_b;
  if (steps.add_bias) p.bias = desc.bias;
  if (gradient) p.bias_gradient = const_cast<void*>(desc.bias);  // "Bias gradient case: void *"
  if (uses_aux(steps)) p.aux = const_cast<void*>(desc.aux);      // "Forward pass: void *"
  return CUBLAS_STATUS_SUCCESS;
}

// The matmul as one kernel of the simulated device (grid 1x1x1: the whole product in one run).
class matmul_task final : public sim::kernel_task {
 public:
  matmul_task(detail::matmul_problem const& problem, char const* name, dim3 grid = dim3{1, 1, 1},
              dim3 block = dim3{1, 1, 1}, std::size_t shared = 0)
      : kernel_task{grid, block, shared}, problem_{problem}, name_{name} {}

  [[nodiscard]] char const* name() const noexcept override { return name_; }
  [[nodiscard]] void const* function() const noexcept override { return name_; }
  void run() const override { detail::run_matmul(problem_); }
  [[nodiscard]] std::vector<sim::pointer_argument> pointer_arguments() const override {
    // Each matrix's span from its layout: rows, columns, leading dimension, batch count and
    // stride (cublasLt.h: CUBLASLT_MATRIX_LAYOUT_*, the bias, aux and their batch strides).
    detail::matmul_problem const& p = problem_;
    std::int64_t const batches = p.batch_count;
    auto matrix = [batches](detail::matrix_operand const& operand, std::int64_t rows,
                            std::int64_t cols) {
      return detail::span_bytes(operand.type, rows, cols, operand.ld, batches,
                                operand.batch_stride);
    };
    // A vector of `length` per batch: the bias, the bias gradient.
    auto vector = [&](std::int64_t length) {
      return detail::span_bytes(p.bias_type, length, 1, length, batches, p.bias_batch_stride);
    };
    std::size_t const a_bytes =
        p.transpose_a ? matrix(p.a, p.k, p.m) : matrix(p.a, p.m, p.k);  // stored op(A)ᵀ or op(A)
    std::size_t const b_bytes = p.transpose_b ? matrix(p.b, p.n, p.k) : matrix(p.b, p.k, p.n);
    std::size_t const d_bytes =
        detail::span_bytes(p.d_type, p.m, p.n, p.ldd, batches, p.d_batch_stride);
    std::size_t const aux_bytes =
        detail::span_bytes(p.aux_type, p.m, p.n, p.aux_ld, batches, p.aux_batch_stride);
    // BGRADB sums op(B) over k: one entry per column of D; the other gradients one per row.
    std::size_t const gradient_bytes = vector(p.steps.bias_gradient_of_b ? p.n : p.m);
    std::vector<sim::pointer_argument> out;
    out.push_back({p.a.data, true, a_bytes});
    out.push_back({p.b.data, true, b_bytes});
    if (p.beta != 0.0F) out.push_back({p.c.data, true, matrix(p.c, p.m, p.n)});
    if (p.steps.add_bias) out.push_back({p.bias, true, vector(p.m)});
    if (p.steps.gelu_gradient) out.push_back({p.aux, true, aux_bytes});
    out.push_back({p.d, false, d_bytes});
    if (p.steps.store_aux) out.push_back({p.aux, false, aux_bytes});
    if (p.bias_gradient != nullptr) out.push_back({p.bias_gradient, false, gradient_bytes});
    return out;
  }
  [[nodiscard]] std::shared_ptr<kernel_task const> with_configuration(
      dim3 grid, dim3 block, std::size_t dynamic_shared_bytes) const override {
    return std::make_shared<matmul_task>(problem_, name_, grid, block, dynamic_shared_bytes);
  }

 private:
  detail::matmul_problem problem_;
  char const* name_;
};

// Enqueues the task; a launch the runtime refuses (a bad stream, a capture that refuses work)
// sets the thread's last error, as a kernel launch inside cuBLAS would, and is reported as
// CUBLAS_STATUS_EXECUTION_FAILED ("if cuda reported execution error from the device").
cublasStatus_t enqueue(detail::matmul_problem const& problem, char const* name,
                       cudaStream_t stream) noexcept {
  cudaError_t const before = cudaPeekAtLastError();
  try {
    detail::library_call_scope const inside{name};  // names it if the launch breaks a capture
    detail::enqueue_kernel(stream, std::make_shared<matmul_task>(problem, name));
  } catch (std::bad_alloc const&) {
    return CUBLAS_STATUS_ALLOC_FAILED;
  }
  cudaError_t const after = cudaPeekAtLastError();
  return after != cudaSuccess && after != before ? CUBLAS_STATUS_EXECUTION_FAILED
                                                 : CUBLAS_STATUS_SUCCESS;
}

bool live(cublasLtHandle_t handle) noexcept {
  return handle != nullptr && handle->magic == lt_handle_magic;
}

matmul_descriptor initial_matmul(cublasComputeType_t compute, cudaDataType_t scale) noexcept {
  matmul_descriptor initial;
  initial.compute_type = compute;
  initial.scale_type = scale;
  return initial;
}

layout_descriptor initial_layout(cudaDataType type, std::uint64_t rows, std::uint64_t cols,
                                 std::int64_t ld) noexcept {
  layout_descriptor initial;
  initial.type = static_cast<std::uint32_t>(type);
  initial.rows = rows;
  initial.cols = cols;
  initial.ld = ld;
  return initial;
}

template <typename Opaque, typename Descriptor>
cublasStatus_t create(Opaque** out, Descriptor const& initial) noexcept {
  if (out == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* opaque = new (std::nothrow) Opaque{};
  if (opaque == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  write(opaque, initial);
  *out = opaque;
  return CUBLAS_STATUS_SUCCESS;
}

// The algorithm made for these types, in cublasLt.h's default configuration.
algorithm algorithm_of(std::int32_t compute, std::int32_t scale, std::uint32_t a, std::uint32_t b,
                       std::uint32_t c, std::uint32_t d) noexcept {
  algorithm made;
  made.compute_type = compute;
  made.scale_type = scale;
  made.a_type = a;
  made.b_type = b;
  made.c_type = c;
  made.d_type = d;
  return made;
}

// The algorithm the heuristic gives for a problem describe() accepted.
algorithm algorithm_for(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                        cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                        cublasLtMatrixLayout_t d) noexcept {
  auto const operation = read<matmul_descriptor>(desc);
  return algorithm_of(operation.compute_type, operation.scale_type,
                      read<layout_descriptor>(a).type, read<layout_descriptor>(b).type,
                      read<layout_descriptor>(c).type, read<layout_descriptor>(d).type);
}

// cublasLtMatmulAlgoCheck: "CUBLAS_STATUS_INVALID_VALUE if matrix layout descriptors or operation
// descriptor don't match algo descriptor", "CUBLAS_STATUS_NOT_SUPPORTED if algo configuration or
// data type combination is not currently supported"; the descriptors already passed describe().
cublasStatus_t algorithm_runs(cublasLtMatmulAlgo_t const& opaque, cublasLtMatmulDesc_t desc,
                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d) noexcept {
  auto const given = read<algorithm>(&opaque);
  if (given.magic != algorithm_magic) return CUBLAS_STATUS_INVALID_VALUE;
  algorithm const wanted = algorithm_for(desc, a, b, c, d);
  if (given.compute_type != wanted.compute_type || given.scale_type != wanted.scale_type ||
      given.a_type != wanted.a_type || given.b_type != wanted.b_type ||
      given.c_type != wanted.c_type || given.d_type != wanted.d_type) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  algorithm const defaults;
  if (given.id != the_algorithm_id || given.tile != defaults.tile ||
      given.splitk != defaults.splitk || given.reduction != defaults.reduction ||
      given.swizzling != defaults.swizzling || given.custom_option != defaults.custom_option ||
      given.stages != defaults.stages || given.inner_shape != defaults.inner_shape ||
      given.cluster_shape != defaults.cluster_shape) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// An array capability (tile or stages ids): sizeInBytes 0 asks its size.
template <std::size_t count>
cublasStatus_t get_array(std::array<std::uint32_t, count> const& values, void* buf,
                         std::size_t size, std::size_t* written) noexcept {
  std::size_t const bytes = sizeof(values);
  if (size == 0) {
    if (written == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *written = bytes;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size < bytes) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, values.data(), bytes);
  if (written != nullptr) *written = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t capability(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoCapAttributes_t attr,
                          void* buf, size_t sizeInBytes, size_t* sizeWritten) {
  if (algo == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto const a = read<algorithm>(algo);
  if (a.magic != algorithm_magic) return CUBLAS_STATUS_INVALID_VALUE;
  auto const answer = [&](auto value) { return get_value(value, buf, sizeInBytes, sizeWritten); };
  auto const alignment = [&](std::uint32_t type) {
    detail::element_type element{};
    return answer(element_type_of(type, element)
                      ? static_cast<std::uint32_t>(detail::size_of(element))
                      : std::uint32_t{0});
  };
  switch (attr) {
    case CUBLASLT_ALGO_CAP_SPLITK_SUPPORT:
    case CUBLASLT_ALGO_CAP_UPLO_SUPPORT:
    case CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX:
    case CUBLASLT_ALGO_CAP_CUSTOM_MEMORY_ORDER:
    case CUBLASLT_ALGO_CAP_LD_NEGATIVE:
    case CUBLASLT_ALGO_CAP_POINTER_ARRAY_BATCH_SUPPORT:
    case CUBLASLT_ALGO_CAP_FLOATING_POINT_EMULATION_SUPPORT: return answer(std::int32_t{0});
    case CUBLASLT_ALGO_CAP_STRIDED_BATCH_SUPPORT:
    case CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT: return answer(std::int32_t{1});
    case CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK:
      return answer(std::uint32_t{CUBLASLT_REDUCTION_SCHEME_NONE});
    case CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT: return answer(std::uint32_t{0});
    case CUBLASLT_ALGO_CAP_POINTER_MODE_MASK:
      return answer(std::uint32_t{CUBLASLT_POINTER_MODE_MASK_HOST});
    case CUBLASLT_ALGO_CAP_EPILOGUE_MASK: {
      std::uint32_t mask = 0;
      for (std::uint32_t const e :
           {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU,
            CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX,
            CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_DGELU_BGRAD,
            CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB}) {
        mask |= e;
      }
      return answer(mask);
    }
    case CUBLASLT_ALGO_CAP_TILE_IDS:
      return get_array(std::array<std::uint32_t, 1>{CUBLASLT_MATMUL_TILE_UNDEFINED}, buf,
                       sizeInBytes, sizeWritten);
    case CUBLASLT_ALGO_CAP_STAGES_IDS:
      return get_array(std::array<std::uint32_t, 1>{CUBLASLT_MATMUL_STAGES_UNDEFINED}, buf,
                       sizeInBytes, sizeWritten);
    case CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS:
      // Multiply-adds accumulated in fp32 (the host's FMA where it has one).
      return answer(cublasLtNumericalImplFlags_t{CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA |
                                                 CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32F});
    case CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES: return alignment(a.a_type);
    case CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES: return alignment(a.b_type);
    case CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES: return alignment(a.c_type);
    case CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES: return alignment(a.d_type);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

}  // namespace

extern "C" {

// The library's own functions: names and descriptions of the statuses (cublas_api.h's
// enumeration, described as the cuBLAS documentation's "cublasStatus_t" section does), its
// version as cublas_api.h gives it, and the CPU instruction mask, which the simulator keeps and
// does not use (it runs no ISA-specific code).
char const* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

char const* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "the function requires a feature absent from the device architecture";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requested requires a license";
  }
  return "unknown cuBLAS status";
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

size_t cublasLtGetCudartVersion(void) { return CUDART_VERSION; }

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  switch (type) {
    case MAJOR_VERSION:
      *value = CUBLAS_VER_MAJOR;
      return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
    case MINOR_VERSION:
      *value = CUBLAS_VER_MINOR;
      return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
    case PATCH_LEVEL:
      *value = CUBLAS_VER_PATCH;
      return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
  }
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
}

unsigned cublasLtDisableCpuInstructionsSetMask(unsigned mask) {
  static std::atomic<unsigned> disabled{0};
  return disabled.exchange(mask);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr) return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  auto* handle = new (std::nothrow) cublasLtContext{lt_handle_magic};
  if (handle == nullptr) return cublaslt_log::finished(__func__, CUBLAS_STATUS_ALLOC_FAILED);
  *lightHandle = handle;
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!live(lightHandle)) return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_INITIALIZED);
  lightHandle->magic = 0;
  delete lightHandle;
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType) {
  return cublaslt_log::finished(__func__,
                                create(matmulDesc, initial_matmul(computeType, scaleType)));
}

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t matmulDesc, size_t size,
                                               cublasComputeType_t computeType,
                                               cudaDataType_t scaleType) {
  return cublaslt_log::finished(
      __func__, init_in_place(matmulDesc, size, initial_matmul(computeType, scaleType)));
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  delete matmulDesc;  // NULL is a no-op, as for the other destroy calls
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes) {
  return cublaslt_log::finished(
      __func__, set_attribute<matmul_descriptor>(matmulDesc, attr, buf, sizeInBytes));
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t sizeInBytes, size_t* sizeWritten) {
  return cublaslt_log::finished(
      __func__, get_attribute<matmul_descriptor>(matmulDesc, attr, buf, sizeInBytes, sizeWritten));
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  return cublaslt_log::finished(__func__, create(matLayout, initial_layout(type, rows, cols, ld)));
}

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t matLayout, size_t size,
                                                 cudaDataType type, uint64_t rows, uint64_t cols,
                                                 int64_t ld) {
  return cublaslt_log::finished(
      __func__, init_in_place(matLayout, size, initial_layout(type, rows, cols, ld)));
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  delete matLayout;
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
  return cublaslt_log::finished(
      __func__, set_attribute<layout_descriptor>(matLayout, attr, buf, sizeInBytes));
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, void* buf,
                                                size_t sizeInBytes, size_t* sizeWritten) {
  return cublaslt_log::finished(
      __func__, get_attribute<layout_descriptor>(matLayout, attr, buf, sizeInBytes, sizeWritten));
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return cublaslt_log::finished(__func__, create(pref, preference_descriptor{}));
}

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size) {
  return cublaslt_log::finished(__func__, init_in_place(pref, size, preference_descriptor{}));
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  return cublaslt_log::finished(__func__,
                                set_attribute<preference_descriptor>(pref, attr, buf, sizeInBytes));
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    void* buf, size_t sizeInBytes,
                                                    size_t* sizeWritten) {
  return cublaslt_log::finished(
      __func__, get_attribute<preference_descriptor>(pref, attr, buf, sizeInBytes, sizeWritten));
}

// The workspace an algorithm needs. DGELU_BGRAD needs one on an H100 with cuBLASLt 13.0: without
// it the matmul is NOT_SUPPORTED, and the heuristic asks 127 bytes for 24 rows and 303 for 64
// (docs/validation.md). The simulator asks more than that, a partial sum per row and a margin,
// so that a caller that passes what the heuristic asked for passes enough on the GPU too.
std::size_t workspace_needed(detail::matmul_problem const& p) noexcept {
  if (!p.steps.bias_gradient_of_d) return 0;
  return static_cast<std::size_t>(p.batch_count) * (static_cast<std::size_t>(p.m) * 8 + 256);
}

// One algorithm: the simulator's, which works for every configuration describe() accepts, needs
// the workspace of workspace_needed() and reads any element-aligned pointer, so the alignment
// preferences exclude nothing.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  if (!live(lightHandle)) return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_INITIALIZED);
  // "CUBLAS_STATUS_INVALID_VALUE if requestedAlgoCount is less or equal to zero".
  if (requestedAlgoCount <= 0 || preference == nullptr || heuristicResultsArray == nullptr ||
      returnAlgoCount == nullptr) {
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  }
  *returnAlgoCount = 0;
  detail::matmul_problem problem;
  // A configuration the simulator cannot run has no algorithm: "CUBLAS_STATUS_NOT_SUPPORTED if no
  // heuristic function available for current configuration".
  if (describe(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, problem) != CUBLAS_STATUS_SUCCESS)
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_SUPPORTED);
  std::size_t const workspace = workspace_needed(problem);
  if (workspace > read<preference_descriptor>(preference).max_workspace_bytes)
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatmulHeuristicResult_t& result = heuristicResultsArray[0];
  result = cublasLtMatmulHeuristicResult_t{};
  write(&result.algo, algorithm_for(operationDesc, Adesc, Bdesc, Cdesc, Ddesc));
  result.workspaceSize = workspace;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0F;
  *returnAlgoCount = 1;
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

// "Routine to get all algo IDs that can potentially run": the simulator's one, for the types
// it runs; none for others.
cublasStatus_t cublasLtMatmulAlgoGetIds(cublasLtHandle_t lightHandle,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType,
                                        cudaDataType_t Atype, cudaDataType_t Btype,
                                        cudaDataType_t Ctype, cudaDataType_t Dtype,
                                        int requestedAlgoCount, int algoIdsArray[],
                                        int* returnAlgoCount) {
  if (!live(lightHandle)) return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_INITIALIZED);
  if (requestedAlgoCount <= 0 || algoIdsArray == nullptr || returnAlgoCount == nullptr) {
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  }
  *returnAlgoCount = 0;
  if (compute_supported(computeType, scaleType) &&
      element_types_supported(computeType, Atype, Btype, Ctype, Dtype)) {
    algoIdsArray[0] = the_algorithm_id;
    *returnAlgoCount = 1;
  }
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

// "CUBLAS_STATUS_INVALID_VALUE if algo is NULL or algoId is outside of recognized range",
// "CUBLAS_STATUS_NOT_SUPPORTED if algoId is not supported for given combination of data types".
cublasStatus_t cublasLtMatmulAlgoInit(cublasLtHandle_t lightHandle, cublasComputeType_t computeType,
                                      cudaDataType_t scaleType, cudaDataType_t Atype,
                                      cudaDataType_t Btype, cudaDataType_t Ctype,
                                      cudaDataType_t Dtype, int algoId,
                                      cublasLtMatmulAlgo_t* algo) {
  if (!live(lightHandle)) return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_INITIALIZED);
  if (algo == nullptr || algoId != the_algorithm_id)
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  if (!compute_supported(computeType, scaleType) ||
      !element_types_supported(computeType, Atype, Btype, Ctype, Dtype)) {
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  *algo = cublasLtMatmulAlgo_t{};
  write(algo, algorithm_of(computeType, scaleType, static_cast<std::uint32_t>(Atype),
                           static_cast<std::uint32_t>(Btype), static_cast<std::uint32_t>(Ctype),
                           static_cast<std::uint32_t>(Dtype)));
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

// "Result includes required workspace size and calculated wave count"; "algo field is never
// updated".
cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t lightHandle,
                                       cublasLtMatmulDesc_t operationDesc,
                                       cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                       cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                       const cublasLtMatmulAlgo_t* algo,
                                       cublasLtMatmulHeuristicResult_t* result) {
  if (!live(lightHandle)) return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_INITIALIZED);
  if (algo == nullptr || result == nullptr)
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  detail::matmul_problem problem;
  if (cublasStatus_t const s = describe(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, problem);
      s != CUBLAS_STATUS_SUCCESS) {
    return cublaslt_log::finished(__func__, s);
  }
  if (cublasStatus_t const runs = algorithm_runs(*algo, operationDesc, Adesc, Bdesc, Cdesc, Ddesc);
      runs != CUBLAS_STATUS_SUCCESS) {
    return cublaslt_log::finished(__func__, runs);
  }
  result->workspaceSize = workspace_needed(problem);
  result->state = CUBLAS_STATUS_SUCCESS;
  result->wavesCount = 1.0F;
  return cublaslt_log::finished(__func__, CUBLAS_STATUS_SUCCESS);
}

// What the simulator's algorithm can do (cublasLtMatmulAlgoCapAttributes_t): strided batches and
// a result out of place; no split-K, reduction scheme, swizzling, custom option, triangular
// (UPLO) form, negative leading dimension, pointer arrays or emulation; host pointer mode; the
// epilogues it models; one undefined tile and stage; element-aligned operands.
cublasStatus_t cublasLtMatmulAlgoCapGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                 cublasLtMatmulAlgoCapAttributes_t attr, void* buf,
                                                 size_t sizeInBytes, size_t* sizeWritten) {
  return cublaslt_log::finished(__func__, capability(algo, attr, buf, sizeInBytes, sizeWritten));
}

cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  return cublaslt_log::finished(__func__, set_attribute<algorithm>(algo, attr, buf, sizeInBytes));
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    void* buf, size_t sizeInBytes,
                                                    size_t* sizeWritten) {
  return cublaslt_log::finished(
      __func__, get_attribute<algorithm>(algo, attr, buf, sizeInBytes, sizeWritten));
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!live(lightHandle)) return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_INITIALIZED);
  detail::matmul_problem p;
  if (cublasStatus_t const s = describe(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, p);
      s != CUBLAS_STATUS_SUCCESS) {
    return cublaslt_log::finished(__func__, s);
  }
  // The simulator's algorithm computes without the workspace, but a GPU's needs it.
  if (std::size_t const needed = workspace_needed(p);
      needed > 0 && (workspace == nullptr || workspaceSizeInBytes < needed)) {
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  // An algorithm from the heuristic or cublasLtMatmulAlgoInit (or NULL: "the implementation will
  // pick one"), made for these types and configured as it runs; anything else cannot run.
  if (algo != nullptr) {
    if (cublasStatus_t const runs = algorithm_runs(*algo, computeDesc, Adesc, Bdesc, Cdesc, Ddesc);
        runs != CUBLAS_STATUS_SUCCESS) {
      return cublaslt_log::finished(__func__, runs);
    }
  }
  // Host pointer mode (CUBLASLT_POINTER_MODE_HOST): alpha and beta are read now, at call time,
  // and a captured node keeps the values.
  if (alpha == nullptr || beta == nullptr)
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  std::memcpy(&p.alpha, alpha, sizeof p.alpha);
  std::memcpy(&p.beta, beta, sizeof p.beta);
  // Operands. The documentation is silent on NULL operands; a GPU would fault on them, so they
  // are refused. C is read only when beta is not zero ("if beta == 0, C does not have to be a
  // valid input", cuBLAS documentation, cublas<t>gemm), so it may then be NULL.
  bool const empty = p.m == 0 || p.n == 0;
  if (!empty && (D == nullptr || (p.k != 0 && (A == nullptr || B == nullptr)) ||
                 (p.beta != 0.0F && C == nullptr))) {
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  }
  // Every element access is naturally aligned on a GPU ("Device Memory Accesses", CUDA
  // Programming Guide); a misaligned operand would fault there, so it is refused here.
  if (!aligned(A, p.a.type) || !aligned(B, p.b.type) || !aligned(C, p.c.type) ||
      !aligned(D, p.d_type)) {
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  }
  // In place (C == D) needs C's layout to be D's; the documentation is silent, and a different
  // ld would let D's writes overtake C's reads on a GPU.
  if (C == D && C != nullptr &&
      (p.c.ld != p.ldd || p.c.type != p.d_type || p.c.batch_stride != p.d_batch_stride)) {
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  }
  // The epilogue's pointers: BIAS needs the bias, GELU_AUX the aux output, DGELU the aux input,
  // the gradient epilogues the bias-gradient output (CUBLASLT_MATMUL_DESC_BIAS_POINTER and
  // EPILOGUE_AUX_POINTER: "default: NULL"; the documentation does not say what NULL does, so it
  // is refused).
  if (!empty &&
      ((p.steps.add_bias && p.bias == nullptr) ||
       ((p.steps.store_aux || p.steps.gelu_gradient) && p.aux == nullptr) ||
       ((p.steps.bias_gradient_of_d || p.steps.bias_gradient_of_a || p.steps.bias_gradient_of_b) &&
        p.bias_gradient == nullptr))) {
    return cublaslt_log::finished(__func__, CUBLAS_STATUS_INVALID_VALUE);
  }
  p.a.data = A;
  p.b.data = B;
  p.c.data = C;
  p.d = D;
  if (cublaslt_log::wanted(cublaslt_log::topic::trace)) {
    cublaslt_log::message(cublaslt_log::topic::trace, __func__,
                          "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" +
                              std::to_string(p.k) + " batch=" + std::to_string(p.batch_count) +
                              " transa=" + std::to_string(p.transpose_a ? 1 : 0) +
                              " transb=" + std::to_string(p.transpose_b ? 1 : 0));
  }
  return cublaslt_log::finished(__func__, enqueue(p, "cublasLtMatmul", stream));
}

// --- the logger (detail/cublaslt_log.hpp) ----------------------------------------------------

cublasStatus_t cublasLtLoggerSetCallback(cublasLtLoggerCallback_t callback) {
  cublaslt_log::set_callback(callback);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtLoggerSetFile(FILE* file) {
  cublaslt_log::set_file(file);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtLoggerOpenFile(const char* logFile) {
  return cublaslt_log::open_file(logFile);
}

cublasStatus_t cublasLtLoggerSetLevel(int level) {
  return cublaslt_log::set_level(level);
}

cublasStatus_t cublasLtLoggerSetMask(int mask) {
  cublaslt_log::set_mask(mask);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtLoggerForceDisable() {
  cublaslt_log::force_disable();
  return CUBLAS_STATUS_SUCCESS;
}

// --- cuBLAS: the handle, its stream, and SGEMM -----------------------------------------------

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* context = new (std::nothrow) cublasContext{blas_handle_magic, nullptr};
  if (context == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  *handle = context;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr || handle->magic != blas_handle_magic) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->magic = 0;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  if (handle == nullptr || handle->magic != blas_handle_magic) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = streamId;
  return CUBLAS_STATUS_SUCCESS;
}

// The simulator's SGEMM needs no workspace: the handle is checked, the workspace kept unused.
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     size_t workspaceSizeInBytes) {
  static_cast<void>(workspace);
  static_cast<void>(workspaceSizeInBytes);
  if (handle == nullptr || handle->magic != blas_handle_magic) return CUBLAS_STATUS_NOT_INITIALIZED;
  return CUBLAS_STATUS_SUCCESS;
}

// C = alpha·op(A)·op(B) + beta·C in fp32 with the default math mode (no TF32: cuBLAS
// documentation, cublasSetMathMode, CUBLAS_DEFAULT_MATH). Refusals as cublas<t>gemm lists them:
// "CUBLAS_STATUS_INVALID_VALUE: if m, n, k < 0 or if transa, transb != CUBLAS_OP_N, CUBLAS_OP_C,
// CUBLAS_OP_T or if lda < max(1, m) if transa == CUBLAS_OP_N and lda < max(1, k) otherwise ... or
// if ldc < max(1, m) or if alpha, beta == NULL".
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  if (handle == nullptr || handle->magic != blas_handle_magic) return CUBLAS_STATUS_NOT_INITIALIZED;
  bool const valid_ops = (transa == CUBLAS_OP_N || transposes(transa)) &&
                         (transb == CUBLAS_OP_N || transposes(transb));
  bool const ta = transposes(transa);
  bool const tb = transposes(transb);
  if (m < 0 || n < 0 || k < 0 || !valid_ops || lda < std::max(1, ta ? k : m) ||
      ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m) || alpha == nullptr ||
      beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;  // "quick return"
  detail::matmul_problem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.transpose_a = ta;
  p.transpose_b = tb;
  p.alpha = *alpha;
  p.beta = *beta;
  p.a = {A, detail::element_type::float32, lda, 0};
  p.b = {B, detail::element_type::float32, ldb, 0};
  p.c = {C, detail::element_type::float32, ldc, 0};
  p.d = C;
  p.ldd = ldc;
  return enqueue(p, "cublasSgemm", handle->stream);
}

}  // extern "C"
