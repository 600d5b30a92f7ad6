// The trace CSV: parsing (good and every kind of bad line, with line/column errors), writing,
// and the round trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "crux/core/base/text.h"
#include "crux/sim/workload/trace.h"

namespace crux::sim::workload {
namespace {

using ::testing::HasSubstr;

const std::string kHeader = std::string(kTraceHeader) + "\n";

TEST(TraceTest, ParsesEveryFieldCommentsAndCrlf) {
  const std::string text = "# a comment\r\n" + std::string(kTraceHeader) +
                           "\r\n"
                           "a,0,3600,,16,host0;host1,bert_large\r\n"
                           "\n"
                           "# another\n"
                           "b, 12.5 ,,100,8,,resnet50\n"
                           "c,7,,,1,,dlrm";  // No final newline; runs to the horizon.
  core::Result<std::vector<TraceJob>> r = ParseTraceCsv(text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  const TraceJob& a = (*r)[0];
  EXPECT_EQ(a.id, "a");
  EXPECT_EQ(a.arrival_s, 0);
  ASSERT_TRUE(a.duration_s.has_value());
  EXPECT_EQ(*a.duration_s, 3600);
  EXPECT_FALSE(a.iterations.has_value());
  EXPECT_EQ(a.gpus, 16);
  EXPECT_EQ(a.placement, (std::vector<std::string>{"host0", "host1"}));
  EXPECT_EQ(a.model, "bert_large");
  EXPECT_EQ(a.line, 3);
  const TraceJob& b = (*r)[1];
  EXPECT_EQ(b.arrival_s, 12.5);
  EXPECT_FALSE(b.duration_s.has_value());
  EXPECT_EQ(b.iterations, 100);
  EXPECT_TRUE(b.placement.empty());
  EXPECT_EQ(b.line, 6);
  EXPECT_FALSE((*r)[2].duration_s.has_value());
  EXPECT_FALSE((*r)[2].iterations.has_value());
}

TEST(TraceTest, HeaderOnlyIsAnEmptyTrace) {
  core::Result<std::vector<TraceJob>> r = ParseTraceCsv(kHeader);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST(TraceTest, WritesWhatItReads) {
  std::vector<TraceJob> jobs(3);
  jobs[0].id = "x";
  jobs[0].arrival_s = 0.1 + 0.2;  // Not exactly representable in short decimal.
  jobs[0].duration_s = 1e-3;
  jobs[0].gpus = 16;
  jobs[0].placement = {"host3", "host4"};
  jobs[0].model = "m";
  jobs[1].id = "y";
  jobs[1].arrival_s = 1209600;
  jobs[1].iterations = 7;
  jobs[1].gpus = 1;
  jobs[1].model = "n";
  jobs[2].id = "z";
  jobs[2].arrival_s = 5;
  jobs[2].gpus = 512;
  jobs[2].model = "n";
  const std::string text = FormatTraceCsv(jobs);
  EXPECT_EQ(text.substr(0, kHeader.size()), kHeader);
  core::Result<std::vector<TraceJob>> back = ParseTraceCsv(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*back)[i].id, jobs[i].id);
    EXPECT_EQ((*back)[i].arrival_s, jobs[i].arrival_s);  // Bit-exact.
    EXPECT_EQ((*back)[i].duration_s, jobs[i].duration_s);
    EXPECT_EQ((*back)[i].iterations, jobs[i].iterations);
    EXPECT_EQ((*back)[i].gpus, jobs[i].gpus);
    EXPECT_EQ((*back)[i].placement, jobs[i].placement);
    EXPECT_EQ((*back)[i].model, jobs[i].model);
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "crux_trace_roundtrip_test.csv").string();
  ASSERT_TRUE(WriteTraceFile(path, jobs).ok());
  core::Result<std::vector<TraceJob>> loaded = LoadTraceFile(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->size(), 3u);
  std::filesystem::remove(path);
}

TEST(TraceTest, RejectsEveryKindOfBadLineWithLineAndColumn) {
  struct Case {
    std::string row;
    std::string error;
  };
  const Case cases[] = {
      {"a,0,10,,8", "line 3: expected 7 comma-separated fields (got 5)"},
      {"a,0,10,,8,,m,extra", "line 3: expected 7 comma-separated fields (got 8)"},
      {",0,10,,8,,m", "line 3, column 1 (job_id): must not be empty"},
      {"first,0,10,,8,,m", "line 3, column 1 (job_id): duplicate job id 'first'"},
      {"a,-1,10,,8,,m",
       "line 3, column 2 (arrival_s): must be a finite number >= 0 and <= 1e+09 (got '-1')"},
      {"a,nan,10,,8,,m", "line 3, column 2 (arrival_s)"},
      {"a,inf,10,,8,,m", "line 3, column 2 (arrival_s)"},
      {"a,,10,,8,,m", "line 3, column 2 (arrival_s)"},
      {"a,1h,10,,8,,m",
       "line 3, column 2 (arrival_s): must be a finite number >= 0 and <= 1e+09 (got '1h')"},
      // Issue #10, item 7: times beyond the simulator's range.
      {"a,2e9,10,,8,,m", "line 3, column 2 (arrival_s): must be a finite number >= 0 and <= 1e+09"},
      {"a,0,1e10,,8,,m", "line 3, column 3 (duration_s): must be a finite number > 0 and <= 1e+09"},
      // Issue #10, item 13: ids, host names and model names follow the name rule (core/ids.h),
      // so no control characters, escape sequences, spaces or non-ASCII bytes, at most 128.
      {"a\x1b[31m,0,10,,8,,m",
       "line 3, column 1 (job_id): must be 1-128 characters of [A-Za-z0-9._:/-] (got "
       "'a\\x1b[31m')"},
      {"a\x07"
       "b,0,10,,8,,m",
       "line 3, column 1 (job_id): must be 1-128 characters of [A-Za-z0-9._:/-] (got 'a\\x07b')"},
      {"a\xe2\x80\xae"
       "b,0,10,,8,,m",
       "line 3, column 1 (job_id): must be 1-128 characters of [A-Za-z0-9._:/-]"},
      {"a\xff,0,10,,8,,m", "line 3, column 1 (job_id): must be 1-128 characters"},
      {"a b,0,10,,8,,m",
       "line 3, column 1 (job_id): must be 1-128 characters of "
       "[A-Za-z0-9._:/-] (got 'a b')"},
      {std::string(129, 'j') + ",0,10,,8,,m",
       "line 3, column 1 (job_id): is too long (129 bytes; a name is 1-128 characters"},
      {"a,0,10,,8,host0;ho\x1bst1,m",
       "line 3, column 6 (placement): host name must be 1-128 characters of [A-Za-z0-9._:/-]"},
      {"a,0,10,,8,host0;" + std::string(200, 'h') + ",m",
       "line 3, column 6 (placement): host name is too long (200 bytes;"},
      {"a,0,10,,8,,m\x1b]0;title\x07",
       "line 3, column 7 (model): must be 1-128 characters of [A-Za-z0-9._:/-]"},
      {"a,0\x1b,10,,8,,m",
       "line 3, column 2 (arrival_s): must be a finite number >= 0 and <= "
       "1e+09 (got '0\\x1b')"},
      {"a,0,0,,8,,m", "line 3, column 3 (duration_s): must be a finite number > 0"},
      {"a,0,x,,8,,m", "line 3, column 3 (duration_s)"},
      {"a,0,,0,8,,m", "line 3, column 4 (iterations): must be an integer >= 1"},
      {"a,0,,1.5,8,,m", "line 3, column 4 (iterations)"},
      {"a,0,10,5,8,,m", "line 3, column 4 (iterations): give duration_s or iterations, not both"},
      {"a,0,10,,0,,m", "line 3, column 5 (gpus): must be an integer in [1, 2^24] (got '0')"},
      {"a,0,10,,eight,,m", "line 3, column 5 (gpus)"},
      {"a,0,10,,8,host0;;host1,m", "line 3, column 6 (placement): empty host name"},
      {"a,0,10,,8,host0;host0,m", "line 3, column 6 (placement): duplicate host 'host0'"},
      {"a,0,10,,8,host0;host1;host2,m",
       "line 3, column 6 (placement): 3 hosts do not divide 8 GPUs evenly"},
      {"a,0,10,,8,,", "line 3, column 7 (model): must not be empty"},
  };
  for (const Case& c : cases) {
    const std::string text = kHeader + "first,0,10,,8,,m\n" + c.row + "\n";
    core::Result<std::vector<TraceJob>> r = ParseTraceCsv(text);
    ASSERT_FALSE(r.ok()) << "accepted: " << c.row;
    EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.row;
    // No control character of the input reaches the message (and so the terminal).
    EXPECT_TRUE(core::IsPrintableText(r.status().message())) << r.status().message();
  }
  EXPECT_THAT(ParseTraceCsv("").status().message(), HasSubstr("missing the header"));
  EXPECT_THAT(ParseTraceCsv("id,arrival\nx,1\n").status().message(),
              HasSubstr("line 1: expected the header"));
  EXPECT_THAT(LoadTraceFile("/nonexistent/t.csv").status().message(),
              HasSubstr("/nonexistent/t.csv: cannot open"));
}

}  // namespace
}  // namespace crux::sim::workload
