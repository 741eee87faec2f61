#pragma once

// <cooperative_groups/reduce.h> for sources compiled for the simulated device: cg::reduce and
// its operators are in graphstep/sim/cooperative_groups.hpp (sim/include/cooperative_groups.h
// says why this header is found before the toolkit's).
#if defined(__CUDACC__)
#include_next <cooperative_groups/reduce.h>  // NOLINT: the toolkit's, after this folder
#else
#include "graphstep/sim/cooperative_groups.hpp"
#endif
