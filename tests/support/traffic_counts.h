// For tests of what the emulated GPU counts per kernel launch (cg_emu/traffic.h: memory requests,
// sectors, WMMA flops): NEED_TRAFFIC_COUNTS() skips, saying why, where there are no counts (a real
// GPU, or an emulated one built without the access hooks), and CUDAGRAD_TRAFFIC_COUNTS says at
// compile time whether the counting API exists.
#pragma once
#include <gtest/gtest.h>

#include "support/need_gpu.h"

#ifdef CUDAGRAD_GPU_EMULATION
#include "cg_emu/traffic.h"
#define CUDAGRAD_TRAFFIC_COUNTS 1
#define NEED_TRAFFIC_COUNTS()                                                                                       \
  do {                                                                                                              \
    NEED_GPU();                                                                                                     \
    if (!cg_emu::traffic_hooks_built())                                                                             \
      GTEST_SKIP() << "this emulated GPU has no access hooks (CUDAGRAD_EMU_ACCESS_CHECKS=OFF)";                     \
  } while (0)
#else
#define CUDAGRAD_TRAFFIC_COUNTS 0
#define NEED_TRAFFIC_COUNTS()                                                                                       \
  do {                                                                                                              \
    NEED_GPU();                                                                                                     \
    GTEST_SKIP() << "memory traffic and tensor-core work are counted by the emulated GPU; this is a real GPU "     \
                    "(Nsight Compute measures them there)";                                                         \
  } while (0)
#endif
