#include "crux/core/base/text.h"

#include <gtest/gtest.h>

#include <string_view>

namespace crux::core {
namespace {

TEST(TextTest, PrintableTextIsAcceptedIncludingUtf8) {
  EXPECT_TRUE(IsPrintableText(""));
  EXPECT_TRUE(IsPrintableText("llama-3 70B (bf16) / 8x H100"));
  EXPECT_TRUE(IsPrintableText("mod\xc3\xa8le \xe6\xa8\xa1\xe5\x9e\x8b \xf0\x9f\x9a\x80"));
}

TEST(TextTest, ControlCharactersOverridesAndBadUtf8AreFound) {
  EXPECT_EQ(FirstUnprintable("ok\x1b]0;pwned\x07"), 2u);
  EXPECT_EQ(FirstUnprintable("a\nb"), 1u);
  EXPECT_EQ(FirstUnprintable("tab\there"), 3u);
  EXPECT_EQ(FirstUnprintable("del\x7f"), 3u);
  EXPECT_EQ(FirstUnprintable("c1\xc2\x9b"), 2u);                   // U+009B CSI.
  EXPECT_EQ(FirstUnprintable("bidi\xe2\x80\xae"), 4u);             // U+202E RLO.
  EXPECT_EQ(FirstUnprintable("iso\xe2\x81\xa6"), 3u);              // U+2066 LRI.
  EXPECT_EQ(FirstUnprintable("x\xff"), 1u);                        // Not UTF-8.
  EXPECT_EQ(FirstUnprintable("over\xc0\xaf"), 4u);                 // Overlong '/'.
  EXPECT_EQ(FirstUnprintable("sur\xed\xa0\x80"), 3u);              // Surrogate.
  EXPECT_EQ(FirstUnprintable("cut\xe6\xa8"), 3u);                  // Truncated.
  EXPECT_EQ(FirstUnprintable(std::string_view("nul\0x", 5)), 3u);  // NUL.
}

TEST(TextTest, EscapingNeutralisesTerminalSequences) {
  const std::string attack = "bert\x1b]0;owned\x07\x1b[2J\nforged row";
  const std::string shown = EscapeForTerminal(attack);
  EXPECT_EQ(shown, "bert\\x1b]0;owned\\x07\\x1b[2J\\x0aforged row");
  EXPECT_TRUE(IsPrintableText(shown));
  EXPECT_EQ(EscapeForTerminal("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapeForTerminal("\xe6\xa8\xa1"), "\xe6\xa8\xa1");
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b"), "\\xc2\\x9b");
  EXPECT_EQ(EscapeForTerminal("\xff"), "\\xff");
}

TEST(TextTest, TrimDropsSpacesAndTabsAtEitherEndOnly) {
  EXPECT_EQ(Trim(" \t a b \t "), "a b");
  EXPECT_EQ(Trim("a"), "a");
  EXPECT_EQ(Trim(" \t "), "");
  EXPECT_EQ(Trim(""), "");
  // Line endings and other control characters are the caller's (a CRLF reader drops the '\r').
  EXPECT_EQ(Trim(" a\r"), "a\r");
  EXPECT_EQ(Trim("\na "), "\na");
  const std::string_view text = "  x  ";
  EXPECT_EQ(Trim(text).data(), text.data() + 2);  // A view into the text, no copy.
}

}  // namespace
}  // namespace crux::core
