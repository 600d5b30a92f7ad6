// The one CSV dialect (crux/textio/csv.h): BOM, CRLF, comments, blank lines, trimming, header
// and field-count errors with line numbers, field errors with line, column and name.
#include "crux/textio/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "crux/core/base/text.h"

namespace crux::textio {
namespace {

constexpr std::string_view kColumns[] = {"time_s", "a", "b", "gbps"};

core::Result<std::vector<CsvRow>> Read(std::string_view text) { return ReadCsv(text, kColumns); }

TEST(CsvTest, ReadsRowsWithLineNumbers) {
  const std::string text =
      "\xEF\xBB\xBF# a comment\r\ntime_s,a,b,gbps\r\n\r\n3600, tor3 ,agg1,0\r\n  # indented "
      "comment\n\t\n5400,tor3,agg1,400";  // No final newline.
  auto rows = Read(text);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].line, 4);
  EXPECT_EQ((*rows)[0].fields[1], "tor3");  // Trimmed.
  EXPECT_EQ((*rows)[0].fields[3], "0");
  EXPECT_EQ((*rows)[1].line, 7);
  EXPECT_EQ((*rows)[1].fields[3], "400");
}

TEST(CsvTest, EmptyFieldsAreKept) {
  auto rows = Read("time_s,a,b,gbps\n1,,b,\n");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].fields[1], "");
  EXPECT_EQ((*rows)[0].fields[3], "");
}

TEST(CsvTest, HeaderErrors) {
  EXPECT_EQ(Read("").status().message(), "line 1: missing the header 'time_s,a,b,gbps'");
  EXPECT_EQ(Read("# only comments\n\n").status().message(),
            "line 1: missing the header 'time_s,a,b,gbps'");
  EXPECT_EQ(Read("\n# c\nt,a,b\n").status().message(),
            "line 3: expected the header 'time_s,a,b,gbps' (got 't,a,b')");
  EXPECT_EQ(Read("time_s,b,a,gbps\n").status().message(),
            "line 1: expected the header 'time_s,a,b,gbps' (got 'time_s,b,a,gbps')");
  // Only the header: no rows, no error.
  auto none = Read("time_s,a,b,gbps\n");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(CsvTest, FieldCountErrorsNameTheLine) {
  EXPECT_EQ(Read("time_s,a,b,gbps\n1,a,b,0\n1,a,b\n").status().message(),
            "line 3: expected 4 comma-separated fields (got 3)");
  EXPECT_EQ(Read("time_s,a,b,gbps\n1,a,b,0,9\n").status().message(),
            "line 2: expected 4 comma-separated fields (got 5)");
  // Quotes are not special: a quoted comma still separates.
  EXPECT_EQ(Read("time_s,a,b,gbps\n1,\"a,b\",c,0\n").status().message(),
            "line 2: expected 4 comma-separated fields (got 5)");
}

TEST(CsvTest, FieldErrorsNameLineColumnAndField) {
  auto rows = Read("time_s,a,b,gbps\n\n1,tor9,agg0,0\n");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(CsvFieldError((*rows)[0], 1, kColumns, "unknown node 'tor9'").message(),
            "line 3, column 2 (a): unknown node 'tor9'");
}

TEST(CsvTest, UnprintableTextInMessagesIsEscaped) {
  const core::Status s = Read("time\x1b[2J,a,b,gbps\n").status();
  EXPECT_TRUE(core::IsPrintableText(s.message())) << s.message();
  EXPECT_THAT(s.message(), ::testing::HasSubstr("\\x1b[2J"));
}

TEST(CsvTest, HeaderText) { EXPECT_EQ(CsvHeader(kColumns), "time_s,a,b,gbps"); }

}  // namespace
}  // namespace crux::textio
