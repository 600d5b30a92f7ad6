#include "crux/protocol/curve.h"

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace crux::protocol {
namespace {

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

}  // namespace
}  // namespace crux::protocol
