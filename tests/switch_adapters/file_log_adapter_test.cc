#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crux/core/control/qos.h"
#include "crux/core/topology/topology.h"
#include "crux/switch_adapters/file_adapter.h"
#include "crux/switch_adapters/log_adapter.h"
#include "crux/switch_adapters/state_json.h"

namespace crux::switch_adapters {
namespace {

using core::QosConfig;
using core::SwitchQosState;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

SwitchQosState MakeState(const std::string& name, int level) {
  core::Topology topo;
  core::NodeId sw = *topo.AddNode(name, core::NodeKind::kTor);
  std::vector<core::QosJob> jobs = {{"train", 10, level, {sw}}};
  return core::ComputeDesiredQos(QosConfig{}, topo, jobs)->at(name);
}

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "crux-file-XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> Entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- JSON form ----

TEST(StateJsonTest, RoundTripsAndNamesBadFields) {
  SwitchQosState s = MakeState("tor0", 1);
  auto back = StateFromJson(StateToJson(s), "x.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  EXPECT_THAT(StateToJson(s), HasSubstr("\"type\": \"STRICT\""));

  EXPECT_THAT(StateFromJson("{", "x.json").status().message(), HasSubstr("x.json: not valid JSON"));
  EXPECT_THAT(StateFromJson(R"({"switch":"a","extra":1})", "x.json").status().message(),
              HasSubstr("unknown key 'extra'"));
  EXPECT_THAT(
      StateFromJson(R"({"switch":"a","dscp_to_tc":{"ten":1}})", "x.json").status().message(),
      HasSubstr("dscp_to_tc: key 'ten'"));
  EXPECT_THAT(StateFromJson(R"({"switch":"a","schedulers":[{"queue":1,"type":"WRR"}]})", "x.json")
                  .status()
                  .message(),
              HasSubstr("schedulers[0].type"));
  EXPECT_THAT(StateFromJson(R"({"switch":"a","schedulers":[{"queue":1,"type":"DWRR"}]})", "x.json")
                  .status()
                  .message(),
              HasSubstr("x.json: schedulers[0].weight: 0 out of range 1..100"));
}

TEST(StateJsonTest, DescribesDifferences) {
  SwitchQosState a = MakeState("tor0", 0);
  SwitchQosState b = MakeState("tor0", 2);
  EXPECT_THAT(DescribeDifferences(a, b), ElementsAre("dscp_to_tc[10]: 5 -> 3"));
  b.schedulers.pop_back();
  b.pfc_enable = {3};
  EXPECT_THAT(DescribeDifferences(a, b),
              ElementsAre("dscp_to_tc[10]: 5 -> 3", "schedulers[q6]: removed",
                          "pfc_enable: [2,3,4,5] -> [3]"));
  EXPECT_TRUE(DescribeDifferences(a, a).empty());
}

// ---- File backend ----

TEST(FileAdapterTest, WritesAtomicallyAndIdempotently) {
  TempDir dir;
  auto adapter = FileAdapter::Create({dir.path(), "tor0"});
  ASSERT_TRUE(adapter.ok()) << adapter.status().ToString();
  FileAdapter& a = **adapter;
  ASSERT_TRUE(a.Health().ok());
  EXPECT_EQ(a.ReadBack().status().code(), core::StatusCode::kNotFound);

  const SwitchQosState first = MakeState("tor0", 0);
  auto r = a.Apply(first);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->writes, 1);
  EXPECT_THAT(r->operations, ElementsAre("write " + dir.path() + "/tor0.json"));
  EXPECT_EQ(ReadAll(a.path()), StateToJson(first));
  EXPECT_THAT(dir.Entries(), ElementsAre("tor0.json"));  // No temporary left behind.
  struct stat st1 {};
  ASSERT_EQ(::stat(a.path().c_str(), &st1), 0);
  EXPECT_EQ(st1.st_mode & 0777, 0644u);

  // Same state again: nothing written (same inode, same content).
  auto again = a.Apply(first);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->writes, 0);
  struct stat st2 {};
  ASSERT_EQ(::stat(a.path().c_str(), &st2), 0);
  EXPECT_EQ(st1.st_ino, st2.st_ino);

  // A reader that opened the old file keeps seeing the complete old content; the path shows the
  // complete new one (replace by rename, never an in-place rewrite).
  const int old_fd = ::open(a.path().c_str(), O_RDONLY);
  ASSERT_GE(old_fd, 0);
  const SwitchQosState second = MakeState("tor0", 3);
  ASSERT_TRUE(a.Apply(second).ok());
  std::string old_content;
  char buf[4096];
  for (ssize_t n; (n = ::read(old_fd, buf, sizeof buf)) > 0;) old_content.append(buf, n);
  ::close(old_fd);
  EXPECT_EQ(old_content, StateToJson(first));
  EXPECT_EQ(ReadAll(a.path()), StateToJson(second));
  struct stat st3 {};
  ASSERT_EQ(::stat(a.path().c_str(), &st3), 0);
  EXPECT_NE(st1.st_ino, st3.st_ino);
  auto back = a.ReadBack();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, second);
  EXPECT_THAT(dir.Entries(), ElementsAre("tor0.json"));
}

TEST(FileAdapterTest, ErrorsAreClear) {
  TempDir dir;
  EXPECT_THAT(FileAdapter::Create({dir.path() + "/nope", "tor0"}).status().message(),
              HasSubstr("file.directory"));
  EXPECT_THAT(FileAdapter::Create({dir.path(), "../etc/x"}).status().message(),
              HasSubstr("file.switch_name"));
  auto a = std::move(FileAdapter::Create({dir.path(), "tor0"})).value();
  auto wrong = a->Apply(MakeState("tor1", 0));
  EXPECT_EQ(wrong.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("'tor1'"));
  std::ofstream(a->path()) << "{\"switch\": \"tor0\", \"dscp_to_tc\": {\"1\": 9}}";
  auto bad = a->ReadBack();
  EXPECT_EQ(bad.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("tor0.json: dscp_to_tc[1]"));
  // A corrupt file is replaced by the next apply.
  ASSERT_TRUE(a->Apply(MakeState("tor0", 1)).ok());
  EXPECT_TRUE(a->ReadBack().ok());
  // The directory disappears (unmounted, deleted): clear errors, nothing half-written.
  {
    TempDir gone;
    auto g = std::move(FileAdapter::Create({gone.path(), "tor0"})).value();
    std::filesystem::remove_all(gone.path());
    EXPECT_EQ(g->Health().code(), core::StatusCode::kUnavailable);
    auto w = g->Apply(MakeState("tor0", 0));
    EXPECT_EQ(w.status().code(), core::StatusCode::kUnavailable);
    EXPECT_THAT(w.status().message(), HasSubstr(gone.path()));
  }
  if (::geteuid() != 0) {  // Root ignores permission bits.
    ::chmod(dir.path().c_str(), 0500);
    EXPECT_FALSE(a->Health().ok());
    EXPECT_FALSE(a->Apply(MakeState("tor0", 2)).ok());
    ::chmod(dir.path().c_str(), 0700);
    EXPECT_EQ(a->ReadBack()->dscp_to_tc.at(10), 4);  // Old state whole.
  }
}

// ---- Log backend ----

TEST(LogAdapterTest, LogsWhatItWouldApplyAndRemembersIt) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("dry-run-test", sink);
  logger->set_pattern("%v");
  LogAdapter a("tor0", logger);
  EXPECT_EQ(a.capabilities().backend, "log");
  EXPECT_EQ(a.ReadBack().status().code(), core::StatusCode::kNotFound);
  auto first = a.Apply(MakeState("tor0", 0));
  ASSERT_TRUE(first.ok());
  EXPECT_GT(first->writes, 64);  // Everything is new.
  out.str("");
  auto second = a.Apply(MakeState("tor0", 1));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->writes, 1);
  EXPECT_EQ(out.str(), "[dry-run] switch tor0: would set dscp_to_tc[10]: 5 -> 4\n");
  out.str("");
  // Nothing to change: silent at info level (the agent re-applies on every reconcile), a line
  // at debug level.
  EXPECT_EQ(a.Apply(MakeState("tor0", 1))->writes, 0);
  EXPECT_EQ(out.str(), "");
  logger->set_level(spdlog::level::debug);
  EXPECT_EQ(a.Apply(MakeState("tor0", 1))->writes, 0);
  EXPECT_THAT(out.str(), HasSubstr("already up to date"));
  EXPECT_EQ(*a.ReadBack(), MakeState("tor0", 1));
  EXPECT_FALSE(a.Apply(MakeState("tor9", 1)).ok());
}

}  // namespace
}  // namespace crux::switch_adapters
