#pragma once

// Macros that declare kernels, defined apart from the kernels that use them, one through the
// other: object-like, so that a launch still chooses its kernel by its arguments.

#define SOURCE_CONSTRUCTS_GLOBAL __global__
#define SOURCE_CONSTRUCTS_KERNEL SOURCE_CONSTRUCTS_GLOBAL void
