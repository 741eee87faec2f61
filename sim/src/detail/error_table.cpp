#include "detail/error_table.hpp"

#include <algorithm>
#include <array>
#include <cstddef>

namespace graphstep::sim::detail {

namespace {

// NOLINTNEXTLINE(cppcoreguidelines-macro-usage): the enumerator's name is its spelling
#define GRAPHSTEP_SIM_ERROR(code, text) \
  error_entry {                         \
    static_cast<int>(code), #code, text \
  }

// Sorted by code; each text is the CUDA 13.0 runtime's own (cudaGetErrorString of libcudart
// 13.0, which answers without a driver).
constexpr std::array errors{
    GRAPHSTEP_SIM_ERROR(cudaSuccess, "no error"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidValue, "invalid argument"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMemoryAllocation, "out of memory"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInitializationError, "initialization error"),
    GRAPHSTEP_SIM_ERROR(cudaErrorCudartUnloading, "driver shutting down"),
    GRAPHSTEP_SIM_ERROR(cudaErrorProfilerDisabled,
                        "profiler disabled while using external profiling tool"),
    GRAPHSTEP_SIM_ERROR(cudaErrorProfilerNotInitialized,
                        "profiler not initialized: call cudaProfilerInitialize()"),
    GRAPHSTEP_SIM_ERROR(cudaErrorProfilerAlreadyStarted, "profiler already started"),
    GRAPHSTEP_SIM_ERROR(cudaErrorProfilerAlreadyStopped, "profiler already stopped"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidSymbol, "invalid device symbol"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidHostPointer, "invalid host pointer"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidTexture, "invalid texture reference"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidTextureBinding, "texture is not bound to a pointer"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidChannelDescriptor, "invalid channel descriptor"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    GRAPHSTEP_SIM_ERROR(cudaErrorAddressOfConstant, "invalid address of constant"),
    GRAPHSTEP_SIM_ERROR(cudaErrorTextureFetchFailed, "fetch from texture failed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorTextureNotBound, "cannot fetch from a texture that is not bound"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSynchronizationError, "incorrect use of __syncthreads()"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidFilterSetting,
                        "linear filtering not supported for non-float type"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidNormSetting,
                        "read as normalized float not supported for data type"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMixedDeviceExecution,
                        "device emulation mode and device execution mode cannot be mixed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNotYetImplemented, "feature not yet implemented"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMemoryValueTooLarge,
                        "memory size or pointer value too large to fit in 32 bit"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStubLibrary, "CUDA driver is a stub library"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInsufficientDriver,
                        "CUDA driver version is insufficient for CUDA runtime version"),
    GRAPHSTEP_SIM_ERROR(cudaErrorCallRequiresNewerDriver,
                        "API call is not supported in the installed CUDA driver"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidSurface, "invalid surface reference"),
    GRAPHSTEP_SIM_ERROR(cudaErrorDuplicateVariableName,
                        "duplicate global variable looked up by string name"),
    GRAPHSTEP_SIM_ERROR(cudaErrorDuplicateTextureName,
                        "duplicate texture looked up by string name"),
    GRAPHSTEP_SIM_ERROR(cudaErrorDuplicateSurfaceName,
                        "duplicate surface looked up by string name"),
    GRAPHSTEP_SIM_ERROR(cudaErrorDevicesUnavailable,
                        "CUDA-capable device(s) is/are busy or unavailable"),
    GRAPHSTEP_SIM_ERROR(cudaErrorIncompatibleDriverContext, "incompatible driver context"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMissingConfiguration,
                        "__global__ function call is not configured"),
    GRAPHSTEP_SIM_ERROR(cudaErrorPriorLaunchFailure, "unspecified launch failure in prior launch"),
    GRAPHSTEP_SIM_ERROR(cudaErrorLaunchMaxDepthExceeded,
                        "launch would exceed maximum depth of nested launches"),
    GRAPHSTEP_SIM_ERROR(cudaErrorLaunchFileScopedTex,
                        "launch failed because kernel uses unsupported, file-scoped textures "
                        "(texture objects are supported)"),
    GRAPHSTEP_SIM_ERROR(cudaErrorLaunchFileScopedSurf,
                        "launch failed because kernel uses unsupported, file-scoped surfaces "
                        "(surface objects are supported)"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSyncDepthExceeded,
                        "cudaDeviceSynchronize failed because caller's grid depth exceeds "
                        "cudaLimitDevRuntimeSyncDepth"),
    GRAPHSTEP_SIM_ERROR(
        cudaErrorLaunchPendingCountExceeded,
        "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidDeviceFunction, "invalid device function"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidDevice, "invalid device ordinal"),
    GRAPHSTEP_SIM_ERROR(cudaErrorDeviceNotLicensed, "device doesn't have valid Grid license"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSoftwareValidityNotEstablished, "integrity checks failed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStartupFailure, "startup failure in cuda runtime"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidKernelImage, "device kernel image is invalid"),
    GRAPHSTEP_SIM_ERROR(cudaErrorDeviceUninitialized, "invalid device context"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorUnmapBufferObjectFailed, "unmapping of buffer object failed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorArrayIsMapped, "array is mapped"),
    GRAPHSTEP_SIM_ERROR(cudaErrorAlreadyMapped, "resource already mapped"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNoKernelImageForDevice,
                        "no kernel image is available for execution on the device"),
    GRAPHSTEP_SIM_ERROR(cudaErrorAlreadyAcquired, "resource already acquired"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNotMapped, "resource not mapped"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNotMappedAsArray, "resource not mapped as array"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNotMappedAsPointer, "resource not mapped as pointer"),
    GRAPHSTEP_SIM_ERROR(cudaErrorECCUncorrectable, "uncorrectable ECC error encountered"),
    GRAPHSTEP_SIM_ERROR(cudaErrorUnsupportedLimit, "limit is not supported on this architecture"),
    GRAPHSTEP_SIM_ERROR(cudaErrorDeviceAlreadyInUse,
                        "exclusive-thread device already in use by a different thread"),
    GRAPHSTEP_SIM_ERROR(cudaErrorPeerAccessUnsupported,
                        "peer access is not supported between these two devices"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidPtx, "a PTX JIT compilation failed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidGraphicsContext, "invalid OpenGL or DirectX context"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNvlinkUncorrectable,
                        "uncorrectable NVLink error detected during the execution"),
    GRAPHSTEP_SIM_ERROR(cudaErrorJitCompilerNotFound, "PTX JIT compiler library not found"),
    GRAPHSTEP_SIM_ERROR(cudaErrorUnsupportedPtxVersion,
                        "the provided PTX was compiled with an unsupported toolchain."),
    GRAPHSTEP_SIM_ERROR(cudaErrorJitCompilationDisabled, "PTX JIT compilation was disabled"),
    GRAPHSTEP_SIM_ERROR(cudaErrorUnsupportedExecAffinity,
                        "the provided execution affinity is not supported"),
    GRAPHSTEP_SIM_ERROR(cudaErrorUnsupportedDevSideSync,
                        "the provided PTX contains unsupported call to cudaDeviceSynchronize"),
    GRAPHSTEP_SIM_ERROR(cudaErrorContained,
                        "Invalid access of peer GPU memory over nvlink or a hardware error"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidSource, "device kernel image is invalid"),
    GRAPHSTEP_SIM_ERROR(cudaErrorFileNotFound, "file not found"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSharedObjectSymbolNotFound, "shared object symbol not found"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSharedObjectInitFailed, "shared object initialization failed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorOperatingSystem,
                        "OS call failed or operation not supported on this OS"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    GRAPHSTEP_SIM_ERROR(cudaErrorIllegalState,
                        "the operation cannot be performed in the present state"),
    GRAPHSTEP_SIM_ERROR(cudaErrorLossyQuery, "attempted introspection would be semantically lossy"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSymbolNotFound, "named symbol not found"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNotReady, "device not ready"),
    GRAPHSTEP_SIM_ERROR(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    GRAPHSTEP_SIM_ERROR(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    GRAPHSTEP_SIM_ERROR(cudaErrorLaunchTimeout, "the launch timed out and was terminated"),
    GRAPHSTEP_SIM_ERROR(cudaErrorLaunchIncompatibleTexturing,
                        "launch uses incompatible texturing mode"),
    GRAPHSTEP_SIM_ERROR(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
    GRAPHSTEP_SIM_ERROR(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSetOnActiveProcess,
                        "cannot set while device is active in this process"),
    GRAPHSTEP_SIM_ERROR(cudaErrorContextIsDestroyed, "context is destroyed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorAssert, "device-side assert triggered"),
    GRAPHSTEP_SIM_ERROR(cudaErrorTooManyPeers, "peer mapping resources exhausted"),
    GRAPHSTEP_SIM_ERROR(cudaErrorHostMemoryAlreadyRegistered,
                        "part or all of the requested memory range is already mapped"),
    GRAPHSTEP_SIM_ERROR(cudaErrorHostMemoryNotRegistered,
                        "pointer does not correspond to a registered memory region"),
    GRAPHSTEP_SIM_ERROR(cudaErrorHardwareStackError, "hardware stack error"),
    GRAPHSTEP_SIM_ERROR(cudaErrorIllegalInstruction, "an illegal instruction was encountered"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMisalignedAddress, "misaligned address"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidAddressSpace,
                        "operation not supported on global/shared address space"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidPc, "invalid program counter"),
    GRAPHSTEP_SIM_ERROR(cudaErrorLaunchFailure, "unspecified launch failure"),
    GRAPHSTEP_SIM_ERROR(cudaErrorCooperativeLaunchTooLarge,
                        "too many blocks in cooperative launch"),
    GRAPHSTEP_SIM_ERROR(cudaErrorTensorMemoryLeak, "tensor memory not completely freed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNotPermitted, "operation not permitted"),
    GRAPHSTEP_SIM_ERROR(cudaErrorNotSupported, "operation not supported"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSystemNotReady, "system not yet initialized"),
    GRAPHSTEP_SIM_ERROR(cudaErrorSystemDriverMismatch,
                        "system has unsupported display driver / cuda driver combination"),
    GRAPHSTEP_SIM_ERROR(cudaErrorCompatNotSupportedOnDevice,
                        "forward compatibility was attempted on non supported HW"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMpsConnectionFailed,
                        "MPS client failed to connect to the MPS control daemon or the MPS server"),
    GRAPHSTEP_SIM_ERROR(
        cudaErrorMpsRpcFailure,
        "the remote procedural call between the MPS server and the MPS client failed"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMpsServerNotReady,
                        "MPS server is not ready to accept new MPS client requests"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMpsMaxClientsReached,
                        "the hardware resources required to create MPS client have been exhausted"),
    GRAPHSTEP_SIM_ERROR(
        cudaErrorMpsMaxConnectionsReached,
        "the hardware resources required to support device connections have been exhausted"),
    GRAPHSTEP_SIM_ERROR(cudaErrorMpsClientTerminated,
                        "the MPS client has been terminated by the server"),
    GRAPHSTEP_SIM_ERROR(cudaErrorCdpNotSupported,
                        "is using CUDA Dynamic Parallelism, but the current configuration, like "
                        "MPS, does not support it"),
    GRAPHSTEP_SIM_ERROR(
        cudaErrorCdpVersionMismatch,
        "unsupported interaction between different versions of CUDA Dynamic Parallelism"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStreamCaptureUnsupported,
                        "operation not permitted when stream is capturing"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStreamCaptureInvalidated,
                        "operation failed due to a previous error during capture"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStreamCaptureMerge,
                        "operation would result in a merge of separate capture sequences"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStreamCaptureUnmatched,
                        "capture was not ended in the same stream as it began"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStreamCaptureIsolation,
                        "dependency created on uncaptured work in another stream"),
    GRAPHSTEP_SIM_ERROR(
        cudaErrorStreamCaptureImplicit,
        "operation would make the legacy stream depend on a capturing blocking stream"),
    GRAPHSTEP_SIM_ERROR(cudaErrorCapturedEvent,
                        "operation not permitted on an event last recorded in a capturing stream"),
    GRAPHSTEP_SIM_ERROR(cudaErrorStreamCaptureWrongThread,
                        "attempt to terminate a thread-local capture sequence from another thread"),
    GRAPHSTEP_SIM_ERROR(cudaErrorTimeout, "wait operation timed out"),
    GRAPHSTEP_SIM_ERROR(cudaErrorGraphExecUpdateFailure,
                        "the graph update was not performed because it included changes which "
                        "violated constraints specific to instantiated graph update"),
    GRAPHSTEP_SIM_ERROR(cudaErrorExternalDevice,
                        "an async error has occured in external entity outside of CUDA"),
    GRAPHSTEP_SIM_ERROR(cudaErrorInvalidClusterSize,
                        "a kernel launch error has occurred due to cluster misconfiguration"),
    GRAPHSTEP_SIM_ERROR(
        cudaErrorFunctionNotLoaded,
        "the function handle is not loaded when calling an API that requires a loaded function"),
    GRAPHSTEP_SIM_ERROR(
        cudaErrorInvalidResourceType,
        "one or more resources passed in are not valid resource types for the operation"),
    GRAPHSTEP_SIM_ERROR(
        cudaErrorInvalidResourceConfiguration,
        "one or more resources are insufficient or non-applicable for the operation"),
    GRAPHSTEP_SIM_ERROR(cudaErrorUnknown, "unknown error"),
};

#undef GRAPHSTEP_SIM_ERROR

// find_error searches by halves: each code after the one before it.
constexpr bool sorted_by_code() {
  for (std::size_t i = 1; i < errors.size(); ++i) {
    if (errors[i - 1].code >= errors[i].code) return false;
  }
  return true;
}
static_assert(sorted_by_code(), "keep the error table sorted by code, without repeats");

}  // namespace

error_entry const* find_error(int code) noexcept {
  auto const* const found =
      std::lower_bound(errors.begin(), errors.end(), code,
                       [](error_entry const& entry, int wanted) { return entry.code < wanted; });
  return found != errors.end() && found->code == code ? &*found : nullptr;
}

}  // namespace graphstep::sim::detail
