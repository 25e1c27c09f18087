// metrics.jsonl: one JSON object per line, appended and flushed as training goes, so a crashed or
// interrupted run keeps every line it logged. Rank 0 writes; other ranks hold a disabled writer.
#pragma once
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace cg::apps {

class MetricsWriter {
 public:
  MetricsWriter() = default;  // disabled
  // append: keep lines of an earlier run (resume); otherwise start the file afresh.
  MetricsWriter(const std::string& path, bool append);
  void write(const nlohmann::json& record);
  bool enabled() const { return out_.is_open(); }

 private:
  std::ofstream out_;
};

}  // namespace cg::apps
