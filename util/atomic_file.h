// Writing a file so that a crash, a full disk or a killed process never leaves a half-written
// file under its name: write a temporary file beside it, fsync, rename over the target, fsync the
// directory. Readers see the old file or the new one, nothing in between.
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace cg {

// Replaces (or creates) `path` with `contents`, creating parent directories as needed. The new
// file gets mode 0644. Throws cg::Error naming the path, the step that failed and the system
// error (strerror); on failure the temporary file is removed and any old file is left untouched.
void write_file_atomically(const std::string& path, std::string_view contents);

// The same, with the contents given as pieces written one after another, so a caller holding
// a large file in several buffers (a checkpoint's tensors) need not concatenate them first.
void write_file_atomically(const std::string& path, std::span<const std::string_view> pieces);

}  // namespace cg
