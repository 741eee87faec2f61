#pragma once

/// @file detail/host_device.hpp
/// @brief Lets plain C++ headers hold functions that CUDA kernels call too.
/// graphstep_core: plain C++, includes no CUDA header.

#if defined(__CUDACC__)
#define GRAPHSTEP_HOST_DEVICE __host__ __device__
#else
#define GRAPHSTEP_HOST_DEVICE
#endif
