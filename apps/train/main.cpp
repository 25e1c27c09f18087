// cudagrad-train [--config FILE] [key=value ...]: trains MiniResNet as the config says.
// Exit codes: 0 done, 1 runtime error (data, checkpoint, I/O), 2 bad config or command line
// (nothing was started), 130 stopped by a signal after writing a checkpoint.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/cli/cli.h"
#include "apps/common/train_config.h"
#include "apps/common/trainer.h"
#include "dist/identity.h"
#include "util/check.h"
#include "util/log.h"

namespace {

struct CommandLine {
  std::string config_path;
  std::vector<std::string> overrides;
  bool print_config = false;
};

// CLI11 with the shared convention (apps/cli): returns -1 to go on, else the exit code.
int parse(int argc, char** argv, CommandLine& cl) {
  CLI::App app{"Trains MiniResNet as the config says. Any config key can be overridden as key=value\n"
               "(the value is parsed as YAML, e.g. model.widths=[16,32,64]); a later one wins."};
  cg::cli::configure(app, "cudagrad-train");
  app.add_option("--config", cl.config_path, "YAML config file (keys not in it keep their defaults)");
  app.add_flag("--print-config", cl.print_config, "print the resolved config as YAML and exit (trains nothing)");
  app.add_option("overrides", cl.overrides, "config overrides, key=value");
  app.footer("Config keys:\n" + cg::apps::train_config_help());
  return cg::cli::parse(app, argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  cg::apps::TrainConfig config;
  std::string yaml;
  CommandLine cl;
  if (const int rc = parse(argc, argv, cl); rc >= 0) return rc;
  try {
    const cg::dist::Identity id = cg::dist::identity_from_env();  // rank-aware output from the start
    cg::log::set_rank(id.rank, id.world_size);
    config = cg::apps::load_train_config(cl.config_path, cl.overrides);
    yaml = cg::apps::to_yaml(config);
    if (cl.print_config) {
      std::printf("%s", yaml.c_str());
      return 0;
    }
  } catch (const cg::Error& e) {
    cg::log::error("{}", e.what());
    std::fprintf(stderr, "run 'cudagrad-train --help' for the list of keys\n");
    return 2;
  }
  try {
    cg::log::info("cudagrad-train, resolved config:\n{}", yaml);
    cg::apps::install_stop_signal_handlers();
    const cg::apps::TrainResult r = cg::apps::train(config, yaml);
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
