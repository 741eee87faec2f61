#pragma once

/// @file nccl/unique_id.hpp
/// @brief NCCL's unique id as bytes, the form in which it travels between ranks. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <array>

namespace graphstep::nccl {

/// @brief The bytes of an `ncclUniqueId` (`NCCL_UNIQUE_ID_BYTES`).
using unique_id_bytes = std::array<unsigned char, 128>;

}  // namespace graphstep::nccl
