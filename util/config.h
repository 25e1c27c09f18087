// Typed, validated configuration from YAML files and key=value overrides, knowing nothing of what
// the keys mean. A Schema lists every key (dotted name, type, default, allowed range, help); load()
// reads a YAML file of nested maps, applies command-line overrides (values parsed as YAML, so
// `model.widths=[16,32,64]` works) and rejects, before any work starts, anything the schema does
// not allow: unknown keys (with a "did you mean"), wrong types, out-of-range values. Every error
// is a cg::UsageError naming the key and where it came from (file:line or the command line).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace cg::config {

enum class Kind { integer, real, boolean, string, int_list, choice };

using Value = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

struct KeySpec {
  std::string name;  // "optim.lr"
  Kind kind = Kind::integer;
  Value default_value;
  std::string help;
  std::vector<std::string> choices;  // for Kind::choice
  std::optional<double> min, max;    // inclusive; for numbers and list elements
};

class Schema {
 public:
  Schema& add(KeySpec spec);
  const KeySpec* find(const std::string& name) const;
  const std::vector<KeySpec>& keys() const { return keys_; }
  // The known key closest to `name` by edit distance, if reasonably close.
  std::optional<std::string> suggest(const std::string& name) const;

 private:
  std::vector<KeySpec> keys_;
};

class Values {
 public:
  int64_t integer(const std::string& key) const { return std::get<int64_t>(at(key)); }
  double real(const std::string& key) const { return std::get<double>(at(key)); }
  bool boolean(const std::string& key) const { return std::get<bool>(at(key)); }
  const std::string& string(const std::string& key) const { return std::get<std::string>(at(key)); }
  const std::vector<int64_t>& int_list(const std::string& key) const {
    return std::get<std::vector<int64_t>>(at(key));
  }
  // Where the value came from: "file.yaml:3", "command line" or "default".
  std::string origin(const std::string& key) const;
  const Value& at(const std::string& key) const;

  std::map<std::string, Value> values;
  std::map<std::string, std::string> origins;
};

// yaml_path may be empty (defaults and overrides only).
Values load(const Schema& schema, const std::string& yaml_path, const std::vector<std::string>& overrides);
// Nested YAML of every key in schema order; reloading it gives the same values.
std::string to_yaml(const Schema& schema, const Values& values);
// One line per key: name, type, default, help.
std::string help(const Schema& schema);

}  // namespace cg::config
