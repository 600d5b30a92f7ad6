// Tests for the name rule (core::IsValidName) and core::QuoteName (issue #10, items 8 and 13):
// one grammar for topology nodes, job ids and the protocol's ids, and refused names shown
// without their control characters.
#include "crux/core/base/ids.h"

#include <gtest/gtest.h>

#include <string>

#include "crux/core/base/text.h"

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
    EXPECT_FALSE(IsValidName(bad)) << EscapeForTerminal(bad);
  }
  // The rule is usable at compile time (protocol tables, static checks).
  static_assert(IsValidName("host0/nic1"));
  static_assert(!IsValidName("host 0"));
  static_assert(IsNameChar(':') && !IsNameChar('>'));
}

TEST(IdsTest, QuoteNameEscapesAndCuts) {
  EXPECT_EQ(QuoteName("host0/nic1"), "'host0/nic1'");
  EXPECT_EQ(QuoteName("a\x1b[2J\x1b]0;owned\x07"), "'a\\x1b[2J\\x1b]0;owned\\x07'");
  EXPECT_EQ(QuoteName("a\nb"), "'a\\x0ab'");
  EXPECT_EQ(QuoteName(""), "''");
  EXPECT_EQ(QuoteName(std::string(64, 'n')), "'" + std::string(64, 'n') + "'");
  EXPECT_EQ(QuoteName(std::string(1000, 'n')), "'" + std::string(64, 'n') + "...'");
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (size_t i = 0; i < all.size(); i += 64) {
    EXPECT_TRUE(IsPrintableText(QuoteName(all.substr(i)))) << i;
  }
}

}  // namespace
}  // namespace crux::core
