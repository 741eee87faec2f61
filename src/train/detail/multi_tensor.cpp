// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/train/detail/multi_tensor.hpp>
#include <limits>
#include <string>

namespace graphstep::train::detail {

std::vector<tensor_chunk> plan_chunks(std::vector<std::size_t> const& element_counts,
                                      std::size_t chunk_elements) {
  GRAPHSTEP_EXPECTS(!element_counts.empty(), "plan_chunks: no tensor was given");
  GRAPHSTEP_EXPECTS(chunk_elements > 0 && chunk_elements <= (std::size_t{1} << 31),
                    "plan_chunks: the chunk size must be between 1 and 2^31 elements, not " +
                        std::to_string(chunk_elements));
  GRAPHSTEP_EXPECTS(element_counts.size() < std::numeric_limits<std::uint32_t>::max(),
                    "plan_chunks: more than 2^32 - 1 tensors; split them into groups");
  std::vector<tensor_chunk> chunks;
  for (std::size_t t = 0; t < element_counts.size(); ++t) {
    std::size_t const count = element_counts[t];
    GRAPHSTEP_EXPECTS(count > 0, "plan_chunks: tensor " + std::to_string(t) +
                                     " has no element; leave empty tensors out");
    for (std::size_t begin = 0; begin < count; begin += chunk_elements) {
      std::size_t const n = std::min(chunk_elements, count - begin);
      chunks.push_back({static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(n),
                        static_cast<std::uint64_t>(begin)});
    }
  }
  return chunks;
}

}  // namespace graphstep::train::detail
