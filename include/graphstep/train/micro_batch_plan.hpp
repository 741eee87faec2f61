#pragma once

/// @file train/micro_batch_plan.hpp
/// @brief The host's checks of a gradient-accumulation loop (`micro_batch_loop`), made before
/// anything is enqueued: the number of micro-batches, and an input that holds all of them.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>

namespace graphstep::train {

/// @brief `micro_batches` (K, the micro-batches of one optimizer step), checked.
/// @throws usage_error naming the value when it is below 1
[[nodiscard]] int checked_micro_batches(int micro_batches);

/// @brief The bytes of one micro-batch's slice of an input that holds the slices of all
/// `micro_batches` micro-batches one after another: `micro_batch_count` elements of
/// `element_bytes` each, of `input_count` elements in all.
/// @throws usage_error (K below 1, no element per micro-batch, an input that is not exactly K
/// micro-batches), naming the sizes
[[nodiscard]] std::size_t micro_batch_slice_bytes(std::size_t input_count,
                                                  std::size_t micro_batch_count,
                                                  std::size_t element_bytes, int micro_batches);

}  // namespace graphstep::train
