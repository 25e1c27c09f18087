// CG_SHARED(type, name, dims): declares a block's shared array, `__shared__ type name dims`.
// Kernels declare shared memory through it so the emulated GPU can give each block a poisoned
// array, as garbage is what a device's shared memory holds when a block starts
// (emulator/include/cuda_emulation.h defines its own, which this one then leaves alone).
#pragma once

#ifndef CG_SHARED
#define CG_SHARED(type, name, dims) __shared__ type name dims
#endif
