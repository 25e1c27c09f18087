#include "util/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/check.h"

namespace cg::config {
namespace {

std::string kind_name(const KeySpec& k) {
  switch (k.kind) {
    case Kind::integer: return "int";
    case Kind::real: return "float";
    case Kind::boolean: return "bool";
    case Kind::string: return "string";
    case Kind::int_list: return "list of int";
    case Kind::choice: return fmt::format("one of {}", fmt::join(k.choices, "|"));
  }
  return "?";
}

std::string show(const Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>) return fmt::format("[{}]", fmt::join(x, ", "));
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return x.empty() ? "\"\"" : x;
        else if constexpr (std::is_same_v<T, double>) {
          std::string s = fmt::format("{}", x);
          if (s.find_first_of(".e") == std::string::npos && s.find("inf") == std::string::npos) s += ".0";
          return s;
        } else return fmt::format("{}", x);
      },
      v);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

[[noreturn]] void fail(const std::string& key, const std::string& where, const std::string& what) {
  throw UsageError(fmt::format("config key '{}' ({}): {}", key, where, what));
}

void check_range(const KeySpec& k, double v, const std::string& where, const std::string& shown) {
  if ((k.min && v < *k.min) || (k.max && v > *k.max)) {
    std::string range = k.min && k.max ? fmt::format("[{}, {}]", *k.min, *k.max)
                        : k.min        ? fmt::format(">= {}", *k.min)
                                       : fmt::format("<= {}", *k.max);
    fail(k.name, where, fmt::format("value {} is out of range; allowed: {}", shown, range));
  }
}

// Converts a YAML node to the key's type, or fails naming key, expected type and value.
Value parse(const KeySpec& k, const YAML::Node& node, const std::string& where) {
  auto text = [&]() -> std::string {
    if (node.IsScalar()) return node.Scalar();
    std::ostringstream out;
    out << YAML::Dump(node);
    return out.str();
  };
  auto wrong = [&]() -> Value {
    fail(k.name, where, fmt::format("expected {}, got '{}'", kind_name(k), text()));
  };
  try {
    switch (k.kind) {
      case Kind::integer: {
        if (!node.IsScalar()) return wrong();
        const int64_t v = node.as<int64_t>();
        check_range(k, double(v), where, text());
        return v;
      }
      case Kind::real: {
        if (!node.IsScalar()) return wrong();
        const double v = node.as<double>();
        check_range(k, v, where, text());
        return v;
      }
      case Kind::boolean:
        if (!node.IsScalar()) return wrong();
        return node.as<bool>();
      case Kind::string:
        if (node.IsNull()) return std::string();
        if (!node.IsScalar()) return wrong();
        return node.Scalar();
      case Kind::choice: {
        if (!node.IsScalar()) return wrong();
        const std::string v = node.Scalar();
        if (std::find(k.choices.begin(), k.choices.end(), v) == k.choices.end())
          fail(k.name, where, fmt::format("'{}' is not one of {}", v, fmt::join(k.choices, ", ")));
        return v;
      }
      case Kind::int_list: {
        if (!node.IsSequence()) return wrong();
        std::vector<int64_t> out;
        for (const auto& item : node) {
          if (!item.IsScalar()) return wrong();
          const int64_t v = item.as<int64_t>();
          check_range(k, double(v), where, text());
          out.push_back(v);
        }
        return out;
      }
    }
  } catch (const YAML::BadConversion&) {
    return wrong();
  }
  return wrong();
}

std::string location(const std::string& path, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return m.line >= 0 ? fmt::format("{}:{}", path, m.line + 1) : path;
}

bool is_group(const Schema& schema, const std::string& prefix) {
  for (const auto& k : schema.keys())
    if (k.name.rfind(prefix + ".", 0) == 0) return true;
  return false;
}

void unknown(const Schema& schema, const std::string& key, const std::string& where) {
  const auto s = schema.suggest(key);
  fail(key, where, s ? fmt::format("unknown key (did you mean '{}'?)", *s) : std::string("unknown key"));
}

void walk(const Schema& schema, const YAML::Node& map, const std::string& prefix, const std::string& path,
          Values& out) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string name = prefix.empty() ? it->first.Scalar() : prefix + "." + it->first.Scalar();
    const std::string where = location(path, it->first);
    if (out.origins.count(name) && out.origins[name] != "default")
      fail(name, where, fmt::format("given twice (also at {})", out.origins[name]));
    if (const KeySpec* k = schema.find(name)) {
      out.values[name] = parse(*k, it->second, where);
      out.origins[name] = where;
    } else if (is_group(schema, name)) {
      if (!it->second.IsMap()) fail(name, where, "expected a map of keys under this group");
      walk(schema, it->second, name, path, out);
    } else {
      unknown(schema, name, where);
    }
  }
}

}  // namespace

Schema& Schema::add(KeySpec spec) {
  CG_CHECK(find(spec.name) == nullptr, "schema: key {} declared twice", spec.name);
  keys_.push_back(std::move(spec));
  return *this;
}

const KeySpec* Schema::find(const std::string& name) const {
  for (const auto& k : keys_)
    if (k.name == name) return &k;
  return nullptr;
}

std::optional<std::string> Schema::suggest(const std::string& name) const {
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(3, name.size() / 3) + 1;
  for (const auto& k : keys_) {
    const size_t d = edit_distance(name, k.name);
    if (d < best_d) {
      best_d = d;
      best = k.name;
    }
  }
  return best;
}

const Value& Values::at(const std::string& key) const {
  auto it = values.find(key);
  CG_CHECK(it != values.end(), "config has no key {}", key);
  return it->second;
}

std::string Values::origin(const std::string& key) const {
  auto it = origins.find(key);
  return it == origins.end() ? "default" : it->second;
}

Values load(const Schema& schema, const std::string& yaml_path, const std::vector<std::string>& overrides) {
  Values out;
  for (const auto& k : schema.keys()) {
    out.values[k.name] = k.default_value;
    out.origins[k.name] = "default";
  }
  if (!yaml_path.empty()) {
    std::ifstream in(yaml_path);
    if (!in) throw UsageError(fmt::format("cannot read config file {}: {}", yaml_path, std::strerror(errno)));
    YAML::Node root;
    try {
      root = YAML::Load(in);
    } catch (const YAML::Exception& e) {
      throw UsageError(fmt::format("config file {} is not valid YAML: line {}: {}", yaml_path, e.mark.line + 1, e.msg));
    }
    if (root.IsMap()) {
      walk(schema, root, "", yaml_path, out);
    } else if (!root.IsNull()) {
      throw UsageError(fmt::format("config file {} must hold a map of keys at the top level", yaml_path));
    }
  }
  for (const auto& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(fmt::format("command-line argument '{}' is not of the form key=value", o));
    const std::string key = o.substr(0, eq), text = o.substr(eq + 1);
    const KeySpec* k = schema.find(key);
    if (!k) unknown(schema, key, "command line");
    YAML::Node node;
    try {
      node = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      if (k->kind != Kind::string)
        fail(key, "command line", fmt::format("'{}' is not a valid YAML value: {}", text, e.msg));
    }
    // A string key takes the text as written unless it reads as one YAML scalar (e.g. quoted):
    // paths like "a: b" or "[x]" should not turn into maps or lists.
    if (k->kind == Kind::string && !node.IsScalar() && !node.IsNull()) node = YAML::Node(text);
    out.values[key] = parse(*k, node, "command line");
    out.origins[key] = "command line";
  }
  return out;
}

std::string to_yaml(const Schema& schema, const Values& values) {
  std::string out, group;
  for (const auto& k : schema.keys()) {
    const size_t dot = k.name.rfind('.');
    const std::string g = dot == std::string::npos ? "" : k.name.substr(0, dot);
    const std::string leaf = dot == std::string::npos ? k.name : k.name.substr(dot + 1);
    CG_CHECK(g.find('.') == std::string::npos, "to_yaml supports one level of groups ({})", k.name);
    if (g != group) {
      out += g + ":\n";
      group = g;
    }
    const Value& v = values.at(k.name);
    std::string shown = show(v);
    if (const auto* s = std::get_if<std::string>(&v); s && !s->empty()) {
      YAML::Emitter e;  // quote strings that YAML would otherwise read as something else
      e << YAML::DoubleQuoted << *s;
      shown = e.c_str();
    }
    out += fmt::format("{}{}: {}\n", g.empty() ? "" : "  ", leaf, shown);
  }
  return out;
}

std::string help(const Schema& schema) {
  std::string out;
  for (const auto& k : schema.keys())
    out += fmt::format("  {:<26} {:<34} default {:<14} {}\n", k.name, kind_name(k), show(k.default_value), k.help);
  return out;
}

}  // namespace cg::config
