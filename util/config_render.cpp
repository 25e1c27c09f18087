// Turning a schema and its values back into text: the resolved config as nested YAML (which
// load() reads back to the same values), the help listing and its Markdown twin. Rule: schema
// order, every key.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "util/check.h"
#include "util/config.h"

namespace cg::config {
namespace {

std::vector<std::string> split_dots(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
    parts.push_back(name.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(name.substr(start));
  return parts;
}

}  // namespace

std::string type_name(const KeySpec& spec) {
  switch (spec.kind) {
    case Kind::integer: return "int";
    case Kind::real: return "float";
    case Kind::boolean: return "bool";
    case Kind::string: return "string";
    case Kind::int_list: return "list of int";
    case Kind::choice: return fmt::format("one of {}", fmt::join(spec.choices, "|"));
  }
  return "?";
}

std::string range_text(const KeySpec& spec) {
  if (spec.min && spec.max) return fmt::format("[{}, {}]", *spec.min, *spec.max);
  if (spec.min) return fmt::format(">= {}", *spec.min);
  if (spec.max) return fmt::format("<= {}", *spec.max);
  return "";
}

std::string to_text(const Value& value) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          return fmt::format("[{}]", fmt::join(x, ", "));
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          // yaml-cpp quotes the strings YAML would read as something else, but leaves control
          // characters bare: a trailing CR then reads back as a line break and is lost (fuzzing
          // found it). Those strings go double-quoted, where every control character is escaped;
          // load() has already checked the text is UTF-8, which that style needs.
          const bool has_control =
              std::any_of(x.begin(), x.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
          YAML::Emitter e;
          if (has_control) e << YAML::DoubleQuoted;
          e << x;
          return e.c_str();
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isnan(x)) return ".nan";
          if (std::isinf(x)) return x > 0 ? ".inf" : "-.inf";
          std::string s = fmt::format("{}", x);  // shortest text that reads back exactly
          if (s.find_first_of(".e") == std::string::npos) s += ".0";  // shows it is a float
          return s;
        } else {
          return fmt::format("{}", x);
        }
      },
      value);
}

std::string to_yaml(const Schema& schema, const Values& values) {
  std::string out;
  std::vector<std::string> open;  // the groups of the previous key, outermost first
  for (const auto& k : schema.keys()) {
    std::vector<std::string> parts = split_dots(k.name);
    const std::string leaf = parts.back();
    parts.pop_back();
    size_t common = 0;  // groups already open; Schema::add keeps each group's keys together
    while (common < open.size() && common < parts.size() && open[common] == parts[common]) ++common;
    for (size_t i = common; i < parts.size(); ++i) out += std::string(2 * i, ' ') + parts[i] + ":\n";
    open = parts;
    out += fmt::format("{}{}: {}\n", std::string(2 * parts.size(), ' '), leaf, to_text(values.at(k.name)));
  }
  return out;
}

namespace {

// "int [1, 10]", "list of int, each >= 1", "one of a|b": the type as help and reference show it.
std::string type_with_range(const KeySpec& k) {
  const std::string range = range_text(k);
  if (range.empty()) return type_name(k);
  return type_name(k) + (k.kind == Kind::int_list ? ", each " + range : " " + range);
}

// A Markdown table cell: '|' would end the cell, so it is escaped as Markdown wants.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string help(const Schema& schema) {
  struct Row {
    std::string name, type, default_text, help;
  };
  std::vector<Row> rows;
  size_t name_width = 0, type_width = 0, default_width = 0;  // columns as wide as their widest cell
  for (const auto& k : schema.keys()) {
    Row r{k.name, type_with_range(k), to_text(k.default_value), k.help};
    name_width = std::max(name_width, r.name.size());
    type_width = std::max(type_width, r.type.size());
    default_width = std::max(default_width, r.default_text.size());
    rows.push_back(std::move(r));
  }
  std::string out;
  for (const Row& r : rows)
    out += fmt::format("  {:<{}}  {:<{}}  default {:<{}}  {}\n", r.name, name_width, r.type, type_width,
                       r.default_text, default_width, r.help);
  return out;
}

std::string markdown_reference(const Schema& schema) {
  std::string out, group;
  for (const auto& k : schema.keys()) {
    const std::string key_group = k.name.substr(0, k.name.rfind('.'));
    if (key_group != group) {  // Schema::add keeps a group's keys together: one table per group
      group = key_group;
      out += fmt::format("{}### {}\n\n| key | type | default | meaning |\n| --- | --- | --- | --- |\n",
                         out.empty() ? "" : "\n", group);
    }
    out += fmt::format("| `{}` | {} | `{}` | {} |\n", k.name, cell(type_with_range(k)),
                       cell(to_text(k.default_value)), cell(k.help));
  }
  return out;
}

}  // namespace cg::config
