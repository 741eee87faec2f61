// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <limits>
#include <optional>
#include <string>

namespace graphstep::nccl {

bucket_plan plan_buckets(dtype type, std::vector<std::size_t> const& gradient_counts,
                         std::size_t bucket_bytes, std::size_t first_bucket_bytes,
                         std::size_t alignment) {
  GRAPHSTEP_EXPECTS(!gradient_counts.empty(), "plan_buckets: no gradient was given");
  graphstep::detail::expect_known("plan_buckets: the gradients", type);
  GRAPHSTEP_EXPECTS(bucket_bytes > 0 && first_bucket_bytes > 0,
                    "plan_buckets: bucket sizes must be positive");
  std::size_t const element = size_in_bytes(type);
  GRAPHSTEP_EXPECTS(alignment >= element && (alignment & (alignment - 1)) == 0,
                    "plan_buckets: the alignment must be a power of two of at least one " +
                        std::string{name(type)} + " element (" + std::to_string(element) +
                        " bytes), not " + std::to_string(alignment));
  // In elements: an aligned offset is a whole number of them (the alignment is a power of two
  // of at least one element), and so is every bucket.
  std::size_t const step = alignment / element;
  std::size_t const limit_count = std::numeric_limits<std::size_t>::max() / element - step;
  auto const cap = [&](std::size_t bytes) { return bytes / element; };
  bucket_plan plan;
  plan.type = type;
  plan.offsets.resize(gradient_counts.size());
  std::size_t cursor = 0;
  bucket current{0, 0, 0, 0};
  auto limit = [&] { return cap(plan.buckets.empty() ? first_bucket_bytes : bucket_bytes); };
  for (std::size_t i = 0; i < gradient_counts.size(); ++i) {
    std::size_t const count = gradient_counts[i];
    GRAPHSTEP_EXPECTS(count > 0, "plan_buckets: gradient " + std::to_string(i) + " is empty");
    GRAPHSTEP_EXPECTS(count <= limit_count - cursor,
                      "plan_buckets: gradient " + std::to_string(i) + " of " +
                          std::to_string(count) + " elements takes the buffer past SIZE_MAX bytes");
    std::size_t const aligned = (count + step - 1) / step * step;
    if (current.last > current.first && current.count + aligned > limit()) {
      plan.buckets.push_back(current);
      current = {i, i, cursor, 0};
    }
    plan.offsets[i] = cursor;
    cursor += aligned;
    current.last = i + 1;
    current.count += aligned;
  }
  plan.buckets.push_back(current);
  plan.buffer_count = cursor;
  return plan;
}

bucket_plan plan_buckets(parameter_layout const& layout, std::size_t bucket_bytes,
                         std::size_t first_bucket_bytes) {
  GRAPHSTEP_EXPECTS(!layout.empty(), "plan_buckets: the parameter layout holds no tensor");
  // The plan packs slots at the layout's alignment; an adopted buffer's offsets are its own.
  GRAPHSTEP_EXPECTS(!layout.adopted(),
                    "plan_buckets: the parameter layout adopts a buffer whose tensors lie at "
                    "offsets of its own, which buckets packed in order would not match; lay "
                    "the gradients out with parameter_layout::add to reduce them in buckets");
  dtype const type = layout.at(0).spec.type();
  std::size_t const element = size_in_bytes(type);
  // Every slot is a multiple of the layout's alignment, so packing the slots at that alignment
  // puts each gradient at its layout offset.
  std::optional<std::size_t> const other = layout.first_of_another_dtype();
  GRAPHSTEP_EXPECTS(!other.has_value(),
                    "plan_buckets: the layout's tensor " + describe(layout.at(*other).spec) +
                        " is not " + name(type) +
                        " as its first tensor is; the gradients of one bucketed all-reduce "
                        "share one dtype");
  std::vector<std::size_t> slot_counts;
  slot_counts.reserve(layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    slot_counts.push_back((layout.bytes_through(i) - layout.at(i).byte_offset()) / element);
  }
  return plan_buckets(type, slot_counts, bucket_bytes, first_bucket_bytes, layout.alignment());
}

}  // namespace graphstep::nccl
