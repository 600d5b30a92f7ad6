// The strict YAML reader (crux/textio/yaml.h): structure, positions, strictness, limits.
#include "crux/textio/yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "crux/core/base/text.h"

namespace crux::textio {
namespace {

using ::testing::HasSubstr;

YamlNode Parse(const std::string& text) {
  core::Result<YamlNode> r = ParseYaml(text);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : YamlNode();
}

std::string ErrorOf(const core::Status& s) {
  EXPECT_FALSE(s.ok());
  return s.message();
}

TEST(YamlTest, TreeKeepsOrderPositionsAndPlainness) {
  const YamlNode root = Parse("a: 1\nb: '2'\nc: [x, \"y\"]\nd:\n  e: ~\n");
  ASSERT_TRUE(root.IsMap());
  ASSERT_EQ(root.size(), 4u);
  EXPECT_EQ(root.key(0).scalar(), "a");
  EXPECT_EQ(root.key(3).scalar(), "d");
  EXPECT_TRUE(root.Get("a").plain());
  EXPECT_FALSE(root.Get("b").plain());
  EXPECT_EQ(root.Get("b").scalar(), "2");
  EXPECT_EQ(root.Get("b").line(), 2);
  EXPECT_EQ(root.Get("b").column(), 4);
  const YamlNode& c = root.Get("c");
  ASSERT_TRUE(c.IsSequence());
  ASSERT_EQ(c.size(), 2u);
  EXPECT_TRUE(c.item(0).plain());
  EXPECT_FALSE(c.item(1).plain());
  EXPECT_TRUE(root.Get("d").Get("e").IsNull());
  EXPECT_FALSE(root.Get("zz").IsDefined());
  EXPECT_FALSE(root.Get("a").Get("x").IsDefined());  // Not a map: missing, no throw.
}

TEST(YamlTest, EmptyDocumentsAreNull) {
  EXPECT_TRUE(Parse("").IsNull());
  EXPECT_TRUE(Parse("# only a comment\n").IsNull());
  EXPECT_TRUE(Parse("---\n").IsNull());
}

TEST(YamlTest, SyntaxErrorsCarryLineAndColumn) {
  core::Result<YamlNode> r = ParseYaml("a: 1\nb: [1, 2\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("invalid YAML: "));
  EXPECT_THAT(r.status().message(), HasSubstr("(line "));
  EXPECT_THAT(ErrorOf(ParseYaml("a: b: c\n").status()), HasSubstr("line 1, column"));
}

TEST(YamlTest, SecondDocumentIsRefused) {
  EXPECT_THAT(ErrorOf(ParseYaml("a: 1\n---\nb: 2\n").status()),
              HasSubstr("invalid YAML: a second document starts here (a file holds one "
                        "document) (line 2, column 1)"));
}

// Found by fuzz/scenario (reproducer fuzz/corpus/scenario/repro_loadall_hang.yaml): yaml-cpp
// 0.7's LoadAll never returned on this input (it reports empty documents forever), so every
// loader hung on it. ParseYaml now checks the document count on parser events, at most two.
TEST(YamlTest, InputThatMakesYamlCppReportEndlessDocumentsIsRefusedAtOnce) {
  const std::string text =
      "# a comment\n"
      "  , sized to the\n"
      "# another comment\n"
      "  seed: 1\n"
      "  horizon_s: 86400\n";
  const core::Result<YamlNode> r = ParseYaml(text);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("invalid YAML"));
}

TEST(YamlTest, AliasBombsAreRefused) {
  // Each level multiplies by 9: ten levels would be 3.5 billion nodes.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'j'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) bomb += std::string(i ? ", *" : "*") + prev;
    bomb += "]\n";
    prev = c;
  }
  EXPECT_THAT(ErrorOf(ParseYaml(bomb).status()), HasSubstr("expands to more than"));
  // A modest alias is fine.
  const YamlNode ok = Parse("base: &b {x: 1}\nuse: *b\n");
  EXPECT_EQ(ok.Get("use").Get("x").scalar(), "1");
}

TEST(YamlTest, DeepNestingIsRefused) {
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  EXPECT_THAT(ErrorOf(ParseYaml(deep).status()), HasSubstr("nested more than 256 levels deep"));
  const std::string deeper = std::string(100000, '[');  // yaml-cpp's own guard, no stack overflow.
  EXPECT_FALSE(ParseYaml(deeper).ok());
  YamlLimits tight;
  tight.max_depth = 2;
  EXPECT_FALSE(ParseYaml("a: {b: {c: 1}}", tight).ok());
  EXPECT_TRUE(ParseYaml("a: {b: 1}", tight).ok());
}

TEST(YamlTest, CheckMapRefusesUnknownDuplicateAndNonScalarKeys) {
  const YamlNode unknown = Parse("topology:\n  kind: clos2\n  torz: 4\n");
  EXPECT_EQ(ErrorOf(CheckMap(unknown.Get("topology"), "topology", {"kind", "tors", "aggs"})),
            "topology.torz: unknown key (allowed: kind, tors, aggs) (line 3, column 3)");
  const YamlNode dup = Parse("a: 1\nb: 2\na: 3\n");
  EXPECT_EQ(ErrorOf(CheckMap(dup, "", {"a", "b"})), "a: duplicate key (line 3, column 1)");
  const YamlNode complex = Parse("? [1, 2]\n: 3\n");
  EXPECT_THAT(ErrorOf(CheckMap(complex, "", {"a"})),
              HasSubstr("document: keys must be plain names (got a list)"));
  EXPECT_EQ(ErrorOf(CheckMap(Parse("[1]"), "", {"a"})),
            "document: must be a map (got a list) (line 1, column 1)");
  EXPECT_TRUE(CheckMap(Parse("a: 1"), "", {"a", "b"}).ok());
}

TEST(YamlTest, UnprintableKeysAreEscapedInMessages) {
  const YamlNode n = Parse("\"a\\e[2Jb\": 1\n");
  const std::string msg = ErrorOf(CheckMap(n, "", {"x"}));
  EXPECT_TRUE(core::IsPrintableText(msg)) << msg;
  EXPECT_THAT(msg, HasSubstr("a\\x1b[2Jb: unknown key"));
}

TEST(YamlTest, ScalarTypesAreStrict) {
  const YamlNode n = Parse(
      "int: 8\nquoted: '8'\nreal: 2.5\nhex: 0x10\nplus: +1\nnan: .nan\ninf: -.inf\n"
      "huge: 1e999\nbig: 99999999999999999999\nlist: [1]\nyes: yes\nTrue: True\nnone: ~\n"
      "s: hello\nblock: |\n  12\n");
  EXPECT_EQ(*AsInteger(n.Get("int"), "int"), 8);
  EXPECT_EQ(ErrorOf(AsInteger(n.Get("quoted"), "quoted").status()),
            "quoted: must be an integer (got '8') (line 2, column 9)");
  EXPECT_EQ(ErrorOf(AsInteger(n.Get("real"), "real").status()),
            "real: must be an integer (got 2.5) (line 3, column 7)");
  EXPECT_DOUBLE_EQ(*AsReal(n.Get("real"), "real"), 2.5);
  EXPECT_DOUBLE_EQ(*AsReal(n.Get("int"), "int"), 8);
  EXPECT_THAT(ErrorOf(AsInteger(n.Get("hex"), "hex").status()),
              HasSubstr("hex: must be an integer (got 0x10)"));
  EXPECT_THAT(ErrorOf(AsReal(n.Get("hex"), "hex").status()),
              HasSubstr("hex: must be a number (got 0x10)"));
  EXPECT_THAT(ErrorOf(AsInteger(n.Get("plus"), "plus").status()),
              HasSubstr("must be an integer (got +1)"));
  EXPECT_THAT(ErrorOf(AsReal(n.Get("nan"), "nan").status()),
              HasSubstr("nan: must be a finite number (got .nan)"));
  EXPECT_THAT(ErrorOf(AsReal(n.Get("inf"), "inf").status()),
              HasSubstr("inf: must be a finite number (got -.inf)"));
  EXPECT_THAT(ErrorOf(AsReal(n.Get("huge"), "huge").status()),
              HasSubstr("huge: number out of range (got 1e999)"));
  EXPECT_THAT(ErrorOf(AsInteger(n.Get("big"), "big").status()),
              HasSubstr("big: integer out of range (got 99999999999999999999)"));
  EXPECT_THAT(ErrorOf(AsReal(n.Get("list"), "list").status()),
              HasSubstr("list: must be a number (got a list)"));
  EXPECT_THAT(ErrorOf(AsBool(n.Get("yes"), "yes").status()),
              HasSubstr("yes: must be true or false (got yes)"));
  EXPECT_TRUE(*AsBool(n.Get("True"), "True"));
  EXPECT_THAT(ErrorOf(AsString(n.Get("none"), "none").status()),
              HasSubstr("none: must be a string (got null)"));
  EXPECT_EQ(*AsString(n.Get("s"), "s"), "hello");
  EXPECT_EQ(*AsString(n.Get("quoted"), "quoted"), "8");   // A quoted number is a string.
  EXPECT_FALSE(AsInteger(n.Get("block"), "block").ok());  // Block scalars are not plain.
}

TEST(YamlTest, RangesDescribeTheirBounds) {
  EXPECT_EQ(IntRange::Closed(1, 64).Describe(), "in [1, 64]");
  EXPECT_EQ(IntRange::AtLeast(1).Describe(), ">= 1");
  EXPECT_EQ(RealRange::Positive().Describe(), "> 0");
  EXPECT_EQ(RealRange::NonNegative().Describe(), ">= 0");
  EXPECT_EQ(RealRange::Closed(0, 1).Describe(), "in [0, 1]");
  EXPECT_EQ(RealRange::AboveAtMost(0, 1e9).Describe(), "> 0 and <= 1e+09");
  EXPECT_FALSE(RealRange::Positive().Contains(-0.0));
  EXPECT_TRUE(RealRange::NonNegative().Contains(-0.0));
  const YamlNode n = Parse("planner:\n  levels: 0\n  gbps: -1\n");
  EXPECT_EQ(ErrorOf(AsBoundedInteger(n.Get("planner").Get("levels"), "planner.levels",
                                     IntRange::Closed(1, 64))
                        .status()),
            "planner.levels: must be in [1, 64] (got 0) (line 2, column 11)");
  EXPECT_EQ(
      ErrorOf(AsBoundedReal(n.Get("planner").Get("gbps"), "planner.gbps", RealRange::Positive())
                  .status()),
      "planner.gbps: must be > 0 (got -1) (line 3, column 9)");
}

TEST(YamlTest, OptionalReadersLeaveAbsentKeysAlone) {
  const YamlNode n = Parse("a: 3000000000\nb: 5\nc: true\nd: x\ne: 0.5\n");
  int i = 7;
  EXPECT_TRUE(OptionalInteger(n, "", "zz", IntRange::AtLeast(1), &i).ok());
  EXPECT_EQ(i, 7);
  EXPECT_TRUE(OptionalInteger(n, "", "b", IntRange::AtLeast(1), &i).ok());
  EXPECT_EQ(i, 5);
  EXPECT_EQ(ErrorOf(OptionalInteger(n, "", "a", IntRange::AtLeast(1), &i)),
            "a: must be <= 2147483647 (got 3000000000) (line 1, column 4)");
  uint32_t u = 0;
  EXPECT_TRUE(OptionalInteger(n, "", "a", IntRange::AtLeast(0), &u).ok());
  EXPECT_EQ(u, 3000000000u);
  bool flag = false;
  EXPECT_TRUE(OptionalBool(n, "", "c", &flag).ok());
  EXPECT_TRUE(flag);
  std::string s;
  EXPECT_TRUE(OptionalString(n, "", "d", &s).ok());
  EXPECT_EQ(s, "x");
  double d = 0;
  EXPECT_TRUE(OptionalReal(n, "", "e", RealRange::Closed(0, 1), &d).ok());
  EXPECT_EQ(d, 0.5);
  EXPECT_EQ(ErrorOf(MissingKey(n, "top", "k")), "top.k: missing required key (line 1, column 1)");
}

TEST(YamlTest, PathsAndDescriptions) {
  EXPECT_EQ(ChildPath("", "a"), "a");
  EXPECT_EQ(ChildPath("a", "b"), "a.b");
  EXPECT_EQ(ElementPath("a.b", 3), "a.b[3]");
  EXPECT_EQ(Describe(YamlNode()), "nothing");
  EXPECT_EQ(ErrorOf(ErrorAt(YamlNode(), "", "bad")), "document: bad");
}

}  // namespace
}  // namespace crux::textio
