// What tch does not expose: the accelerator's (CUDA's) memory statistics, read through
// libtorch's device-generic API (`at::accelerator`, present since PyTorch 2.8). Built by
// build.rs against libtorch's headers, only with the `dynamic` feature.
//
// Every function catches C++ exceptions (no accelerator, a CUDA error) and returns -1,
// with the reason left for `oomlint_last_error`: no exception crosses into Rust.

#include <ATen/DeviceAccelerator.h>
#include <c10/core/Allocator.h>

#include <cstdint>
#include <exception>
#include <string>

namespace {
thread_local std::string last_error;

int fail(const std::exception& e) {
  last_error = e.what();
  // Keep the first line: c10 appends a C++ backtrace.
  auto nl = last_error.find('\n');
  if (nl != std::string::npos) last_error.resize(nl);
  return -1;
}
}  // namespace

extern "C" {

// The reason of the last failure on this thread.
const char* oomlint_last_error() { return last_error.c_str(); }

// out[0..4]: allocated bytes (current, peak), reserved bytes (current, peak) of the
// caching allocator of accelerator device `device`, aggregated over pools.
int oomlint_accel_stats(int device, int64_t* out) {
  try {
    auto stats = at::accelerator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = stats.allocated_bytes[agg].current;
    out[1] = stats.allocated_bytes[agg].peak;
    out[2] = stats.reserved_bytes[agg].current;
    out[3] = stats.reserved_bytes[agg].peak;
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

// Starts a new peak: the peaks become the current values.
int oomlint_accel_reset_peak(int device) {
  try {
    at::accelerator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

// The device's free and total memory, as the driver reports them.
int oomlint_accel_memory_info(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  try {
    auto info = at::accelerator::getMemoryInfo(static_cast<c10::DeviceIndex>(device));
    *free_bytes = info.first;
    *total_bytes = info.second;
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

}  // extern "C"
