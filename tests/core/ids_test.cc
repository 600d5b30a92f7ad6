// Tests for the name rule (core::IsValidName) and core::EscapeForDisplay (issue #10, items 8
// and 13): one grammar for topology nodes, job ids and the protocol's ids; escaping that keeps
// control characters off terminals.
#include "crux/core/ids.h"

#include <gtest/gtest.h>

#include <string>

namespace crux::core {
namespace {

TEST(IdsTest, NameRuleAcceptsGeneratedAndRealNames) {
  for (const char* ok :
       {"host0", "host12/nic1", "tor3", "agg0", "core7", "G6", "P10", "S14", "P10/S14", "gpt",
        "llama-7b", "llama_pp", "4242", "a.b:c/d-e_f", "-", "."}) {
    EXPECT_TRUE(IsValidName(ok)) << ok;
  }
  EXPECT_TRUE(IsValidName(std::string(kMaxNameLength, 'x')));
}

TEST(IdsTest, NameRuleRefusesEverythingElse) {
  EXPECT_FALSE(IsValidName(""));
  EXPECT_FALSE(IsValidName(std::string(kMaxNameLength + 1, 'x')));
  for (const std::string& bad :
       {std::string("a b"), std::string("a\tb"), std::string("a\nb"), std::string("a\x1b[2J"),
        std::string("a\x7f"), std::string("a\0b", 3), std::string("a->b"), std::string("a>b"),
        std::string("'a'"), std::string("\"a\""), std::string("a\\b"), std::string("a,b"),
        std::string("a;b"), std::string("caf\xc3\xa9"),
        std::string("a\xe2\x80\xae"
                    "b"),
        std::string("a\xc2\x9b")}) {
    EXPECT_FALSE(IsValidName(bad)) << EscapeForDisplay(bad);
  }
  // The rule is usable at compile time (protocol tables, static checks).
  static_assert(IsValidName("host0/nic1"));
  static_assert(!IsValidName("host 0"));
  static_assert(IsNameChar(':') && !IsNameChar('>'));
}

TEST(IdsTest, EscapeForDisplayMakesControlBytesVisible) {
  EXPECT_EQ(EscapeForDisplay("plain job-1/x"), "plain job-1/x");
  EXPECT_EQ(EscapeForDisplay("\x1b[2J\x1b]0;owned\x07"), "\\x1B[2J\\x1B]0;owned\\x07");
  EXPECT_EQ(EscapeForDisplay("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeForDisplay(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeForDisplay("\x7f"), "\\x7F");
  EXPECT_EQ(EscapeForDisplay("caf\xc3\xa9"), "caf\\xC3\\xA9");
  EXPECT_EQ(EscapeForDisplay("back\\slash"), "back\\slash");
  EXPECT_EQ(EscapeForDisplay("abcdef", 3), "abc...");
  EXPECT_EQ(EscapeForDisplay("abc", 3), "abc");
  EXPECT_EQ(EscapeForDisplay(""), "");
}

TEST(IdsTest, EscapeForDisplayIsPrintableAndIdempotent) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  const std::string once = EscapeForDisplay(all);
  for (char c : once) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
  EXPECT_EQ(EscapeForDisplay(once), once);
}

}  // namespace
}  // namespace crux::core
