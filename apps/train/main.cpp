// cudagrad-train --config FILE [key=value ...]: trains MiniResNet as the config says.
// Exit codes: 0 done, 1 runtime error (data, checkpoint, I/O), 2 bad config or command line
// (nothing was started), 130 stopped by a signal after writing a checkpoint.
#include <cstdio>
#include <string>
#include <vector>

#include "train/train_config.h"
#include "train/trainer.h"
#include "dist/identity.h"
#include "util/check.h"
#include "util/log.h"

namespace {

constexpr const char* kUsage =
    "usage: cudagrad-train --config FILE [key=value ...]\n"
    "       cudagrad-train --help\n"
    "Trains MiniResNet. Any config key can be overridden as key=value (the value is parsed as\n"
    "YAML, e.g. model.widths=[16,32,64]). Keys:\n";

struct CommandLine {
  std::string config_path;
  std::vector<std::string> overrides;
  bool help = false;
};

CommandLine parse(int argc, char** argv) {
  CommandLine cl;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      cl.help = true;
    } else if (arg == "--config") {
      if (i + 1 >= argc) throw cg::UsageError("--config needs a file name");
      cl.config_path = argv[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      cl.config_path = arg.substr(9);
    } else if (arg.rfind("--", 0) == 0) {
      throw cg::UsageError("unknown option '" + arg + "' (overrides are written key=value)");
    } else {
      cl.overrides.push_back(arg);
    }
  }
  return cl;
}

}  // namespace

int main(int argc, char** argv) {
  cg::train::TrainConfig config;
  std::string yaml;
  try {
    const cg::dist::Identity id = cg::dist::identity_from_env();  // rank-aware output from the start
    cg::log::set_rank(id.rank, id.world_size);
    const CommandLine cl = parse(argc, argv);
    if (cl.help) {
      std::printf("%s%s", kUsage, cg::train::train_config_help().c_str());
      return 0;
    }
    config = cg::train::load_train_config(cl.config_path, cl.overrides);
    yaml = cg::train::to_yaml(config);
  } catch (const cg::Error& e) {
    cg::log::error("{}", e.what());
    std::fprintf(stderr, "run 'cudagrad-train --help' for the list of keys\n");
    return 2;
  }
  try {
    cg::log::info("cudagrad-train, resolved config:\n{}", yaml);
    cg::train::install_stop_signal_handlers();
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
  } catch (const std::exception& e) {
    cg::log::error("{}", e.what());
    return 1;
  }
}
