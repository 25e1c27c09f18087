// The config machinery on a small schema: types, defaults, YAML files, overrides parsed as YAML,
// rendering, and every error naming the key and where it was written.
#include <gtest/gtest.h>

#include "support/messages.h"

#include <algorithm>
#include <fstream>
#include <set>

#include "support/paths.h"
#include "util/check.h"
#include "util/config.h"

namespace cg::config {
namespace {

using List = std::vector<int64_t>;

Schema schema() {
  Schema s;
  s.add({.name = "a.count", .kind = Kind::integer, .default_value = int64_t(3), .help = "a count", .min = 1, .max = 10});
  s.add({.name = "a.rate", .kind = Kind::real, .default_value = 0.5, .help = "a rate", .min = 0.0});
  s.add({.name = "a.flag", .kind = Kind::boolean, .default_value = false, .help = "a flag"});
  s.add({.name = "b.name", .kind = Kind::string, .default_value = std::string("x"), .help = "a name"});
  s.add({.name = "b.sizes",
         .kind = Kind::int_list,
         .default_value = List{1, 2},
         .help = "sizes",
         .min = 1,
         .check = [](const Value& v) { return std::get<List>(v).empty() ? "needs one size or more" : ""; }});
  s.add({.name = "b.mode", .kind = Kind::choice, .default_value = std::string("fast"), .help = "mode",
         .choices = {"fast", "slow"}});
  s.add({.name = "c.deep.level", .kind = Kind::integer, .default_value = int64_t(0), .help = "nested two deep"});
  return s;
}

std::string write(const std::string& text) {
  const auto path = test::make_temp_dir("cfg") / "c.yaml";
  std::ofstream(path) << text;
  return path.string();
}

// The UsageError message of loading, or "" when it loads.
std::string error_of(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    load(schema(), path, overrides);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

using test::expect_mentions;

TEST(Config, DefaultsWhenNothingIsGiven) {
  const Values v = load(schema(), "", {});
  EXPECT_EQ(v.integer("a.count"), 3);
  EXPECT_DOUBLE_EQ(v.real("a.rate"), 0.5);
  EXPECT_FALSE(v.boolean("a.flag"));
  EXPECT_EQ(v.string("b.name"), "x");
  EXPECT_EQ(v.int_list("b.sizes"), (List{1, 2}));
  EXPECT_EQ(v.string("b.mode"), "fast");
  EXPECT_EQ(v.integer("c.deep.level"), 0);
  EXPECT_EQ(v.origin("a.count"), "default");
  EXPECT_EQ(load(schema(), write("# all defaults\n"), {}).values, v.values);  // comments only change nothing
  // An empty file is refused (exit 2 in the programs): an emptied file, not a choice of defaults.
  for (const std::string text : {"", " \n\n"}) {
    const std::string path = write(text);
    try {
      load(schema(), path, {});
      ADD_FAILURE() << "an empty config file was taken";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), "config file " + path + " is empty; leave out the config file to train with "
                                       "the defaults");
    }
  }
}

TEST(Config, FileThenOverridesParsedAsYaml) {
  const std::string path = write("a:\n  count: 7\n  flag: yes\nb:\n  sizes: [4, 5, 6]\nc:\n  deep:\n    level: 2\n");
  const Values v = load(schema(), path,
                        {"a.rate=0.25", "b.mode=slow", "b.sizes=[16,32,64]", "a.flag=false", "a.count=8", "a.count=9"});
  EXPECT_EQ(v.integer("a.count"), 9);  // the last override wins
  EXPECT_FALSE(v.boolean("a.flag"));
  EXPECT_DOUBLE_EQ(v.real("a.rate"), 0.25);
  EXPECT_EQ(v.string("b.mode"), "slow");
  EXPECT_EQ(v.int_list("b.sizes"), (List{16, 32, 64}));
  EXPECT_EQ(v.integer("c.deep.level"), 2);
  EXPECT_EQ(v.origin("c.deep.level"), path + ":8");
  EXPECT_EQ(v.origin("a.rate"), "command line");
  EXPECT_EQ(load(schema(), path, {}).origin("a.flag"), path + ":3");
  EXPECT_TRUE(load(schema(), path, {}).boolean("a.flag"));
}

TEST(Config, StringOverridesKeepTheTextAsWritten) {
  auto name = [](const std::string& arg) { return load(schema(), "", {arg}).string("b.name"); };
  EXPECT_EQ(name("b.name=hello world"), "hello world");
  EXPECT_EQ(name("b.name=a: b"), "a: b");  // would be a map as YAML
  EXPECT_EQ(name("b.name=[x]"), "[x]");    // would be a list
  EXPECT_EQ(name("b.name=: tricky"), ": tricky");  // not valid YAML at all
  EXPECT_EQ(name("b.name=\"quoted\""), "quoted");
  EXPECT_EQ(name("b.name=123"), "123");
  EXPECT_EQ(name("b.name="), "");
}

TEST(Config, YamlOutputIsNestedInSchemaOrder) {
  const Values v = load(schema(), "", {"b.name=runs/x", "a.rate=2"});
  EXPECT_EQ(to_yaml(schema(), v),
            "a:\n  count: 3\n  rate: 2.0\n  flag: false\n"
            "b:\n  name: runs/x\n  sizes: [1, 2]\n  mode: fast\n"
            "c:\n  deep:\n    level: 0\n");
}

TEST(Config, YamlRoundTripsTrickyValues) {
  for (const char* name : {"", "null", "~", "true", "123", ": tricky", "a #b", " lead", "it's", "two\nlines",
                           // control characters: yaml-cpp writes them unquoted, and a CR then reads
                           // back as a line break (fuzz/regressions/fuzz_train_config/init_from_backslash_cr)
                           "h\\\r", "a\rb", "\r", "tab\there", "\x01x", "del\x7f", "trail ", "back\\slash"}) {
    const Values v = load(schema(), "", {"a.rate=1e-3"});
    Values changed = v;
    changed.values["b.name"] = std::string(name);
    changed.values["a.rate"] = 0.1 + 0.2;  // needs all 17 digits
    changed.values["b.sizes"] = List{3, 4, 5};
    const std::string yaml = to_yaml(schema(), changed);
    EXPECT_EQ(load(schema(), write(yaml), {}).values, changed.values) << yaml;
  }
}

TEST(Config, UnknownKeysNameFileLineAndSuggest) {
  const std::string path = write("a:\n  count: 2\n  rat: 0.1\n");
  expect_mentions(error_of(path, {}), {"'a.rat'", path + ":3", "unknown key", "did you mean 'a.rate'"});
  expect_mentions(error_of("", {"a.rat=1"}), {"'a.rat'", "command line", "did you mean 'a.rate'"});
  expect_mentions(error_of(write("aa:\n  count: 2\n"), {}), {"'aa'", ":1", "did you mean 'a'"});  // a group
  const std::string far = error_of("", {"zzz.qqq=1"});
  expect_mentions(far, {"'zzz.qqq'", "unknown key"});
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(Config, WrongTypesNameKeyTypeValueAndPlace) {
  expect_mentions(error_of("", {"a.count=abc"}), {"'a.count'", "expected int", "'abc'", "command line"});
  expect_mentions(error_of("", {"a.count=1.5"}), {"'a.count'", "expected int", "'1.5'"});
  expect_mentions(error_of("", {"a.rate=fast"}), {"'a.rate'", "expected float", "'fast'"});
  expect_mentions(error_of("", {"a.flag=maybe"}), {"'a.flag'", "expected bool", "'maybe'"});
  expect_mentions(error_of("", {"b.sizes=5"}), {"'b.sizes'", "expected list of int", "'5'"});
  expect_mentions(error_of("", {"b.sizes=[1,x]"}), {"'b.sizes'", "expected list of int", "[1, x]"});
  expect_mentions(error_of("", {"b.mode=[fast]"}), {"'b.mode'", "expected one of fast|slow"});
  const std::string path = write("a:\n  count: 2\n  rate: [1, 2]\n");
  expect_mentions(error_of(path, {}), {"'a.rate'", path + ":3", "expected float", "[1, 2]"});
  const std::string map_for_key = write("b:\n  name: {first: 1}\n");  // a map where a value belongs
  expect_mentions(error_of(map_for_key, {}), {"'b.name'", map_for_key + ":2", "expected string", "first: 1"});
}

TEST(Config, ValuesOutOfRangeNameTheAllowedRange) {
  expect_mentions(error_of("", {"a.count=11"}), {"'a.count'", "'11'", "out of range", "[1, 10]"});
  expect_mentions(error_of("", {"a.count=0"}), {"'a.count'", "[1, 10]"});
  expect_mentions(error_of("", {"a.rate=-1"}), {"'a.rate'", ">= 0"});
  expect_mentions(error_of("", {"a.rate=.nan"}), {"'a.rate'", "not a number"});
  expect_mentions(error_of("", {"b.sizes=[1,0]"}), {"'b.sizes'", "out of range", ">= 1"});
  expect_mentions(error_of("", {"b.sizes=[]"}), {"'b.sizes'", "needs one size or more"});  // the check
  expect_mentions(error_of("", {"b.mode=medium"}), {"'b.mode'", "'medium'", "fast, slow"});
  const std::string path = write("\na:\n  count: 99\n");
  expect_mentions(error_of(path, {}), {"'a.count'", path + ":3", "[1, 10]"});
}

TEST(Config, MapsScalarsAndDuplicatesInTheWrongPlace) {
  const std::string scalar_for_group = write("a: 3\n");
  expect_mentions(error_of(scalar_for_group, {}), {"'a'", scalar_for_group + ":1", "needs a map", "'3'"});
  const std::string top_list = write("- 1\n- 2\n");
  expect_mentions(error_of(top_list, {}), {top_list + ":1", "map of keys at the top level"});
  const std::string twice = write("a:\n  count: 1\n  count: 2\n");
  expect_mentions(error_of(twice, {}), {"'a.count'", twice + ":3", "given twice", twice + ":2"});
  const std::string group_twice = write("a:\n  count: 1\nb:\n  name: y\na:\n  flag: true\n");
  expect_mentions(error_of(group_twice, {}), {"'a'", group_twice + ":5", "given twice", group_twice + ":1"});
}

TEST(Config, UnreadableAndMalformedFiles) {
  expect_mentions(error_of("/nonexistent/c.yaml", {}), {"/nonexistent/c.yaml", "No such file or directory"});
  const auto dir = test::make_temp_dir("cfgdir").string();
  expect_mentions(error_of(dir, {}), {dir, "Is a directory"});
  const std::string bad = write("a:\n  count: 2\n  rate: [1, 2\n");
  expect_mentions(error_of(bad, {}), {bad + ":4", "not valid YAML", "end of sequence"});
}

TEST(Config, MalformedOverrides) {
  expect_mentions(error_of("", {"novalue"}), {"'novalue'", "key=value"});
  expect_mentions(error_of("", {"=3"}), {"'=3'", "key=value"});
  expect_mentions(error_of("", {"a=3"}), {"'a'", "group", "a.count"});
  expect_mentions(error_of("", {"a.count=[1"}), {"'a.count'", "command line", "not a valid YAML value"});
}

TEST(Config, RejectNamesWhereTheValueCameFrom) {
  const std::string path = write("a:\n  count: 2\n");
  const Values v = load(schema(), path, {"a.rate=3"});
  auto message = [&](const std::string& key) {
    try {
      reject(v, key, "clashes");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  expect_mentions(message("a.count"), {"'a.count'", path + ":2", "clashes"});
  expect_mentions(message("a.rate"), {"'a.rate'", "command line"});
  expect_mentions(message("a.flag"), {"'a.flag'", "default"});
}

TEST(Config, MalformedSchemasAreBugsNotUsageErrors) {
  auto add_fails = [](auto&& build) {
    try {
      Schema s = schema();
      build(s);
    } catch (const UsageError&) {
      return false;
    } catch (const Error&) {
      return true;
    }
    return false;
  };
  EXPECT_TRUE(add_fails([](Schema& s) { s.add({.name = "a.count", .default_value = int64_t(1)}); }));
  EXPECT_TRUE(add_fails([](Schema& s) { s.add({.name = "a.more", .default_value = int64_t(1)}); }));  // a closed group
  EXPECT_TRUE(add_fails([](Schema& s) { s.add({.name = "a", .default_value = int64_t(1)}); }));  // a group already
  EXPECT_TRUE(add_fails([](Schema& s) { s.add({.name = "d.x", .kind = Kind::real, .default_value = int64_t(1)}); }));
  EXPECT_TRUE(add_fails([](Schema& s) { s.add({.name = "d.x", .default_value = int64_t(0), .min = 1}); }));
  EXPECT_TRUE(add_fails([](Schema& s) { s.add({.name = "d..x", .default_value = int64_t(0)}); }));
  EXPECT_FALSE(add_fails([](Schema& s) { s.add({.name = "d.x", .default_value = int64_t(1), .min = 1}); }));
}

TEST(Config, HelpListsEveryKeyWithTypeRangeDefaultAndHelp) {
  const Schema s = schema();
  const std::string h = help(s);
  for (const auto& k : s.keys()) {
    const size_t line = h.find("  " + k.name + " ");
    ASSERT_NE(line, std::string::npos) << k.name << "\n" << h;
    const std::string row = h.substr(line, h.find('\n', line) - line);
    expect_mentions(row, {type_name(k), "default " + to_text(k.default_value), k.help});
  }
  expect_mentions(h, {"int [1, 10]", "float >= 0", "list of int, each >= 1", "one of fast|slow"});
}

TEST(Config, MarkdownReferenceHasOneTablePerGroupAndARowPerKey) {
  const Schema s = schema();
  const std::string md = markdown_reference(s);
  for (const auto& k : s.keys()) {
    const size_t row = md.find("| `" + k.name + "` |");
    ASSERT_NE(row, std::string::npos) << k.name << "\n" << md;
    // A '|' inside a cell would split it: "one of fast|slow" must stay one cell.
    const std::string line = md.substr(row, md.find('\n', row) - row);
    EXPECT_EQ(std::count(line.begin(), line.end(), '|') - std::count(line.begin(), line.end(), '\\'), 5) << line;
  }
  size_t groups = 0;
  for (size_t at = md.find("### "); at != std::string::npos; at = md.find("### ", at + 1)) ++groups;
  std::set<std::string> expected;
  for (const auto& k : s.keys()) expected.insert(k.name.substr(0, k.name.rfind('.')));
  EXPECT_EQ(groups, expected.size()) << md;
  expect_mentions(md, {"one of fast\\|slow", "| key | type | default | meaning |"});
}

}  // namespace
}  // namespace cg::config
