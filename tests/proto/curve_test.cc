#include "crux/protocol/curve.h"

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace crux::protocol {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

unsigned Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(CurveTest, GenerateGivesValidDistinctKeys) {
  auto a = GenerateCurveKeyPair();
  auto b = GenerateCurveKeyPair();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(IsValidZ85Key(a->public_z85));
  EXPECT_TRUE(IsValidZ85Key(a->secret_z85));
  EXPECT_NE(a->public_z85, b->public_z85);
  auto derived = DerivePublicKey(a->secret_z85);
  ASSERT_TRUE(derived.ok());
  EXPECT_EQ(*derived, a->public_z85);
  EXPECT_FALSE(IsValidZ85Key("short"));
  EXPECT_FALSE(IsValidZ85Key(std::string(40, ' ')));
}

TEST(CurveTest, SaveAndLoadWithPermissions) {
  TempDir dir;
  auto keys = GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  const std::string base = dir.path() + "/server";
  ASSERT_TRUE(SaveKeyPair(*keys, base).ok());
  EXPECT_EQ(Mode(base + ".key"), 0600u);
  EXPECT_EQ(Mode(base + ".pub"), 0644u);

  auto loaded = LoadSecretKeyFile(base + ".key");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->public_z85, keys->public_z85);
  EXPECT_EQ(loaded->secret_z85, keys->secret_z85);
  auto pub = LoadPublicKeyFile(base + ".pub");
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(*pub, keys->public_z85);

  // No silent overwrite; explicit overwrite works and keeps 0600.
  core::Status again = SaveKeyPair(*keys, base);
  EXPECT_EQ(again.code(), core::StatusCode::kAlreadyExists);
  ASSERT_TRUE(SaveKeyPair(*keys, base, /*overwrite=*/true).ok());
  EXPECT_EQ(Mode(base + ".key"), 0600u);

  // A group-readable secret is refused, naming the fix.
  ASSERT_EQ(::chmod((base + ".key").c_str(), 0640), 0);
  auto refused = LoadSecretKeyFile(base + ".key");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("chmod 600"), std::string::npos);
}

TEST(CurveTest, BadKeyFilesAreErrorsNamingTheProblem) {
  TempDir dir;
  auto a = GenerateCurveKeyPair();
  auto b = GenerateCurveKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string mismatched = dir.path() + "/mismatch.key";
  {
    std::ofstream out(mismatched);
    out << "public-key = " << a->public_z85 << "\nsecret-key = " << b->secret_z85 << "\n";
  }
  ::chmod(mismatched.c_str(), 0600);
  auto r = LoadSecretKeyFile(mismatched);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not match"), std::string::npos);

  const std::string junk = dir.path() + "/junk.pub";
  {
    std::ofstream out(junk);
    out << "# comment\npublic-key = not-a-key\n";
  }
  auto j = LoadPublicKeyFile(junk);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("junk.pub:2"), std::string::npos) << j.status().message();

  const std::string unknown = dir.path() + "/unknown.pub";
  {
    std::ofstream out(unknown);
    out << "colour = blue\n";
  }
  EXPECT_FALSE(LoadPublicKeyFile(unknown).ok());
  EXPECT_FALSE(LoadPublicKeyFile(dir.path() + "/missing.pub").ok());
  // Saving a pair whose halves do not belong together is refused.
  EXPECT_FALSE(SaveKeyPair(CurveKeyPair{a->public_z85, b->secret_z85}, dir.path() + "/x").ok());
}

TEST(CurveTest, AuthorizedKeysDirectory) {
  TempDir dir;
  auto a = GenerateCurveKeyPair();
  auto b = GenerateCurveKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(SavePublicKey(b->public_z85, dir.path() + "/job-b.pub").ok());
  ASSERT_TRUE(SaveKeyPair(*a, dir.path() + "/job-a").ok());  // job-a.key is ignored.
  {
    std::ofstream out(dir.path() + "/README.txt");
    out << "not a key\n";
  }
  auto keys = LoadAuthorizedKeys(dir.path());
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].name, "job-a");
  EXPECT_EQ((*keys)[0].public_z85, a->public_z85);
  EXPECT_EQ((*keys)[1].name, "job-b");
  EXPECT_EQ((*keys)[1].public_z85, b->public_z85);

  TempDir empty;
  auto none = LoadAuthorizedKeys(empty.path());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(LoadAuthorizedKeys(empty.path() + "/nope").ok());

  {
    std::ofstream out(dir.path() + "/broken.pub");
    out << "public-key = abc\n";
  }
  auto broken = LoadAuthorizedKeys(dir.path());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("broken.pub"), std::string::npos);
}

// hosts/<host>.pub are host keys (crux-hostd), like switches/<switch>.pub: one key may speak for
// several hosts (one file each); a key has one role.
TEST(CurveTest, AuthorizedKeysDirectoryWithHostAndSwitchKeys) {
  TempDir dir;
  auto job = GenerateCurveKeyPair();
  auto sw = GenerateCurveKeyPair();
  auto host = GenerateCurveKeyPair();
  auto shared = GenerateCurveKeyPair();
  ASSERT_TRUE(job.ok() && sw.ok() && host.ok() && shared.ok());
  fs::create_directories(dir.path() + "/switches");
  fs::create_directories(dir.path() + "/hosts");
  ASSERT_TRUE(SavePublicKey(job->public_z85, dir.path() + "/job-a.pub").ok());
  ASSERT_TRUE(SavePublicKey(sw->public_z85, dir.path() + "/switches/tor1.pub").ok());
  ASSERT_TRUE(SavePublicKey(host->public_z85, dir.path() + "/hosts/host3.pub").ok());
  ASSERT_TRUE(SavePublicKey(shared->public_z85, dir.path() + "/hosts/host5.pub").ok());
  ASSERT_TRUE(SavePublicKey(shared->public_z85, dir.path() + "/hosts/host4.pub").ok());
  auto keys = LoadAuthorizedKeys(dir.path());
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 5u);
  // Sorted by role (job, switch, host), then name.
  EXPECT_EQ((*keys)[0].name, "job-a");
  EXPECT_EQ((*keys)[0].role, KeyRole::kJob);
  EXPECT_EQ((*keys)[1].name, "tor1");
  EXPECT_EQ((*keys)[1].role, KeyRole::kSwitch);
  EXPECT_EQ((*keys)[1].switch_name, "tor1");
  EXPECT_EQ((*keys)[2].name, "host3");
  EXPECT_EQ((*keys)[2].role, KeyRole::kHost);
  EXPECT_EQ((*keys)[2].host_name, "host3");
  EXPECT_EQ((*keys)[2].public_z85, host->public_z85);
  EXPECT_TRUE((*keys)[2].switch_name.empty());
  EXPECT_EQ((*keys)[3].host_name, "host4");
  EXPECT_EQ((*keys)[4].host_name, "host5");

  auto grants = GrantsOf(*keys);
  ASSERT_TRUE(grants.ok()) << grants.status().ToString();
  ASSERT_EQ(grants->size(), 4u);
  EXPECT_EQ(grants->at(job->public_z85).role, KeyRole::kJob);
  EXPECT_TRUE(grants->at(job->public_z85).hosts.empty());
  EXPECT_EQ(grants->at(sw->public_z85).switches, std::vector<std::string>({"tor1"}));
  EXPECT_TRUE(grants->at(sw->public_z85).hosts.empty());
  const KeyGrant& h = grants->at(host->public_z85);
  EXPECT_EQ(h.role, KeyRole::kHost);
  EXPECT_EQ(h.name, "host3");
  EXPECT_EQ(h.hosts, std::vector<std::string>({"host3"}));
  EXPECT_TRUE(h.switches.empty());
  EXPECT_EQ(grants->at(shared->public_z85).hosts, std::vector<std::string>({"host4", "host5"}));

  // A key that is a switch key and a host key is refused, naming both files.
  ASSERT_TRUE(SavePublicKey(sw->public_z85, dir.path() + "/hosts/host6.pub").ok());
  keys = LoadAuthorizedKeys(dir.path());
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  auto both = GrantsOf(*keys);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(both.status().message().find("hosts/host6.pub"), std::string::npos)
      << both.status().message();
  EXPECT_NE(both.status().message().find("switches/tor1.pub"), std::string::npos)
      << both.status().message();
  EXPECT_NE(both.status().message().find("a switch key"), std::string::npos)
      << both.status().message();
  fs::remove(dir.path() + "/hosts/host6.pub");
  // ...and so is a job key that is also a host key.
  ASSERT_TRUE(SavePublicKey(host->public_z85, dir.path() + "/job-h.pub").ok());
  keys = LoadAuthorizedKeys(dir.path());
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  both = GrantsOf(*keys);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("hosts/host3.pub"), std::string::npos)
      << both.status().message();
  EXPECT_NE(both.status().message().find("job-h.pub"), std::string::npos)
      << both.status().message();
  fs::remove(dir.path() + "/job-h.pub");

  // A bad host key file is an error naming it.
  {
    std::ofstream out(dir.path() + "/hosts/broken.pub");
    out << "public-key = abc\n";
  }
  auto broken = LoadAuthorizedKeys(dir.path());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("hosts/broken.pub"), std::string::npos)
      << broken.status().message();
}

}  // namespace
}  // namespace crux::protocol
