// graphstep_core: plain C++, includes no CUDA header.
#include <cstddef>
#include <graphstep/error.hpp>
#include <graphstep/train/micro_batch_plan.hpp>
#include <string>

namespace graphstep::train {

int checked_micro_batches(int micro_batches) {
  GRAPHSTEP_EXPECTS(micro_batches >= 1,
                    "micro_batch_loop: micro_batches is " + std::to_string(micro_batches) +
                        "; an optimizer step needs at least 1 micro-batch (1: no accumulation)");
  return micro_batches;
}

std::size_t micro_batch_slice_bytes(std::size_t input_count, std::size_t micro_batch_count,
                                    std::size_t element_bytes, int micro_batches) {
  auto const k = static_cast<std::size_t>(checked_micro_batches(micro_batches));
  GRAPHSTEP_EXPECTS(micro_batch_count > 0 && element_bytes > 0,
                    "micro_batch_loop::select: a micro-batch of 0 elements; give the count of "
                    "one micro-batch's elements");
  GRAPHSTEP_EXPECTS(input_count / k == micro_batch_count && input_count % k == 0,
                    "micro_batch_loop::select: the input holds " + std::to_string(input_count) +
                        " elements, not " + std::to_string(micro_batches) + " micro-batches of " +
                        std::to_string(micro_batch_count) +
                        "; size the step_input as micro_batches x the micro-batch's elements");
  return micro_batch_count * element_bytes;
}

}  // namespace graphstep::train
