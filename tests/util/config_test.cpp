// The config machinery on a small schema: types, defaults, YAML files, overrides, and errors that
// name the key and where it came from.
#include <gtest/gtest.h>

#include <fstream>

#include "support/paths.h"
#include "util/check.h"
#include "util/config.h"

namespace cg::config {
namespace {

Schema schema() {
  Schema s;
  s.add({"a.count", Kind::integer, int64_t(3), "a count", {}, 1.0, 10.0});
  s.add({"a.rate", Kind::real, 0.5, "a rate", {}, 0.0, std::nullopt});
  s.add({"a.flag", Kind::boolean, false, "a flag"});
  s.add({"b.name", Kind::string, std::string("x"), "a name"});
  s.add({"b.sizes", Kind::int_list, std::vector<int64_t>{1, 2}, "sizes", {}, 1.0, std::nullopt});
  s.add({"b.mode", Kind::choice, std::string("fast"), "mode", {"fast", "slow"}});
  return s;
}

std::string write(const std::string& text) {
  const auto path = test::make_temp_dir("cfg") / "c.yaml";
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    load(schema(), path, overrides);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsFileAndOverrides) {
  const std::string path = write("a:\n  count: 7\n  flag: yes\nb:\n  sizes: [4, 5, 6]\n");
  Values v = load(schema(), path, {"a.rate=0.25", "b.mode=slow", "b.sizes=[9]", "b.name=hello world"});
  EXPECT_EQ(v.integer("a.count"), 7);
  EXPECT_TRUE(v.boolean("a.flag"));
  EXPECT_DOUBLE_EQ(v.real("a.rate"), 0.25);
  EXPECT_EQ(v.string("b.mode"), "slow");
  EXPECT_EQ(v.int_list("b.sizes"), (std::vector<int64_t>{9}));
  EXPECT_EQ(v.string("b.name"), "hello world");
  EXPECT_EQ(v.origin("a.count"), path + ":2");
  EXPECT_EQ(v.origin("a.rate"), "command line");
  EXPECT_EQ(v.origin("b.name"), "command line");
  Values d = load(schema(), "", {});
  EXPECT_EQ(d.integer("a.count"), 3);
  EXPECT_EQ(d.origin("a.count"), "default");
}

TEST(Config, YamlRoundTrip) {
  Values v = load(schema(), "", {"a.rate=1e-3", "b.name=: tricky", "b.sizes=[3,4]"});
  const std::string yaml = to_yaml(schema(), v);
  Values again = load(schema(), write(yaml), {});
  EXPECT_EQ(again.values, v.values) << yaml;
}

TEST(Config, UnknownKeysNameFileLineAndSuggest) {
  const std::string path = write("a:\n  count: 2\n  rat: 0.1\n");
  const std::string err = error_of(path, {});
  EXPECT_NE(err.find("a.rat"), std::string::npos) << err;
  EXPECT_NE(err.find(path + ":3"), std::string::npos) << err;
  EXPECT_NE(err.find("a.rate"), std::string::npos) << err;  // the suggestion
  EXPECT_NE(error_of("", {"zzz.qqq=1"}).find("zzz.qqq"), std::string::npos);
  EXPECT_NE(error_of(write("c:\n  x: 1\n"), {}).find("c"), std::string::npos);
}

TEST(Config, WrongTypesAndRanges) {
  EXPECT_NE(error_of("", {"a.count=abc"}).find("expected int"), std::string::npos);
  EXPECT_NE(error_of("", {"a.count=1.5"}).find("a.count"), std::string::npos);
  EXPECT_NE(error_of("", {"a.count=11"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of("", {"a.rate=-1"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of("", {"a.flag=maybe"}).find("a.flag"), std::string::npos);
  EXPECT_NE(error_of("", {"b.sizes=5"}).find("list of int"), std::string::npos);
  EXPECT_NE(error_of("", {"b.sizes=[1,0]"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of("", {"b.mode=medium"}).find("fast, slow"), std::string::npos);
  const std::string path = write("a:\n  count: [1, 2]\n");
  const std::string err = error_of(path, {});
  EXPECT_NE(err.find(path + ":2"), std::string::npos) << err;
}

TEST(Config, MalformedInput) {
  EXPECT_NE(error_of("", {"novalue"}).find("key=value"), std::string::npos);
  EXPECT_NE(error_of("/nonexistent/c.yaml", {}).find("/nonexistent/c.yaml"), std::string::npos);
  const std::string bad = write("a:\n  count: [1, 2\n");
  EXPECT_NE(error_of(bad, {}).find("not valid YAML"), std::string::npos);
  EXPECT_NE(error_of(write("a: 3\n"), {}).find("map"), std::string::npos);
  EXPECT_NE(error_of(write("- 1\n- 2\n"), {}).find("map"), std::string::npos);
}

TEST(Config, HelpListsEveryKeyWithTypeAndDefault) {
  const Schema s = schema();
  const std::string h = help(s);
  for (const auto& k : s.keys()) EXPECT_NE(h.find(k.name), std::string::npos) << k.name;
  EXPECT_NE(h.find("one of fast|slow"), std::string::npos);
}

}  // namespace
}  // namespace cg::config
