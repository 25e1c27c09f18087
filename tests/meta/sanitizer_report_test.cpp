// The child-process helper (support/processes.h) fails a test whose child a sanitizer stopped:
// by the report in the child's output or by the sanitizers' own exit code, even when the test
// expected the child to fail. Fake children (sh) print what a sanitizer would.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <chrono>

#include "support/paths.h"
#include "support/processes.h"

namespace cg::test {
namespace {

// Runs `script` under sh through start() and wait_for(), as the fault tests run the trainer.
int run_fake_child(const std::string& script) {
  const auto log = make_temp_dir("sanitizer_report") / "log.txt";
  return wait_for(start("sh -c '" + script + "'", log), std::chrono::seconds(30));
}

TEST(SanitizerReport, AnAddressSanitizerReportFailsTheTestEvenWhenExitOneWasExpected) {
  int rc = 0;
  EXPECT_NONFATAL_FAILURE(rc = run_fake_child("echo \"==1==ERROR: AddressSanitizer: heap-use-after-free\"; exit 1"),
                          "ERROR: AddressSanitizer: heap-use-after-free");
  EXPECT_EQ(rc, 1);  // what a fault test checks, and alone would take for the expected failure
}

TEST(SanitizerReport, LeakAndUndefinedBehaviorReportsFailTheTest) {
  EXPECT_NONFATAL_FAILURE(run_fake_child("echo \"==7==ERROR: LeakSanitizer: detected memory leaks\"; exit 1"),
                          "LeakSanitizer");
  EXPECT_NONFATAL_FAILURE(run_fake_child("echo \"a.cpp:3:5: runtime error: signed integer overflow\"; exit 1"),
                          "a.cpp:3:5: runtime error: signed integer overflow");
}

TEST(SanitizerReport, TheSanitizersExitCodeFailsTheTestWithoutAReport) {
  EXPECT_NONFATAL_FAILURE(run_fake_child("exit " + std::to_string(kSanitizerExitCode)), "exit code 86");
}

TEST(SanitizerReport, AnOrdinaryFailureIsNoReport) {
  EXPECT_EQ(run_fake_child("echo \"error: data.path /x: no such file\"; exit 1"), 1);
  EXPECT_EQ(run_fake_child("exit 0"), 0);
  EXPECT_EQ(sanitizer_report("step 1 loss 2.3\nerror: out of memory: an allocation failed\n"), "");
  EXPECT_EQ(sanitizer_report("x\n==9==ERROR: AddressSanitizer: SEGV on unknown address\n  #0 f\n"),
            "==9==ERROR: AddressSanitizer: SEGV on unknown address");
}

// For a child started through std::system, whose exit code and output the test has itself.
TEST(SanitizerReport, TheHelperForOtherChildrenReturnsWhetherTheChildWasClean) {
  bool clean = true;
  EXPECT_NONFATAL_FAILURE(clean = expect_no_sanitizer_report(1, "==3==ERROR: AddressSanitizer: x\n", "a child"),
                          "a child was stopped by a sanitizer");
  EXPECT_FALSE(clean);
  EXPECT_TRUE(expect_no_sanitizer_report(2, "error: config key 'model.blocks'\n", "a child"));
}

}  // namespace
}  // namespace cg::test
