// The CUDA runtime's device and error calls on the emulated device: one H100-like device (the
// count can be raised with CUDAGRAD_EMULATED_DEVICES for tests of several ranks), versions of the
// toolkit it was built with, and error names and strings.
#include <cstdlib>
#include <cstring>

#include "emulator/device.h"

using namespace cg_emu;

namespace {

thread_local int current_device = 0;

int device_count() {
  static const int n = [] {
    const char* env = std::getenv("CUDAGRAD_EMULATED_DEVICES");
    return env && std::atoi(env) > 0 ? std::atoi(env) : 1;
  }();
  return n;
}

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure (emulated device: see the message above)"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
};

const ErrorText* find(cudaError_t e) {
  for (const ErrorText& t : kErrors)
    if (t.code == e) return &t;
  return nullptr;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  current_device = device;
  return sticky_error();
}

cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->name, "cudagrad emulated device (H100-like)", sizeof(prop->name) - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->totalGlobalMem = size_t(80) << 30;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = 227 * 1024;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = 132;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->unifiedAddressing = 1;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  prop->asyncEngineCount = 2;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (const cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = int(p.sharedMemPerBlockOptin); return cudaSuccess;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; return cudaSuccess;
    default: return fail(cudaErrorInvalidValue);
  }
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  CG_EMU_LOCK;
  return take_last_error();
}

cudaError_t cudaPeekAtLastError() {
  CG_EMU_LOCK;
  return peek_last_error();
}

const char* cudaGetErrorName(cudaError_t e) {
  const ErrorText* t = find(e);
  return t ? t->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  const ErrorText* t = find(e);
  return t ? t->text : "unknown error (not one the emulated device raises)";
}

}  // extern "C"
