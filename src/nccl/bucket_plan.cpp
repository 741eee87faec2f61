// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <string>

namespace graphstep::nccl {

bucket_plan plan_buckets(std::vector<std::size_t> const& gradient_bytes, std::size_t bucket_bytes,
                         std::size_t first_bucket_bytes, std::size_t alignment) {
  GRAPHSTEP_EXPECTS(!gradient_bytes.empty(), "plan_buckets: no gradient was given");
  GRAPHSTEP_EXPECTS(bucket_bytes > 0 && first_bucket_bytes > 0,
                    "plan_buckets: bucket sizes must be positive");
  GRAPHSTEP_EXPECTS(alignment > 0 && (alignment & (alignment - 1)) == 0,
                    "plan_buckets: the alignment must be a power of two");
  bucket_plan plan;
  plan.offsets.resize(gradient_bytes.size());
  std::size_t cursor = 0;
  bucket current{0, 0, 0, 0};
  auto limit = [&] { return plan.buckets.empty() ? first_bucket_bytes : bucket_bytes; };
  for (std::size_t i = 0; i < gradient_bytes.size(); ++i) {
    std::size_t const bytes = gradient_bytes[i];
    GRAPHSTEP_EXPECTS(bytes > 0, "plan_buckets: gradient " + std::to_string(i) + " is empty");
    std::size_t const aligned = (bytes + alignment - 1) / alignment * alignment;
    if (current.last > current.first && current.bytes + aligned > limit()) {
      plan.buckets.push_back(current);
      current = {i, i, cursor, 0};
    }
    plan.offsets[i] = cursor;
    cursor += aligned;
    current.last = i + 1;
    current.bytes += aligned;
  }
  plan.buckets.push_back(current);
  plan.buffer_bytes = cursor;
  return plan;
}

bucket_plan detail::plan_layout_buckets(parameter_layout const& layout,
                                        std::size_t bucket_bytes, std::size_t first_bucket_bytes) {
  GRAPHSTEP_EXPECTS(!layout.empty(), "plan_buckets: the parameter layout holds no tensor");
  // Every slot is a multiple of the layout's alignment, so packing the slots at that alignment
  // puts each gradient at its layout offset.
  std::vector<std::size_t> slot_bytes;
  slot_bytes.reserve(layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    slot_bytes.push_back(layout.bytes_through(i) - layout.at(i).byte_offset());
  }
  return plan_buckets(slot_bytes, bucket_bytes, first_bucket_bytes, layout.alignment());
}

}  // namespace graphstep::nccl
