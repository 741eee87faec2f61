#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/kernel_node_tags.hpp>
#include <string>
#include <utility>
#include <vector>

#include "graphs/detail/kernel_node_rules.hpp"

namespace graphstep::graphs::detail {

std::uint64_t capture_sequence_of(cuda::stream_view stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long sequence = 0;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetCaptureInfo(stream.get(), &status, &sequence, nullptr, nullptr,
                                              nullptr, nullptr));
  return status == cudaStreamCaptureStatusActive ? sequence : 0;
}

void expect_taggable(std::string const& tag, std::uint64_t capture, std::uint64_t tagged_in) {
  std::string const refusal = why_not_this_tag(tag, capture, tagged_in);
  GRAPHSTEP_EXPECTS(refusal.empty(), refusal);
}

void expect_tagged(std::string const& tag, bool known, bool same_function,
                   std::vector<std::string> tags) {
  std::string const refusal = why_no_tagged_node(tag, known, same_function, std::move(tags));
  GRAPHSTEP_EXPECTS(refusal.empty(), refusal);
}

}  // namespace graphstep::graphs::detail
