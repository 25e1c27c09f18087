// cudagrad-train [--config FILE] [key=value ...]: trains MiniResNet as the config says.
// Exit codes: 0 done, 1 runtime error (data, checkpoint, I/O), 2 bad config or command line
// (nothing was started), 130 stopped by a signal (SIGINT, SIGTERM): during training steps after
// finishing the step and writing a checkpoint, elsewhere at once.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cli/cli.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "dist/identity.h"
#include "engine/tensor.h"
#include "util/check.h"
#include "util/log.h"

namespace {

struct CommandLine {
  std::string config_path;
  std::vector<std::string> overrides;
  bool print_config = false;
  bool config_reference = false;
};

// The config key whose last part is `name` ("epochs" -> "train.epochs"), "" when none or several.
std::string key_named(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  std::istringstream help(cg::train::train_config_help());
  std::string found;
  for (std::string line; std::getline(help, line);) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    const size_t dot = key.rfind('.');
    if (dot == std::string::npos || key.substr(dot + 1) != name) continue;
    if (!found.empty()) return "";
    found = key;
  }
  return found;
}

// A PyTorch script's habit, `--epochs 3`, where this program takes `train.epochs=3`: an option of
// ours it is not, so say which key it likely meant ("" when `arg` is no such case).
std::string option_meant_as_key(const std::string& arg, const char* next) {
  if (arg.rfind("--", 0) != 0 || arg.size() <= 2) return "";
  const size_t eq = arg.find('=');
  const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  if (name == "config" || name == "print-config" || name == "help" || name == "help-all" || name == "version" ||
      name == "config-reference")
    return "";
  const std::string key = key_named(name);
  const std::string value = eq != std::string::npos                                   ? arg.substr(eq + 1)
                            : next && next[0] != '-' && !std::strchr(next, '=') ? next
                                                                                    : "...";
  return "unknown option " + arg + ": config keys are set as key=value" +
         (key.empty() ? std::string(" (--help lists them)") : ", here " + key + "=" + value);
}

// CLI11 with the shared convention (apps/cli): returns -1 to go on, else the exit code.
int parse(int argc, char** argv, CommandLine& cl) {
  CLI::App app{"Trains MiniResNet as the config says. Any config key can be overridden as key=value\n"
               "(the value is parsed as YAML, e.g. model.widths=[16,32,64]); a later one wins."};
  cg::cli::configure(app, "cudagrad-train");
  app.add_option("--config", cl.config_path, "YAML config file (keys not in it keep their defaults)");
  app.add_flag("--print-config", cl.print_config, "print the resolved config as YAML and exit (trains nothing)");
  app.add_flag("--config-reference", cl.config_reference,
               "print every config key as Markdown tables (docs/config.md's generated part) and exit");
  app.add_option("overrides", cl.overrides, "config overrides, key=value");
  app.footer("Config keys:\n" + cg::train::train_config_help());
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
    if (const std::string hint = option_meant_as_key(argv[i], i + 1 < argc ? argv[i + 1] : nullptr); !hint.empty())
      return cg::cli::usage_error(app, hint);
  return cg::cli::parse(app, argc, argv);
}

// What an out-of-memory message adds: the sizes the config asked for, the likely cause.
std::string sizes_asked_for(const cg::train::TrainConfig& c) {
  return fmt::format("the config asks for model.widths={}, model.blocks={}, model.num_classes={}, "
                     "data.batch_size={}, train.eval_batch_size={}, data.image_size={}; lower them or give the "
                     "process more memory",
                     cg::shape_str(c.model.widths), cg::shape_str(c.model.blocks), c.model.num_classes,
                     c.data.batch_size, c.train.eval_batch_size, c.data.image_size);
}

}  // namespace

int main(int argc, char** argv) {
  cg::cli::exit_one_on_uncaught_out_of_memory("cudagrad-train");
  cg::train::TrainConfig config;
  std::string yaml;
  CommandLine cl;
  if (const int rc = parse(argc, argv, cl); rc >= 0) return rc;
  if (cl.config_reference) {
    std::printf("%s", cg::train::train_config_reference().c_str());
    return 0;
  }
  try {
    const cg::dist::Identity id = cg::dist::identity_from_env();  // rank-aware output from the start
    cg::log::set_rank(id.rank, id.world_size);
    config = cg::train::load_train_config(cl.config_path, cl.overrides);
    yaml = cg::train::to_yaml(config);
    if (cl.print_config) {
      std::printf("%s", yaml.c_str());
      return 0;
    }
  } catch (const cg::Error& e) {
    cg::log::error("{}", e.what());
    std::fprintf(stderr, "run 'cudagrad-train --help' for the list of keys\n");
    return 2;
  } catch (const std::exception& e) {  // reading the config ran out of memory: a runtime error
    cg::log::error("{}", cg::cli::error_text(e));
    return 1;
  }
  try {
    cg::train::install_stop_signal_handlers();  // before the first line a test or a user may react to
    cg::log::info("cudagrad-train, resolved config:\n{}", yaml);
    const cg::train::TrainResult r = cg::train::train(config, yaml);
    if (r.interrupted) {
      cg::log::warn("stopped early; resume with checkpoint.resume_from={}", r.checkpoint);
      return 130;
    }
    cg::log::info("done: {} steps, test accuracy {:.2f}%, checkpoint {}", r.steps,
                  100.0 * r.test_accuracy, r.checkpoint);
    return 0;
  } catch (const cg::UsageError& e) {
    cg::log::error("{}", e.what());
    return 2;
  } catch (const cg::OutOfMemory& e) {  // the allocator's or the loader's, with their context
    cg::log::error("{}; {}", e.what(), sizes_asked_for(config));
    return 1;
  } catch (const std::exception& e) {
    cg::log::error("{}", cg::cli::error_text(e, sizes_asked_for(config)));
    return 1;
  }
}
