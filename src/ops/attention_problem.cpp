// graphstep_core: plain C++, includes no CUDA header.
#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/attention_problem.hpp>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "detail/span_checks.hpp"
#include "ops/detail/operand_checks.hpp"

namespace graphstep::ops {

namespace {

using detail::aligned_to;
using detail::overlap;

// Elements and bytes of qkv [B·T, 3·H·D], out [B·T, H·D] and logsumexp [B, H, T] (fp32).
struct extents {
  std::size_t qkv, out, statistics;
  std::size_t qkv_bytes, out_bytes, statistics_bytes;
};

extents extents_of(attention_shape const& s, dtype type) {
  auto const rows = static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.sequence);
  auto const width = static_cast<std::size_t>(s.heads) * static_cast<std::size_t>(s.head_dim);
  std::size_t const statistics = rows * static_cast<std::size_t>(s.heads);
  return {rows * 3 * width,
          rows * width,
          statistics,
          rows * 3 * width * size_in_bytes(type),
          rows * width * size_in_bytes(type),
          statistics * sizeof(float)};
}

// A matrix operand of the plain kernels: a span of the op's type holding `needed` elements,
// 16-byte aligned (the kernels move 16 bytes at a time; cudaMalloc and the pool return 256-byte
// aligned memory).
void check_matrix(device_span const& span, char const* name, char const* what, dtype type,
                  std::size_t needed) {
  graphstep::detail::expect_operand(what, name, span, type, needed);
  GRAPHSTEP_EXPECTS(aligned_to(span.data(), 16),
                    std::string{what} + ": " + name +
                        " is not 16-byte aligned; pass the start of an allocation or a 16-byte "
                        "aligned offset into one");
}

// The frontend tells cuDNN that every tensor, logsumexp included, is 16-byte aligned when it
// chooses an engine (Tensor_attributes::default_alignment), and cuDNN's kernels move q, k, v, o
// and their gradients in 16-byte vectors; the frontend checks only those pointers, and only when
// it executes.
constexpr std::size_t cudnn_operand_alignment = 16;

}  // namespace

void attention_problem::check_shape(char const* call) const {
  attention_shape const& s = shape;
  std::string const what{call};
  GRAPHSTEP_EXPECTS(s.batch > 0 && s.sequence > 0 && s.heads > 0 && s.head_dim > 0,
                    what + ": sizes must be positive (B=" + std::to_string(s.batch) +
                        ", T=" + std::to_string(s.sequence) + ", H=" + std::to_string(s.heads) +
                        ", D=" + std::to_string(s.head_dim) + ")");
  GRAPHSTEP_EXPECTS(s.head_dim % 8 == 0 && s.head_dim <= max_head_dim,
                    what + ": head_dim " + std::to_string(s.head_dim) +
                        " is not supported: it must be a multiple of 8, at most 256");
  // Grid x holds batch·heads blocks; grid y the tiles of T (at least 8 rows each).
  GRAPHSTEP_EXPECTS(s.batch <= std::int64_t{0x7fffffff} / s.heads,
                    what + ": batch·heads = " + std::to_string(s.batch) + "·" +
                        std::to_string(s.heads) +
                        " is more than one launch holds (2^31 - 1); split the batch");
  GRAPHSTEP_EXPECTS(s.sequence <= max_sequence, what + ": sequence " + std::to_string(s.sequence) +
                                                    " is longer than one launch holds (524280)");
}

dtype attention_problem::check_forward(device_span out, device_span logsumexp,
                                       device_span qkv) const {
  char const* const what = "causal_attention_forward";
  check_shape(what);
  dtype const type = graphstep::detail::floating_operand_type(what, "qkv", qkv);
  extents const e = extents_of(shape, type);
  check_matrix(qkv, "qkv", what, type, e.qkv);
  check_matrix(out, "out", what, type, e.out);
  graphstep::detail::expect_operand(what, "logsumexp", logsumexp, dtype::float32, e.statistics);
  GRAPHSTEP_EXPECTS(
      !overlap(out.data(), e.out_bytes, qkv.data(), e.qkv_bytes) &&
          !overlap(logsumexp.data(), e.statistics_bytes, qkv.data(), e.qkv_bytes) &&
          !overlap(logsumexp.data(), e.statistics_bytes, out.data(), e.out_bytes),
      std::string{what} + ": out, logsumexp and qkv must not overlap; give each its own memory");
  return type;
}

dtype attention_problem::check_backward(device_span dqkv, device_span dout, device_span qkv,
                                        device_span out, device_span logsumexp,
                                        void const* workspace, std::size_t workspace_bytes) const {
  char const* const what = "causal_attention_backward";
  check_shape(what);
  dtype const type = graphstep::detail::floating_operand_type(what, "qkv", qkv);
  extents const e = extents_of(shape, type);
  check_matrix(dqkv, "dqkv", what, type, e.qkv);
  check_matrix(dout, "dout", what, type, e.out);
  check_matrix(qkv, "qkv", what, type, e.qkv);
  check_matrix(out, "out", what, type, e.out);
  graphstep::detail::expect_operand(what, "logsumexp", logsumexp, dtype::float32, e.statistics);
  std::size_t const needed = backward_workspace_bytes();
  GRAPHSTEP_EXPECTS(workspace != nullptr,
                    std::string{what} + ": the workspace is a null pointer (it needs " +
                        std::to_string(needed) + " bytes: attention_backward_workspace_size)");
  GRAPHSTEP_EXPECTS(workspace_bytes >= needed,
                    std::string{what} + ": the workspace of " + std::to_string(workspace_bytes) +
                        " bytes is too small; it needs " + std::to_string(needed) +
                        " (attention_backward_workspace_size)");
  GRAPHSTEP_EXPECTS(
      aligned_to(workspace, alignof(float)),
      std::string{what} + ": the workspace is not 4-byte aligned (take it from the pool)");
  void const* const statistics = logsumexp.data();
  GRAPHSTEP_EXPECTS(
      !overlap(dqkv.data(), e.qkv_bytes, qkv.data(), e.qkv_bytes) &&
          !overlap(dqkv.data(), e.qkv_bytes, dout.data(), e.out_bytes) &&
          !overlap(dqkv.data(), e.qkv_bytes, out.data(), e.out_bytes) &&
          !overlap(dqkv.data(), e.qkv_bytes, statistics, e.statistics_bytes) &&
          !overlap(dqkv.data(), e.qkv_bytes, workspace, needed),
      std::string{what} + ": dqkv must not overlap qkv, dout, out, logsumexp or the workspace");
  GRAPHSTEP_EXPECTS(!overlap(workspace, needed, qkv.data(), e.qkv_bytes) &&
                        !overlap(workspace, needed, dout.data(), e.out_bytes) &&
                        !overlap(workspace, needed, out.data(), e.out_bytes) &&
                        !overlap(workspace, needed, statistics, e.statistics_bytes),
                    std::string{what} + ": the workspace must not overlap the inputs");
  return type;
}

std::size_t attention_problem::backward_workspace_bytes() const {
  GRAPHSTEP_EXPECTS(shape.batch > 0 && shape.sequence > 0 && shape.heads > 0,
                    "attention_backward_workspace_size: sizes must be positive (B=" +
                        std::to_string(shape.batch) + ", T=" + std::to_string(shape.sequence) +
                        ", H=" + std::to_string(shape.heads) + ")");
  return static_cast<std::size_t>(shape.batch) * static_cast<std::size_t>(shape.heads) *
         static_cast<std::size_t>(shape.sequence) * sizeof(float);
}

std::string attention_problem::cudnn_description(dtype type) const {
  return std::string{"cuDNN attention ("} + name(type) + ", B=" + std::to_string(shape.batch) +
         " T=" + std::to_string(shape.sequence) + " H=" + std::to_string(shape.heads) +
         " D=" + std::to_string(shape.head_dim) + ")";
}

support attention_problem::check_cudnn(cudnn_attention_operands const& o) const {
  attention_shape const& s = shape;
  std::string const what = cudnn_description(o.qkv.type());
  // The contract: broken, it throws.
  GRAPHSTEP_EXPECTS(s.batch > 0 && s.sequence > 0 && s.heads > 0 && s.head_dim > 0,
                    what + ": batch, sequence, heads and head_dim must be positive");
  // qkv holds B·T·3·H·D elements, addressed through int64 strides and byte offsets.
  constexpr auto limit = static_cast<double>(std::numeric_limits<std::int32_t>::max());
  GRAPHSTEP_EXPECTS(static_cast<double>(s.batch) * static_cast<double>(s.sequence) *
                            static_cast<double>(s.heads) * static_cast<double>(s.head_dim) * 3.0 <
                        limit * limit,
                    what + ": the layer is too large to index; split the batch");
  // Each operand of qkv's type (checked for cuDNN's types below: a float32 layer is reported,
  // not thrown) and as long as the shape says.
  dtype const type = graphstep::detail::floating_operand_type(what, "qkv", o.qkv);
  auto const rows = static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.sequence);
  std::size_t const row = static_cast<std::size_t>(s.heads) * static_cast<std::size_t>(s.head_dim);
  using graphstep::detail::expect_operand;
  expect_operand(what, "qkv", o.qkv, type, rows * 3 * row);
  expect_operand(what, "out", o.out, type, rows * row);
  expect_operand(what, "logsumexp", o.logsumexp, dtype::float32,
                 rows * static_cast<std::size_t>(s.heads));
  GRAPHSTEP_EXPECTS(o.dout.empty() == o.dqkv.empty(),
                    what +
                        ": give dout and dqkv together (a layer with a backward) or neither (a "
                        "forward-only layer)");
  if (!o.dqkv.empty()) {
    expect_operand(what, "dout", o.dout, type, rows * row);
    expect_operand(what, "dqkv", o.dqkv, type, rows * 3 * row);
  }

  // cuDNN's constraints: reported, not thrown.
  if (type != dtype::bfloat16 && type != dtype::float16) {
    return {false, what + ": cuDNN's fused attention takes bfloat16 or float16 data, not " +
                       name(type) +
                       "; run this layer on the plain kernels of ops/attention.hpp "
                       "(launch_causal_attention_forward and _backward)"};
  }
  // A multiple of 8 keeps every head's slice of a row, and the row itself, 16-byte aligned; 256
  // is the largest head dimension of cuDNN's 16-bit fused attention on any architecture
  // (cuDNN frontend documentation, "Attention", support matrix).
  if (s.head_dim % 8 != 0 || s.head_dim > max_head_dim) {
    return {false, what + ": head_dim " + std::to_string(s.head_dim) +
                       " is not supported: cuDNN's fused attention needs a multiple of 8, at most "
                       "256"};
  }
  for (auto const& [operand, pointer] : {std::pair<char const*, void const*>{"qkv", o.qkv.data()},
                                         {"out", o.out.data()},
                                         {"logsumexp", o.logsumexp.data()},
                                         {"dout", o.dout.data()},
                                         {"dqkv", o.dqkv.data()}}) {
    if (!aligned_to(pointer, cudnn_operand_alignment)) {
      return {false, what + ": " + operand + " at " +
                         std::to_string(reinterpret_cast<std::uintptr_t>(pointer)) +
                         " is not 16-byte aligned, as cuDNN's fused attention needs; take it "
                         "from the memory pool, or use the plain kernels of ops/attention.hpp"};
    }
  }

  // What a call writes must not share memory with what it reads or writes besides (cuDNN reads
  // its inputs while it writes), as the plain kernels require too: a broken contract, thrown.
  struct extent {
    char const* name;
    void const* begin;
    std::size_t bytes;
  };
  std::size_t const row_bytes = row * size_in_bytes(type);
  extent const qkv{"qkv", o.qkv.data(), rows * 3 * row_bytes};
  extent const out{"out", o.out.data(), rows * row_bytes};
  extent const lse{"logsumexp", o.logsumexp.data(),
                   rows * static_cast<std::size_t>(s.heads) * sizeof(float)};
  extent const dout{"dout", o.dout.data(), rows * row_bytes};
  extent const dqkv{"dqkv", o.dqkv.data(), rows * 3 * row_bytes};
  std::vector<std::pair<extent, extent>> pairs{{out, qkv}, {lse, qkv}, {lse, out}};
  if (!o.dqkv.empty()) {
    pairs.insert(pairs.end(), {{dqkv, qkv}, {dqkv, out}, {dqkv, lse}, {dqkv, dout}});
  }
  for (auto const& [written, other] : pairs) {
    GRAPHSTEP_EXPECTS(!overlap(written.begin, written.bytes, other.begin, other.bytes),
                      what + ": " + written.name + " overlaps " + other.name +
                          "; what a call writes must have memory of its own");
  }
  return {};
}

}  // namespace graphstep::ops
