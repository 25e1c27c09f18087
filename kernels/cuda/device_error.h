// Errors that kernels find on the device (today: cross_entropy's labels outside [0, classes)),
// reported on the host without a synchronization of their own. A kernel records the first one in
// pinned host memory mapped into the device; the host looks at the record where it waits for the
// device anyway (engine/device_copy.cpp after a device-to-host copy, which is where a loss or an
// accuracy is read) and where an op that can fail is issued again (the next cross_entropy). So an
// error surfaces at the first such point after its kernel ran, one step late at most in a loop
// that reads its loss every step. One record per process: the host thread that looks first
// reports it. Plain types only: included by .cu and .cpp files alike.
#pragma once
#include <cstdint>

namespace cg::kernels::cuda {

enum DeviceErrorCode : int32_t { kNoDeviceError = 0, kLabelOutOfRange = 1 };

// Written by a kernel: `claimed` is taken with an atomic compare-and-swap so that only the first
// error fills value/index/limit; `code` is set last (after a system fence), so a host that sees
// it set sees the rest.
struct DeviceErrorRecord {
  int32_t claimed;
  int32_t code;    // DeviceErrorCode
  int64_t value;   // the offending value (the label)
  int64_t index;   // where (the row)
  int64_t limit;   // the bound it broke (the number of classes)
};

// The record, usable from kernels of any device of this process; made on first use.
DeviceErrorRecord* device_error_record();
// Throws an Error describing the recorded error, if any, and clears the record. Never touches the
// device and costs a memory read, so it may be called often; does nothing before the record exists.
void raise_device_error();

}  // namespace cg::kernels::cuda
