#pragma once

/// @file memory/parameter_layout.hpp
/// @brief The former names of the root's `parameter_layout` and `parameter_slot`
/// (<graphstep/parameter_layout.hpp>), kept while code that names them moves to the root's.
/// graphstep_core: plain C++, includes no CUDA header.

#include <graphstep/parameter_layout.hpp>

namespace graphstep::memory {

/// @brief `graphstep::parameter_layout`: name that one.
using parameter_layout = ::graphstep::parameter_layout;
/// @brief `graphstep::parameter_slot`: name that one.
using parameter_slot = ::graphstep::parameter_slot;

}  // namespace graphstep::memory
