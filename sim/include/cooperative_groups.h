#pragma once

// <cooperative_groups.h> for sources compiled for the simulated device.
//
// The toolkit's header declares cooperative groups only for nvcc (`#if defined(__cplusplus) &&
// defined(__CUDACC__)`), and its reduce.h, read by a host compiler, stops at headers of the CUDA
// C++ library the toolkit does not ship. This folder is on the include path of every target that
// links graphstep::cuda_sim as a plain directory (-I), while the toolkit's comes as a system
// directory (-isystem, CUDA::toolkit), which the compiler searches after the plain ones: so
// `#include <cooperative_groups.h>` finds this header first. Under nvcc (a program nvcc compiles
// and links to the simulator) the toolkit's own header is the one that works, and is used.
#if defined(__CUDACC__)
#include_next <cooperative_groups.h>  // NOLINT: the toolkit's, after this folder
#else
#include "graphstep/sim/cooperative_groups.hpp"
#endif
