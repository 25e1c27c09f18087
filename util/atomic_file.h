// Writing a file so that a crash, a full disk or a killed process never leaves a half-written
// file under its name: write a temporary file beside it, fsync, rename over the target, fsync the
// directory. Readers see the old file or the new one, nothing in between.
#pragma once
#include <string>
#include <string_view>

namespace cg {

// Creates parent directories as needed. Throws cg::Error naming the path and the system error;
// the temporary file is removed on failure.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace cg
