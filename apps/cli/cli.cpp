#include "apps/cli/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "cudagrad/build_info.h"
#include "cudagrad/git_commit.h"

namespace cg::cli {

std::string version_text() {
  return std::string("cudagrad ") + CUDAGRAD_VERSION + " (" + CUDAGRAD_GIT_COMMIT + ")\n" + CUDAGRAD_LIBRARIES;
}

void configure(CLI::App& app, const std::string& program) {
  app.name(program);
  app.set_version_flag("--version", version_text(), "print the version, git commit and CUDA libraries, then exit");
  app.get_formatter()->column_width(30);
}

CLI::Validator at_least(long long low) {
  return CLI::Validator(
      [low](std::string& text) -> std::string {
        long long value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected an integer, got '" + text + "'";
        return value >= low ? "" : "must be at least " + std::to_string(low) + ", got " + text;
      },
      ">= " + std::to_string(low));
}

CLI::Validator between(long long low, long long high) {
  const std::string range = "[" + std::to_string(low) + ", " + std::to_string(high) + "]";
  return CLI::Validator(
      [low, high, range](std::string& text) -> std::string {
        long long value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected an integer, got '" + text + "'";
        return value >= low && value <= high ? "" : "must be in " + range + ", got " + text;
      },
      range);
}

namespace {

// CLI11 reports --help and --version as "errors" with a success code; those print on stdout.
int finish(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) {
    app.exit(e);  // --help, --help-all, --version: stdout
    return 0;
  }
  return usage_error(app, e.what());
}

}  // namespace

namespace {

bool is_out_of_memory(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr || dynamic_cast<const std::length_error*>(&e) != nullptr;
}

}  // namespace

std::string error_text(const std::exception& e, const std::string& context) {
  if (!is_out_of_memory(e)) return e.what();
  const bool too_long = dynamic_cast<const std::length_error*>(&e) != nullptr;
  return std::string("out of memory: ") +
         (too_long ? "a size past what can be allocated at all (" : "an allocation failed (") + e.what() + ")" +
         (context.empty() ? "" : "; " + context);
}

namespace {

std::string g_program;  // for the terminate handler's message
std::terminate_handler g_previous_terminate = nullptr;

[[noreturn]] void on_terminate() {
  if (const std::exception_ptr uncaught = std::current_exception()) {
    try {
      std::rethrow_exception(uncaught);
    } catch (const std::exception& e) {
      if (is_out_of_memory(e)) {
        std::fprintf(stderr, "%s: error: %s\n", g_program.c_str(), error_text(e).c_str());
        std::fflush(stderr);
        std::_Exit(1);  // not exit(): other threads are still running, and destructors could hang
      }
    } catch (...) {
    }
  }
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

}  // namespace

void exit_one_on_uncaught_out_of_memory(const std::string& program) {
  g_program = program;
  g_previous_terminate = std::set_terminate(on_terminate);
}

int usage_error(const CLI::App& app, const std::string& what) {
  std::fprintf(stderr, "%s: error: %s\nrun '%s --help' for the usage\n", app.get_name().c_str(), what.c_str(),
               app.get_name().c_str());
  return 2;
}

int parse(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return finish(app, e);
  }
  return -1;
}

int parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11's vector form takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return finish(app, e);
  }
  return -1;
}

}  // namespace cg::cli
