// Checking that an error message names everything it should (key, file:line, cause).
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace cg::test {

// Expects `message` to contain every one of `parts`.
inline void expect_mentions(const std::string& message, std::initializer_list<std::string> parts) {
  EXPECT_FALSE(message.empty()) << "no error";
  for (const auto& p : parts) EXPECT_NE(message.find(p), std::string::npos) << "'" << p << "' not in: " << message;
}

}  // namespace cg::test
