// ReadTextFile / WriteTextFile and the path helpers (crux/textio/file.h): limits and errors.
#include "crux/textio/file.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace crux::textio {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("crux_textio_file_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(FileTest, ReadsAndWritesBytesUnchanged) {
  const std::string content = std::string("\xEF\xBB\xBFline1\r\nnul:") + '\0' + "end";
  ASSERT_TRUE(WriteTextFile(P("a.txt"), content).ok());
  auto back = ReadTextFile(P("a.txt"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, content);
  ASSERT_TRUE(WriteTextFile(P("empty"), "").ok());
  EXPECT_EQ(*ReadTextFile(P("empty")), "");
}

TEST_F(FileTest, MissingFileIsNotFoundNamingThePath) {
  auto r = ReadTextFile(P("absent.yaml"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), P("absent.yaml") + ": cannot open: No such file or directory");
  EXPECT_EQ(ReadTextFile(P("no/dir/x")).status().code(), core::StatusCode::kNotFound);
}

TEST_F(FileTest, SizeLimitIsEnforcedBeforeReading) {
  ASSERT_TRUE(WriteTextFile(P("big"), std::string(1000, 'x')).ok());
  EXPECT_TRUE(ReadTextFile(P("big"), 1000).ok());
  auto r = ReadTextFile(P("big"), 999);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), P("big") + ": too large (1000 bytes; at most 999)");
  EXPECT_EQ(kDefaultMaxFileBytes, size_t{64} << 20);
}

TEST_F(FileTest, NonRegularFilesAreRefused) {
  EXPECT_EQ(ReadTextFile(dir_.string()).status().message(),
            dir_.string() + ": not a regular file (a directory)");
  // A FIFO with no writer: refused at once, not waited on.
  ASSERT_EQ(::mkfifo(P("fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadTextFile(P("fifo")).status().message(),
            P("fifo") + ": not a regular file (a FIFO, socket or device)");
  EXPECT_THAT(ReadTextFile("/dev/null").status().message(), HasSubstr("not a regular file"));
}

TEST_F(FileTest, UnreadableFileSaysWhy) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores permission bits";
  ASSERT_TRUE(WriteTextFile(P("secret"), "x").ok());
  fs::permissions(P("secret"), fs::perms::none);
  auto r = ReadTextFile(P("secret"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), P("secret") + ": cannot open: Permission denied");
}

TEST_F(FileTest, WriteErrorsNameThePath) {
  core::Status s = WriteTextFile(P("no/such/dir/x"), "y");
  EXPECT_THAT(s.message(), HasSubstr(P("no/such/dir/x") + ": cannot create"));
}

TEST(PathTest, DirectoryAndResolve) {
  EXPECT_EQ(DirectoryOf("a/b.yaml"), "a");
  EXPECT_EQ(DirectoryOf("b.yaml"), "");
  EXPECT_EQ(DirectoryOf("/etc/cruxd.yaml"), "/etc");
  EXPECT_EQ(ResolvePath("", "x.csv"), "x.csv");
  EXPECT_EQ(ResolvePath("cfg", "x.csv"), "cfg/x.csv");
  EXPECT_EQ(ResolvePath("cfg/scenarios", "../models.yaml"), "cfg/models.yaml");
  EXPECT_EQ(ResolvePath("cfg", "/abs/x.csv"), "/abs/x.csv");
  EXPECT_EQ(ResolvePath("", "./a/../b"), "b");
  EXPECT_FALSE(IsRegularFile("/nonexistent/x"));
  EXPECT_FALSE(IsRegularFile("/tmp"));
}

}  // namespace
}  // namespace crux::textio
