// Helpers for the data tests: writing small dataset files (plain or gzipped) and catching the
// message of the error a call throws.
#pragma once
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "util/check.h"

namespace cg::data::test_files {

inline std::string be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(p.string().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream(p, std::ios::binary) << bytes;
  }
}

// The message of the cg::Error that f throws; "" if it throws none (other exceptions fail the test).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace cg::data::test_files
