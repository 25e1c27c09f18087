// The command-line convention every cudagrad program follows, on top of CLI11: the same --help
// layout (printed on stdout, exit 0), `--version` (the project version, the git commit and the
// CUDA libraries compiled in), and errors on stderr naming the program, with exit code 2.
#pragma once
#include <CLI/CLI.hpp>
#include <exception>
#include <string>
#include <vector>

namespace cg::cli {

// "cudagrad 0.1.0 (0123456789ab)\nCUDA 13.0.88, cuDNN 9.19.0, NCCL 2.28.9" ("CPU only ..." in a
// build without CUDA; the commit is "unknown" when built outside a git checkout).
std::string version_text();

// An App named `program` with the shared formatting and the --version flag.
void configure(CLI::App& app, const std::string& program);

// Parses; returns -1 to go on, otherwise the code to exit with: 0 after --help or --version, 2 for
// a command-line error (printed on stderr as "<program>: error: ..." with a pointer to --help).
int parse(CLI::App& app, int argc, const char* const* argv);
int parse(CLI::App& app, std::vector<std::string> args);  // args without the program name

// A check for an integer option: "must be at least 1, got 0" (CLI11's PositiveNumber prints a range
// up to the largest double instead).
CLI::Validator at_least(long long low);
// The same with an upper bound: "must be in [1, 1024], got 5000".
CLI::Validator between(long long low, long long high);

// Running out of memory is a runtime error like a missing file: one clear line and exit code 1,
// never std::terminate's abort.
// What a program prints for an exception it ends on: e.what(), or for an allocation failure
// (std::bad_alloc, or std::length_error for a size past what a container can hold at all)
// "out of memory: <what failed>", with `context` (say, the sizes the config asked for) when given.
std::string error_text(const std::exception& e, const std::string& context = "");
// For an allocation failure that no catch reaches (a thread's, or one inside a noexcept function):
// std::terminate then prints "<program>: error: out of memory: ..." and exits 1. Any other
// uncaught exception still aborts as before.
void exit_one_on_uncaught_out_of_memory(const std::string& program);

// For errors found after parsing (e.g. two options that cannot go together): the same message
// form and exit code as a parse error.
int usage_error(const CLI::App& app, const std::string& what);

}  // namespace cg::cli
