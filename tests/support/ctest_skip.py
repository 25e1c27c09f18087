"""What a Python test under CTest does when something it needs is missing: CTest's skip (exit 77,
SKIP_RETURN_CODE) saying why, or, with CUDAGRAD_REQUIRE_ALL=1 (scripts/test.sh, so CI), a failure
(exit 1), as NEED_TOOL does for the C++ tests (tests/support/need_tool.h)."""
import os

SKIPPED = 77


def skip_or_fail(why):
    """The exit code for a test that cannot run for `why`, after saying so."""
    if os.environ.get("CUDAGRAD_REQUIRE_ALL", "0") not in ("", "0"):
        print(f"FAIL (CUDAGRAD_REQUIRE_ALL is set, so this may not skip): {why}")
        return 1
    print(f"skipped: {why}")
    return SKIPPED
