// YAML output (crux/textio/yaml_writer.h, YAML::Emitter): every string survives the trip
// through the emitter and back through the strict reader, as a string.
#include "crux/textio/yaml_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "crux/textio/yaml.h"

namespace crux::textio {
namespace {

using ::testing::HasSubstr;

TEST(YamlWriterTest, StringsRoundTripAsStrings) {
  const std::string strings[] = {
      "plain",
      "",
      "with \"double\" and 'single' quotes",
      "back\\slash",
      "key: value",
      "a: b: c",
      "line one\nline two",
      "trailing newline\n",
      "  leading spaces",
      "trailing spaces  ",
      "# not a comment",
      "value # with hash",
      "- dash",
      "[not, a, list]",
      "{not: a map}",
      "&anchor",
      "*alias",
      "!tag",
      "%directive",
      "@reserved",
      "`backtick",
      "true",
      "False",
      "null",
      "~",
      "8",
      "0x10",
      "1e3",
      ".nan",
      "tab\there",
      "bell\x07",
      "esc\x1b[2J",
      "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80 \xE4\xB8\xAD\xE6\x96\x87",  // café € 🚀 中文
      "rtl \xE2\x80\xAE override",
      "---",
      "...",
  };
  YamlWriter w;
  w.BeginMap();
  for (size_t i = 0; i < std::size(strings); ++i) w.Key("k" + std::to_string(i)).String(strings[i]);
  w.Key("list").BeginList(YamlWriter::kFlow);
  for (const std::string& s : strings) w.String(s);
  w.EndList();
  w.EndMap();
  const std::string text = w.Finish();
  auto root = ParseYaml(text);
  ASSERT_TRUE(root.ok()) << root.status().ToString() << "\n" << text;
  for (size_t i = 0; i < std::size(strings); ++i) {
    const YamlNode& n = root->Get("k" + std::to_string(i));
    ASSERT_TRUE(n.IsScalar()) << i << "\n" << text;
    EXPECT_EQ(n.scalar(), strings[i]) << i << "\n" << text;
    EXPECT_FALSE(n.plain()) << "a string must never read as a number or boolean: " << strings[i];
    auto s = AsString(n, "k");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(*s, strings[i]);
  }
  const YamlNode& list = root->Get("list");
  ASSERT_EQ(list.size(), std::size(strings));
  for (size_t i = 0; i < std::size(strings); ++i) EXPECT_EQ(list.item(i).scalar(), strings[i]);
}

TEST(YamlWriterTest, NumbersAndBooleansArePlainAndExact) {
  YamlWriter w;
  w.BeginMap();
  w.Key("int").Integer(-42);
  w.Key("min").Integer(std::numeric_limits<int64_t>::min());
  w.Key("u").Unsigned(std::numeric_limits<uint64_t>::max());
  w.Key("real").Real(0.1);
  w.Key("big").Real(2.6e9);
  w.Key("tiny").Real(5e-324);
  w.Key("yes").Bool(true);
  w.Key("no").Bool(false);
  w.EndMap();
  auto root = ParseYaml(w.Finish());
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(*AsInteger(root->Get("int"), "int"), -42);
  EXPECT_EQ(*AsInteger(root->Get("min"), "min"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(root->Get("u").scalar(), "18446744073709551615");
  EXPECT_EQ(*AsReal(root->Get("real"), "real"), 0.1);
  EXPECT_EQ(*AsReal(root->Get("big"), "big"), 2.6e9);
  EXPECT_EQ(*AsReal(root->Get("tiny"), "tiny"), 5e-324);
  EXPECT_TRUE(*AsBool(root->Get("yes"), "yes"));
  EXPECT_FALSE(*AsBool(root->Get("no"), "no"));
}

TEST(YamlWriterTest, CommentsAndNesting) {
  YamlWriter w;
  w.Comment("source: /etc/cruxd.yaml\nforged: line");
  w.BeginMap();
  w.Key("debounce_ms").Integer(30).Comment("ms, live");
  w.Key("planner").BeginMap();
  w.Key("levels").Integer(8);
  w.EndMap();
  w.Key("pool").BeginList(YamlWriter::kFlow).Integer(1).Integer(2).EndList();
  w.Key("reserved").BeginList();
  w.BeginMap(YamlWriter::kFlow).Key("name").String("control").EndMap();
  w.EndList();
  w.EndMap();
  const std::string text = w.Finish();
  EXPECT_THAT(text, HasSubstr("# source: /etc/cruxd.yaml forged: line\n"));
  EXPECT_THAT(text, HasSubstr("debounce_ms: 30  # ms, live\n"));
  EXPECT_THAT(text, HasSubstr("planner:\n  levels: 8\n"));
  EXPECT_THAT(text, HasSubstr("pool: [1, 2]"));
  auto root = ParseYaml(text);
  ASSERT_TRUE(root.ok()) << text;
  EXPECT_EQ(root->Get("planner").Get("levels").scalar(), "8");
  EXPECT_EQ(root->Get("reserved").item(0).Get("name").scalar(), "control");
  EXPECT_EQ(text.back(), '\n');
}

TEST(YamlWriterTest, MisuseIsReportedNotThrown) {
  YamlWriter w;
  w.BeginMap();
  w.EndList();  // Wrong end.
  EXPECT_THAT(w.Finish(), HasSubstr("# YAML emitter error"));
}

}  // namespace
}  // namespace crux::textio
