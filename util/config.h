// Typed, validated configuration from YAML files and key=value overrides, knowing nothing of what
// the keys mean. A Schema lists every key (dotted name, type, default, allowed range, help); load()
// reads a YAML file of nested maps, applies command-line overrides (values parsed as YAML, so
// `model.widths=[16,32,64]` works) and rejects, before any work starts, anything the schema does
// not allow. Rule: every such problem is a cg::UsageError naming the key and where it was written
// (file:line or the command line); a malformed schema is a cg::Error (a bug, not bad input).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace cg::config {

// The type of a key. `choice` is a string limited to KeySpec::choices.
enum class Kind { integer, real, boolean, string, int_list, choice };

// A key's value: int64_t (integer), double (real), bool (boolean), std::string (string, choice),
// std::vector<int64_t> (int_list).
using Value = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

struct KeySpec {
  // Every member has an initializer so designated initializers may leave any of them out.
  std::string name{};                  // dotted: "optim.lr" is key `lr` in the map `optim`
  Kind kind = Kind::integer;
  Value default_value{};               // must hold the alternative `kind` calls for
  std::string help{};                  // one line
  std::vector<std::string> choices{};  // Kind::choice: the allowed values; unused otherwise
  std::optional<double> min{}, max{};  // inclusive bounds on a number, or on each list element
  // A further rule on the converted value: returns "" when it is acceptable, otherwise what is
  // wrong ("needs at least one element"), which load() reports like a range error.
  std::function<std::string(const Value&)> check{};
};

class Schema {
 public:
  // Declares a key. Keys of one group must be added one after another (to_yaml writes each group
  // once, in schema order), a name cannot be both a key and a group, and the default must have the
  // key's type and pass its own range and check: otherwise throws cg::Error.
  Schema& add(KeySpec spec);
  const KeySpec* find(const std::string& name) const;
  const std::vector<KeySpec>& keys() const { return keys_; }
  // Whether `name` is a group, i.e. a prefix of dotted key names ("optim" for "optim.lr").
  bool is_group(const std::string& name) const { return groups_.count(name) > 0; }
  // The key or group closest to `name` by edit distance, if close enough to be a likely typo.
  std::optional<std::string> suggest(const std::string& name) const;

 private:
  std::vector<KeySpec> keys_;
  std::set<std::string> groups_;
};

// The resolved value of every key in a schema, and where each came from.
class Values {
 public:
  // Typed access; the key must exist and have that type (a programming error otherwise).
  int64_t integer(const std::string& key) const { return std::get<int64_t>(at(key)); }
  double real(const std::string& key) const { return std::get<double>(at(key)); }
  bool boolean(const std::string& key) const { return std::get<bool>(at(key)); }
  const std::string& string(const std::string& key) const { return std::get<std::string>(at(key)); }
  const std::vector<int64_t>& int_list(const std::string& key) const {
    return std::get<std::vector<int64_t>>(at(key));
  }
  const Value& at(const std::string& key) const;  // throws cg::Error for a key it does not hold
  // Where the value came from: "file.yaml:3", "command line" or "default".
  std::string origin(const std::string& key) const;

  std::map<std::string, Value> values;
  std::map<std::string, std::string> origins;  // keys not listed count as "default"
};

// Starts from the schema's defaults, then applies the YAML file at `yaml_path` (empty: none), then
// each override in order ("key=value", value parsed as YAML; a later one wins). Throws
// cg::UsageError for: an unreadable file (path and strerror), malformed YAML (file:line and
// yaml-cpp's message), an unknown key (with a "did you mean"), a key given twice in the file, a
// value of the wrong type or shape (a map for a key, a scalar for a group), a value out of range
// or failing the key's check, an override not of the form key=value.
Values load(const Schema& schema, const std::string& yaml_path, const std::vector<std::string>& overrides);

// For rules that span several keys (checked by the caller after load): throws the cg::UsageError
// load() would for `key`, naming where its value came from.
[[noreturn]] void reject(const Values& values, const std::string& key, const std::string& what);

// Nested YAML of every key in schema order; load() of it gives the same values.
std::string to_yaml(const Schema& schema, const Values& values);
// One line per key: name, type with its allowed range or values, default, help.
std::string help(const Schema& schema);
// The same as Markdown: one table per group (key, type with its range, default, help), for
// docs/config.md, so the written reference is generated from the schema --help prints.
std::string markdown_reference(const Schema& schema);

// Pieces of the above, for messages: "int", "float", "list of int", "one of a|b".
std::string type_name(const KeySpec& spec);
// The bounds as text ("[0, 1]", ">= 1") or "" when the key has none.
std::string range_text(const KeySpec& spec);
// A value as YAML text that reads back as the same value (strings quoted where needed).
std::string to_text(const Value& value);

}  // namespace cg::config
