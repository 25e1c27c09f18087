// The training config: a YAML file plus key=value command-line overrides. Any input is either
// accepted or rejected with cg::UsageError (exit code 2 in the programs); any other exception, a
// crash or a sanitizer report is a finding. An accepted config must also survive its own round
// trip: to_yaml() of it loads back as an equal config (what config.yaml in a run folder relies on).
// Input layout: the YAML text, then optionally a NUL byte and the overrides, one per line.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "train/train_config.h"
#include "fuzz/fuzz_file.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(text, '\0', size));
  const size_t yaml_size = nul ? size_t(nul - text) : size;
  std::vector<std::string> overrides;
  if (nul) {
    std::string rest(nul + 1, text + size);
    size_t start = 0;
    while (start <= rest.size()) {
      const size_t end = std::min(rest.find('\n', start), rest.size());
      overrides.push_back(rest.substr(start, end - start));
      start = end + 1;
    }
  }
  const std::string path = cg::fuzz::write_input("config.yaml", data, yaml_size);
  cg::train::TrainConfig config;
  try {
    config = cg::train::load_train_config(path, overrides);
  } catch (const cg::UsageError&) {
    return 0;
  }
  const std::string yaml = cg::train::to_yaml(config);
  const std::string again = cg::fuzz::write_input("resolved.yaml", reinterpret_cast<const uint8_t*>(yaml.data()),
                                                  yaml.size());
  const cg::train::TrainConfig reloaded = cg::train::load_train_config(again, {});
  if (!(reloaded == config)) {  // the round trip lost something: show both sides, then crash
    std::fprintf(stderr, "resolved:\n%s\nreloaded:\n%s\n", yaml.c_str(), cg::train::to_yaml(reloaded).c_str());
    __builtin_trap();
  }
  return 0;
}
