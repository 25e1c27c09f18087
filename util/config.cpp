// The schema and loading: defaults, then a YAML file of nested maps, then key=value overrides,
// each value converted to its key's type and checked. Rule: every problem in the input is a
// cg::UsageError "<where>: config key '<key>': <what>", raised before load() returns anything.
#include "util/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "util/check.h"

namespace cg::config {
namespace {

const char* const kCommandLine = "command line";
const char* const kDefault = "default";

[[noreturn]] void fail(const std::string& where, const std::string& key, const std::string& what) {
  throw UsageError(fmt::format("{}: config key '{}': {}", where, key, what));
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

// The groups a dotted name sits in, outermost first: "a.b.c" -> {"a", "a.b"}.
std::vector<std::string> enclosing_groups(const std::string& name) {
  std::vector<std::string> out;
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
    out.push_back(name.substr(0, dot));
  return out;
}

bool has_kind(Kind kind, const Value& v) {
  switch (kind) {
    case Kind::integer: return std::holds_alternative<int64_t>(v);
    case Kind::real: return std::holds_alternative<double>(v);
    case Kind::boolean: return std::holds_alternative<bool>(v);
    case Kind::string:
    case Kind::choice: return std::holds_alternative<std::string>(v);
    case Kind::int_list: return std::holds_alternative<std::vector<int64_t>>(v);
  }
  return false;
}

// "" if `v` (already of the key's type) is allowed, else the reason, phrased to follow the value.
// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    if (extra < 0 || i + size_t(extra) >= s.size()) return false;
    uint32_t cp = extra == 0 ? c : c & (0x3f >> extra);
    for (int j = 1; j <= extra; ++j) {
      const auto d = static_cast<unsigned char>(s[i + size_t(j)]);
      if ((d >> 6) != 0x2) return false;
      cp = cp << 6 | (d & 0x3f);
    }
    static constexpr uint32_t kMinOf[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinOf[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += size_t(extra) + 1;
  }
  return true;
}

std::string why_not_allowed(const KeySpec& k, const Value& v) {
  auto in_range = [&](double x) { return !(k.min && x < *k.min) && !(k.max && x > *k.max); };
  bool ok = true;
  if (const auto* i = std::get_if<int64_t>(&v)) ok = in_range(double(*i));
  if (const auto* d = std::get_if<double>(&v)) {
    if (std::isnan(*d)) return "is not a number";
    ok = in_range(*d);
  }
  if (const auto* list = std::get_if<std::vector<int64_t>>(&v))
    ok = std::all_of(list->begin(), list->end(), [&](int64_t x) { return in_range(double(x)); });
  if (!ok) return fmt::format("is out of range (allowed: {})", range_text(k));
  // config.yaml and checkpoints keep the resolved config as YAML, which is UTF-8: other bytes
  // would come back altered (fuzzing found a path whose bytes did not survive the round trip).
  if (const auto* s = std::get_if<std::string>(&v); s && !is_utf8(*s)) return "is not valid UTF-8 text";
  if (k.kind == Kind::choice) {
    const auto& s = std::get<std::string>(v);
    if (std::find(k.choices.begin(), k.choices.end(), s) == k.choices.end())
      return fmt::format("is not one of: {}", fmt::join(k.choices, ", "));
  }
  if (k.check) {
    if (std::string why = k.check(v); !why.empty()) return "is not allowed: " + why;
  }
  return "";
}

// A node as the user wrote it, on one line, for error messages.
std::string written(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (!node.IsDefined() || node.IsNull()) return "";
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << node;
  return e.c_str();
}

[[noreturn]] void wrong_type(const KeySpec& k, const std::string& where, const YAML::Node& node) {
  fail(where, k.name, fmt::format("expected {}, got '{}'", type_name(k), written(node)));
}

// `node`, which must be a scalar for key `k`.
const YAML::Node& as_scalar(const KeySpec& k, const std::string& where, const YAML::Node& node) {
  if (!node.IsScalar()) wrong_type(k, where, node);
  return node;
}

// `node` as a list of integers: a sequence of scalars.
std::vector<int64_t> as_int_list(const KeySpec& k, const std::string& where, const YAML::Node& node) {
  if (!node.IsSequence()) wrong_type(k, where, node);
  std::vector<int64_t> list;
  for (const auto& item : node) {
    if (!item.IsScalar()) wrong_type(k, where, node);
    list.push_back(item.as<int64_t>());
  }
  return list;
}

// A YAML node converted to the key's type, or a failure naming key, type and value.
Value parse(const KeySpec& k, const YAML::Node& node, const std::string& where) {
  try {
    switch (k.kind) {
      case Kind::integer:
        return as_scalar(k, where, node).as<int64_t>();  // throws YAML::BadConversion for "abc" or "1.5"
      case Kind::real:
        return as_scalar(k, where, node).as<double>();
      case Kind::boolean:
        return as_scalar(k, where, node).as<bool>();  // true/false, yes/no, on/off
      case Kind::string:
      case Kind::choice:
        if (node.IsNull() && k.kind == Kind::string) return std::string();  // `path:` with nothing after it means ""
        return as_scalar(k, where, node).Scalar();
      case Kind::int_list:
        return as_int_list(k, where, node);
    }
  } catch (const YAML::BadConversion&) {
    wrong_type(k, where, node);
  }
  return Value();
}

// Converts a YAML node to the key's type and checks it, or fails naming key, type and value.
Value convert(const KeySpec& k, const YAML::Node& node, const std::string& where) {
  const Value v = parse(k, node, where);
  if (std::string why = why_not_allowed(k, v); !why.empty())
    fail(where, k.name, fmt::format("value '{}' {}", written(node), why));
  return v;
}

[[noreturn]] void unknown_key(const Schema& schema, const std::string& name, const std::string& where) {
  const auto near = schema.suggest(name);
  fail(where, name, near ? fmt::format("unknown key; did you mean '{}'?", *near) : std::string("unknown key"));
}

std::string location(const std::string& path, const YAML::Mark& mark) {
  return mark.line >= 0 ? fmt::format("{}:{}", path, mark.line + 1) : path;
}

// Reads one map of the file; `prefix` is the group it belongs to ("" at the top).
void read_map(const Schema& schema, const YAML::Node& map, const std::string& prefix, const std::string& path,
              Values& out) {
  std::map<std::string, std::string> seen;  // yaml-cpp keeps duplicate keys; we refuse them
  for (const auto& entry : map) {
    const std::string where = location(path, entry.first.Mark());
    if (!entry.first.IsScalar())
      fail(where, prefix, fmt::format("'{}' is not a key name", written(entry.first)));
    const std::string name = prefix.empty() ? entry.first.Scalar() : prefix + "." + entry.first.Scalar();
    if (const auto [it, fresh] = seen.emplace(name, where); !fresh)
      fail(where, name, fmt::format("given twice (first at {})", it->second));
    if (const KeySpec* k = schema.find(name)) {
      out.values[name] = convert(*k, entry.second, where);
      out.origins[name] = where;
    } else if (schema.is_group(name)) {
      if (!entry.second.IsMap())
        fail(where, name, fmt::format("is a group of keys, so it needs a map, got '{}'", written(entry.second)));
      read_map(schema, entry.second, name, path, out);
    } else {
      unknown_key(schema, name, where);
    }
  }
}

void apply_file(const Schema& schema, const std::string& path, Values& out) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("cannot read config file {}: {}", path, std::strerror(errno)));
  // A directory opens fine on Linux and reads as empty, which would silently mean "all defaults".
  if (std::filesystem::is_directory(path))
    throw UsageError(fmt::format("cannot read config file {}: {}", path, std::strerror(EISDIR)));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw UsageError(fmt::format("{}:{}: a NUL byte is not allowed in YAML text (is this a config file?)", path,
                                 1 + std::count(text.begin(), text.begin() + std::ptrdiff_t(nul), '\n')));
  // Nothing but white space is a file emptied or not yet written, not a choice: the defaults are
  // had by leaving --config out (a file of comments only still means "no changes").
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UsageError(fmt::format("config file {} is empty; leave out the config file to train with the defaults",
                                 path));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(fmt::format("{}: not valid YAML: {}", location(path, e.mark), e.msg));
  }
  if (root.IsNull()) return;  // comments only: nothing to change
  if (!root.IsMap())
    throw UsageError(fmt::format("{}: a config file must hold a map of keys at the top level, got '{}'",
                                 location(path, root.Mark()), written(root)));
  read_map(schema, root, "", path, out);
}

void apply_override(const Schema& schema, const std::string& arg, Values& out) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(fmt::format("command-line argument '{}' is not of the form key=value", arg));
  const std::string key = arg.substr(0, eq), text = arg.substr(eq + 1);
  const KeySpec* k = schema.find(key);
  if (!k && schema.is_group(key)) {
    const auto first = std::find_if(schema.keys().begin(), schema.keys().end(),
                                    [&](const KeySpec& s) { return s.name.rfind(key + ".", 0) == 0; });
    fail(kCommandLine, key, fmt::format("is a group of keys; set one of them, e.g. {}=...", first->name));
  }
  if (!k) unknown_key(schema, key, kCommandLine);
  // yaml-cpp reads a NUL among the first bytes as a sign of UTF-16 and decodes the rest so, which
  // alters the value (fuzzing found it); YAML forbids NUL anyway. argv cannot hold one, other
  // callers can.
  if (text.find('\0') != std::string::npos) fail(kCommandLine, key, "holds a NUL byte, which a config value cannot");
  YAML::Node node;
  bool parsed = true;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (k->kind != Kind::string) fail(kCommandLine, key, fmt::format("'{}' is not a valid YAML value: {}", text, e.msg));
    parsed = false;
  }
  // A string key takes the text as written unless it reads as one YAML scalar (e.g. quoted) or as
  // nothing: a path like "a: b" or "[x]" must not turn into a map or a list.
  if (k->kind == Kind::string && (!parsed || !(node.IsScalar() || node.IsNull()))) node = YAML::Node(text);
  out.values[key] = convert(*k, node, kCommandLine);
  out.origins[key] = kCommandLine;
}

}  // namespace

Schema& Schema::add(KeySpec spec) {
  const std::string& name = spec.name;
  CG_CHECK(!name.empty() && name.front() != '.' && name.back() != '.' && name.find("..") == std::string::npos,
           "schema: malformed key name '{}'", name);
  CG_CHECK(find(name) == nullptr && !is_group(name), "schema: '{}' declared twice", name);
  CG_CHECK(has_kind(spec.kind, spec.default_value), "schema: default of {} does not have type {}", name,
           type_name(spec));
  CG_CHECK(spec.kind != Kind::choice || !spec.choices.empty(), "schema: choice key {} lists no choices", name);
  const std::string why = why_not_allowed(spec, spec.default_value);
  CG_CHECK(why.empty(), "schema: default of {} {}", name, why);
  // Groups stay contiguous: a group this key opens anew must not have been closed before.
  const std::vector<std::string> mine = enclosing_groups(name);
  const std::vector<std::string> last = keys_.empty() ? std::vector<std::string>{} : enclosing_groups(keys_.back().name);
  for (size_t i = 0; i < mine.size(); ++i) {
    const bool continues = i < last.size() && last[i] == mine[i];
    CG_CHECK(continues || !is_group(mine[i]), "schema: key {} must follow the other keys of group {}", name, mine[i]);
    CG_CHECK(find(mine[i]) == nullptr, "schema: {} is a key, so it cannot also be the group of {}", mine[i], name);
  }
  groups_.insert(mine.begin(), mine.end());
  keys_.push_back(std::move(spec));
  return *this;
}

const KeySpec* Schema::find(const std::string& name) const {
  for (const auto& k : keys_)
    if (k.name == name) return &k;
  return nullptr;
}

std::optional<std::string> Schema::suggest(const std::string& name) const {
  // Up to one edit per three characters (at least 1, at most 3): a typo, not a different word.
  size_t best_distance = std::clamp<size_t>(name.size() / 3, 1, 3) + 1;
  std::optional<std::string> best;
  auto consider = [&](const std::string& candidate) {
    const size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  };
  for (const auto& k : keys_) consider(k.name);
  for (const auto& g : groups_) consider(g);
  return best;
}

const Value& Values::at(const std::string& key) const {
  auto it = values.find(key);
  CG_CHECK(it != values.end(), "config has no key {}", key);
  return it->second;
}

std::string Values::origin(const std::string& key) const {
  auto it = origins.find(key);
  return it == origins.end() ? kDefault : it->second;
}

Values load(const Schema& schema, const std::string& yaml_path, const std::vector<std::string>& overrides) {
  Values out;
  for (const auto& k : schema.keys()) {
    out.values[k.name] = k.default_value;
    out.origins[k.name] = kDefault;
  }
  if (!yaml_path.empty()) apply_file(schema, yaml_path, out);
  for (const auto& arg : overrides) apply_override(schema, arg, out);
  return out;
}

void reject(const Values& values, const std::string& key, const std::string& what) {
  fail(values.origin(key), key, what);
}

}  // namespace cg::config
