// Causal attention on cuDNN's fused attention (ops/attention_cudnn.hpp), through the cuDNN
// frontend's graph API. Without GRAPHSTEP_WITH_CUDNN_SDPA (no frontend or cuDNN at configure
// time, or the simulated device) only the argument checks are compiled, and every path that
// would need cuDNN says what is missing.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <graphstep/cuda/check.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <graphstep/ops/attention_cudnn.hpp>
#include <graphstep/ops/attention_problem.hpp>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "detail/logger.hpp"

#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
#include <dlfcn.h>

#include <cmath>
#include <memory>
#include <unordered_map>

// The frontend reaches cuDNN through symbols it looks up in the library opened below
// (cudnn_dlhandle), and the CUDA runtime through libcudart.so.12 or .13, opened by name (the one
// graphstep runs on, when it is the shared runtime; CUDNN_FRONTEND_CUDART_LIB_NAME chooses
// otherwise): nothing links libcudnn, so graphstep's binaries start where cuDNN is absent, and
// its package names no cuDNN path.
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
// The frontend's JSON (de)serialization is not used here, and costs much of its compile time.
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
// With the two macros above the frontend's inline functions differ from those of any other copy
// of it in the same program (PyTorch's, a user's): a namespace of their own keeps the two apart.
#define cudnn_frontend graphstep_cudnn_frontend
#include <cudnn_frontend.h>

// The library handle the frontend looks cuDNN's symbols up in (open_cudnn() sets it).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
}  // namespace cudnn_frontend
#endif

namespace graphstep::ops {

namespace {

// Where the path is not built: what is missing, and what to do.
[[maybe_unused]] std::string not_built_reason() {
#if defined(GRAPHSTEP_CUDA_SIM)
  return "cuDNN's fused attention is not modelled on the simulated CUDA device, so the cuDNN "
         "attention path is not built for it; use the plain kernels of ops/attention.hpp";
#else
  return "graphstep was built without the cuDNN attention path (GRAPHSTEP_WITH_CUDNN_SDPA): the "
         "cuDNN frontend's headers or cuDNN were not found at configure time; run "
         "scripts/install-cudnn-frontend.sh (or set CUDNN_FRONTEND_HOME, and CUDNN_HOME where "
         "cuDNN is not beside the CUDA toolkit), then configure again";
#endif
}

#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)

namespace fe = cudnn_frontend;

// cuDNN, opened once for the process. The soname of the major version the headers describe comes
// first (the loader's search, LD_LIBRARY_PATH included); then the library found at configure
// time.
struct cudnn_library {
  void* handle{};
  std::size_t version{};
  std::string error;
};

cudnn_library open_cudnn() {
  cudnn_library library;
  std::string const soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string tried = soname;
  if (handle == nullptr) {
    char const* text = dlerror();
    tried += std::string{" ("} + (text != nullptr ? text : "not found") + ")";
#if defined(GRAPHSTEP_CUDNN_LIBRARY_PATH)
    handle = dlopen(GRAPHSTEP_CUDNN_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      text = dlerror();
      tried += std::string{", "} + GRAPHSTEP_CUDNN_LIBRARY_PATH + " (" +
               (text != nullptr ? text : "not found") + ")";
    }
#endif
  }
  if (handle == nullptr) {
    library.error = "cuDNN could not be loaded: tried " + tried + "; install cuDNN " +
                    std::to_string(CUDNN_MAJOR) + " or put its directory on LD_LIBRARY_PATH";
    return library;
  }
  // Set before the frontend's first call: each of its entry points looks its symbol up once.
  fe::cudnn_dlhandle = handle;
  try {
    library.version = fe::detail::get_backend_version();
  } catch (std::exception const& e) {
    library.error =
        std::string{"cuDNN was loaded but does not answer cudnnGetVersion: "} + e.what();
    return library;
  }
  library.handle = handle;
  return library;
}

cudnn_library const& cudnn() {
  static cudnn_library const library = open_cudnn();
  return library;
}

// cuDNN 9.0 is the first version whose fused attention takes every option used here (causal
// masking through the diagonal band, Stats, deterministic backward) in bfloat16 and float16.
constexpr std::size_t minimum_cudnn_version = 90000;

std::string version_text(std::size_t version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

// Calls cuDNN through the frontend's entry points; a failure throws cudnn_error, and so does an
// entry point that cannot be found (the frontend throws std::runtime_error then).
template <typename Call>
void cudnn_try(Call&& call, char const* text, char const* file, int line) {
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  try {
    status = call();
  } catch (std::exception const& e) {
    throw cudnn_error{
        static_cast<int>(CUDNN_STATUS_NOT_INITIALIZED),
        std::string{file} + ":" + std::to_string(line) + ": " + text + ": " + e.what()};
  }
  if (status != CUDNN_STATUS_SUCCESS) {
    graphstep::detail::throw_cudnn_error(static_cast<int>(status),
                                         fe::detail::get_error_string(status), text, file, line);
  }
}
#define GRAPHSTEP_CUDNN_FE_TRY(call) cudnn_try([&] { return (call); }, #call, __FILE__, __LINE__)

// Tensor ids of the two graphs' variant packs.
enum uid : std::int64_t {
  q_uid = 1,
  k_uid,
  v_uid,
  o_uid,
  stats_uid,
  do_uid,
  dq_uid,
  dk_uid,
  dv_uid
};

// The layouts of ops/attention.hpp in cuDNN's [B,H,T,D] order. qkv rows interleave q, k and v of
// every head (cuDNN's packed "BS3HD" layout): head h of token t of row b is at
// (b·T + t)·3HD + h·D, k and v H·D and 2·H·D further; out rows are [B·T, H·D]; Stats is [B,H,T].
struct layouts {
  std::vector<std::int64_t> dim, qkv_stride, out_stride, stats_dim, stats_stride;
  std::int64_t head_row{};  // H·D: from q to k, and from k to v, in elements

  explicit layouts(attention_shape const& s) {
    std::int64_t const b = s.batch;
    std::int64_t const t = s.sequence;
    std::int64_t const h = s.heads;
    std::int64_t const d = s.head_dim;
    head_row = h * d;
    dim = {b, h, t, d};
    qkv_stride = {t * 3 * head_row, d, 3 * head_row, 1};
    out_stride = {t * head_row, d, head_row, 1};
    stats_dim = {b, h, t, 1};
    stats_stride = {h * t, t, 1, 1};
  }
};

fe::DataType_t io_type(dtype type) {
  return type == dtype::bfloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

std::shared_ptr<fe::graph::Graph> new_graph(dtype type) {
  auto graph = std::make_shared<fe::graph::Graph>();
  // fp32 softmax and accumulation: the 16-bit type is storage only, as in ops/attention.hpp.
  graph->set_io_data_type(io_type(type))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& graph, char const* name,
                                                    std::int64_t id,
                                                    std::vector<std::int64_t> const& dim,
                                                    std::vector<std::int64_t> const& stride) {
  return graph.tensor(
      fe::graph::Tensor_attributes().set_name(name).set_uid(id).set_dim(dim).set_stride(stride));
}

// Position t attends to 0..t: the diagonal band's right bound 0, counted from the top left
// (query i sees key j ≤ i), which is what set_causal_mask(true) sets, spelled out.
template <typename Attributes>
void causal(Attributes& attributes, attention_shape const& s) {
  attributes.set_attn_scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim))))
      .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
      .set_diagonal_band_right_bound(0);
}

std::shared_ptr<fe::graph::Graph> forward_graph(attention_shape const& s, dtype type) {
  layouts const l{s};
  auto graph = new_graph(type);
  auto q = input(*graph, "q", q_uid, l.dim, l.qkv_stride);
  auto k = input(*graph, "k", k_uid, l.dim, l.qkv_stride);
  auto v = input(*graph, "v", v_uid, l.dim, l.qkv_stride);
  auto attributes =
      fe::graph::SDPA_attributes().set_name("causal_attention").set_generate_stats(true);
  causal(attributes, s);
  auto [o, stats] = graph->sdpa(q, k, v, attributes);
  o->set_output(true).set_uid(o_uid).set_dim(l.dim).set_stride(l.out_stride);
  stats->set_output(true)
      .set_uid(stats_uid)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim(l.stats_dim)
      .set_stride(l.stats_stride);
  return graph;
}

std::shared_ptr<fe::graph::Graph> backward_graph(attention_shape const& s, dtype type,
                                                 cudnn_attention_options const& options) {
  layouts const l{s};
  auto graph = new_graph(type);
  auto q = input(*graph, "q", q_uid, l.dim, l.qkv_stride);
  auto k = input(*graph, "k", k_uid, l.dim, l.qkv_stride);
  auto v = input(*graph, "v", v_uid, l.dim, l.qkv_stride);
  auto o = input(*graph, "o", o_uid, l.dim, l.out_stride);
  auto d_o = input(*graph, "dout", do_uid, l.dim, l.out_stride);
  auto stats = input(*graph, "logsumexp", stats_uid, l.stats_dim, l.stats_stride);
  stats->set_data_type(fe::DataType_t::FLOAT);
  auto attributes = fe::graph::SDPA_backward_attributes()
                        .set_name("causal_attention_backward")
                        .set_deterministic_algorithm(options.deterministic);
  causal(attributes, s);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats, attributes);
  dq->set_output(true).set_uid(dq_uid).set_dim(l.dim).set_stride(l.qkv_stride);
  dk->set_output(true).set_uid(dk_uid).set_dim(l.dim).set_stride(l.qkv_stride);
  dv->set_output(true).set_uid(dv_uid).set_dim(l.dim).set_stride(l.qkv_stride);
  return graph;
}

// The frontend's steps from a described graph to an execution plan; the first that fails says
// why, with the frontend's message. check_support() is where cuDNN refuses a layer it has no
// engine for.
void build(fe::graph::Graph& graph, cudnnHandle_t handle, std::string const& what) {
  auto const expect = [&what](fe::error_t result, char const* step) {
    GRAPHSTEP_EXPECTS(result.is_good(), what + ": cuDNN cannot run it (" + step +
                                            "): " + result.get_message() +
                                            "; use the plain kernels of ops/attention.hpp");
  };
  try {
    expect(graph.validate(), "validate");
    expect(graph.build_operation_graph(handle), "build_operation_graph");
    expect(graph.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
    expect(graph.check_support(), "check_support");
    expect(graph.build_plans(), "build_plans");
  } catch (graphstep::error const&) {
    throw;
  } catch (fe::cudnnException& e) {
    throw cudnn_error{static_cast<int>(e.getCudnnStatus()),
                      what + ": building cuDNN's graph failed: " + e.what()};
  } catch (std::exception const& e) {
    throw cudnn_error{static_cast<int>(CUDNN_STATUS_INTERNAL_ERROR),
                      what + ": building cuDNN's graph failed: " + e.what()};
  }
}

std::size_t workspace_of(fe::graph::Graph const& graph, std::string const& what) {
  std::int64_t bytes = 0;
  fe::error_t result = graph.get_workspace_size(bytes);
  if (result.is_bad() || bytes < 0) {
    throw cudnn_error{static_cast<int>(CUDNN_STATUS_INTERNAL_ERROR),
                      what + ": cuDNN's workspace size query failed: " + result.get_message()};
  }
  return static_cast<std::size_t>(bytes);
}

void* offset(void const* base, std::int64_t elements, dtype type) {
  // The variant pack takes non-const pointers; cuDNN only reads the inputs.
  return const_cast<unsigned char*>(static_cast<unsigned char const*>(base)) +
         elements * static_cast<std::int64_t>(size_in_bytes(type));
}

using variant_pack = std::unordered_map<std::int64_t, void*>;

#endif  // GRAPHSTEP_WITH_CUDNN_SDPA

}  // namespace

struct detail::cudnn_attention_state {
  attention_shape shape;
  std::string what;
  std::size_t workspace_needed{};
  bool has_backward{};
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
  cudnnHandle_t handle{};
  std::shared_ptr<fe::graph::Graph> forward;
  std::shared_ptr<fe::graph::Graph> backward;
  variant_pack forward_pack;
  variant_pack backward_pack;

  // cudnnSetStream and one graph execution (with, before cuDNN 9.6, a memset of the backward's
  // dQ accumulator): no allocation, no copy from the host (the frontend makes those for ALiBi
  // slopes and padding masks only), no synchronization.
  void run(fe::graph::Graph const& graph, variant_pack pack, void* workspace,
           cuda::stream_view stream, char const* direction) const {
    GRAPHSTEP_CUDNN_FE_TRY(fe::detail::set_stream(handle, stream.get()));
    fe::error_t result;
    try {
      result = graph.execute(handle, pack, workspace);
    } catch (std::exception const& e) {
      throw cudnn_error{static_cast<int>(CUDNN_STATUS_EXECUTION_FAILED),
                        what + ": " + direction + "(): " + e.what()};
    }
    if (result.is_bad()) {
      throw cudnn_error{
          static_cast<int>(CUDNN_STATUS_EXECUTION_FAILED),
          what + ": " + direction + "(): cuDNN did not enqueue the graph: " + result.get_message()};
    }
  }
#endif
};

void detail::cudnn_handle_deleter::operator()(pointer handle) const noexcept {
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
  try {
    if (cudnnStatus_t const s = fe::detail::destroy_handle(handle); s != CUDNN_STATUS_SUCCESS) {
      graphstep::detail::log_lazily(log_level::error, [&] {
        return std::string{"cudnnDestroy failed ("} + fe::detail::get_error_string(s) + ")";
      });
    }
  } catch (std::exception const& e) {
    graphstep::detail::log_lazily(
        log_level::error, [&] { return std::string{"cudnnDestroy failed ("} + e.what() + ")"; });
  }
#else
  static_cast<void>(handle);  // no handle is ever made without cuDNN
#endif
}

support cudnn_attention_available() {
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
  cudnn_library const& library = cudnn();
  if (library.handle == nullptr) return {false, library.error};
  if (library.version < minimum_cudnn_version) {
    return {false, "cuDNN " + version_text(library.version) +
                       " was loaded; fused attention as used here needs cuDNN " +
                       version_text(minimum_cudnn_version) + " or newer"};
  }
  return {};
#else
  return {false, not_built_reason()};
#endif
}

cudnn_handle::cudnn_handle() {
  support const available = cudnn_attention_available();
  GRAPHSTEP_EXPECTS(available.fused, "cudnn_handle: " + available.reason);
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
  cudnnHandle_t handle = nullptr;
  GRAPHSTEP_CUDNN_FE_TRY(fe::detail::create_handle(&handle));
  handle_.reset(handle);
#endif
}

support cudnn_attention::can_implement(attention_shape const& shape,
                                       cudnn_attention_operands const& operands) {
  // The arguments alone first (ops/attention_problem.hpp), without any CUDA or cuDNN call.
  attention_problem const problem{shape};
  if (support arguments = problem.check_cudnn(operands); !arguments.fused) return arguments;
  std::string const what = problem.cudnn_description(operands.qkv.type());
  if (support available = cudnn_attention_available(); !available.fused) {
    available.reason = what + ": " + available.reason;
    return available;
  }
  int device = 0;
  GRAPHSTEP_CUDA_TRY(cudaGetDevice(&device));
  int major = 0;
  int minor = 0;
  GRAPHSTEP_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GRAPHSTEP_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major < 8) {
    return {false, what + ": device " + std::to_string(device) + " has compute capability " +
                       std::to_string(major) + "." + std::to_string(minor) +
                       "; cuDNN's fused attention needs 8.0 (Ampere) or newer"};
  }
  return {};
}

cudnn_attention::cudnn_attention(cudnn_handle const& handle, attention_shape const& shape,
                                 cudnn_attention_operands const& operands,
                                 cudnn_attention_options const& options)
    : state_{std::make_unique<detail::cudnn_attention_state>()} {
  auto& s = *state_;
  dtype const type = operands.qkv.type();
  s.what = attention_problem{shape}.cudnn_description(type);
  GRAPHSTEP_EXPECTS(handle.get() != nullptr, s.what + ": the cuDNN handle was moved from");
  support const supported = can_implement(shape, operands);
  GRAPHSTEP_EXPECTS(supported.fused, supported.reason);
  s.shape = shape;
  s.has_backward = !operands.dqkv.empty();
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
  s.handle = handle.get();
  layouts const l{shape};
  void* const q = operands.qkv.data();
  s.forward_pack = {{q_uid, q},
                    {k_uid, offset(q, l.head_row, type)},
                    {v_uid, offset(q, 2 * l.head_row, type)},
                    {o_uid, operands.out.data()},
                    {stats_uid, operands.logsumexp.data()}};
  s.forward = forward_graph(shape, type);
  build(*s.forward, s.handle, s.what + " forward");
  s.workspace_needed = workspace_of(*s.forward, s.what);
  if (s.has_backward) {
    s.backward_pack = s.forward_pack;
    void* const dq = operands.dqkv.data();
    s.backward_pack.insert({{do_uid, operands.dout.data()},
                            {dq_uid, dq},
                            {dk_uid, offset(dq, l.head_row, type)},
                            {dv_uid, offset(dq, 2 * l.head_row, type)}});
    s.backward = backward_graph(shape, type, options);
    build(*s.backward, s.handle, s.what + " backward");
    s.workspace_needed = std::max(s.workspace_needed, workspace_of(*s.backward, s.what));
  }
#else
  static_cast<void>(options);  // unreachable: can_implement() refused above
#endif
}

cudnn_attention::~cudnn_attention() = default;
cudnn_attention::cudnn_attention(cudnn_attention&&) noexcept = default;
cudnn_attention& cudnn_attention::operator=(cudnn_attention&&) noexcept = default;

namespace {
char const* const moved_from =
    "cudnn_attention: this layer was moved from; use the one it was moved to";
}  // namespace

std::size_t cudnn_attention::workspace_size() const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, moved_from);
  return state_->workspace_needed;
}

namespace {

// The workspace of one forward() or backward() call, checked against what the layer needs.
void expect_workspace(detail::cudnn_attention_state const& s, void const* workspace,
                      std::size_t workspace_bytes, char const* direction) {
  std::string const where = s.what + ": " + direction + "(): ";
  GRAPHSTEP_EXPECTS(workspace_bytes == 0 || workspace != nullptr,
                    where + "a workspace size was given without a workspace pointer");
  GRAPHSTEP_EXPECTS(workspace_bytes >= s.workspace_needed,
                    where + "the workspace has " + std::to_string(workspace_bytes) +
                        " bytes; workspace_size() is " + std::to_string(s.workspace_needed) +
                        ": take that much from the pool");
  GRAPHSTEP_EXPECTS(reinterpret_cast<std::uintptr_t>(workspace) % 256 == 0,
                    where + "the workspace must be 256-byte aligned (take it from the pool)");
}

}  // namespace

void cudnn_attention::forward(void* workspace, std::size_t workspace_bytes,
                              cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, moved_from);
  expect_workspace(*state_, workspace, workspace_bytes, "forward");
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
  state_->run(*state_->forward, state_->forward_pack, workspace, stream, "forward");
#else
  static_cast<void>(stream);   // unreachable: no layer is made without cuDNN
#endif
}

void cudnn_attention::backward(void* workspace, std::size_t workspace_bytes,
                               cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, moved_from);
  GRAPHSTEP_EXPECTS(state_->has_backward,
                    state_->what +
                        ": this layer was made without dout and dqkv, so it has no backward; "
                        "make it with them");
  expect_workspace(*state_, workspace, workspace_bytes, "backward");
#if defined(GRAPHSTEP_WITH_CUDNN_SDPA)
  state_->run(*state_->backward, state_->backward_pack, workspace, stream, "backward");
#else
  static_cast<void>(stream);   // unreachable: no layer is made without cuDNN
#endif
}

bool cudnn_attention::has_backward() const noexcept {
  return state_ != nullptr && state_->has_backward;
}

attention_shape const& cudnn_attention::shape() const {
  GRAPHSTEP_EXPECTS(state_ != nullptr, moved_from);
  return state_->shape;
}

}  // namespace graphstep::ops
