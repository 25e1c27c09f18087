#include "engine/execution.h"

#include "util/check.h"

namespace cg::ops {
namespace {
thread_local ExecutionContext current;
}  // namespace

const ExecutionContext& execution() { return current; }

ExecutionScope::ExecutionScope(const ExecutionContext& context) : previous_(current) {
  CG_CHECK(context.autocast.dtype == DType::f16 || context.autocast.dtype == DType::bf16,
           "autocast needs float16 or bfloat16, got {}", dtype_name(context.autocast.dtype));
  current = context;
}

ExecutionScope::~ExecutionScope() { current = previous_; }

}  // namespace cg::ops
