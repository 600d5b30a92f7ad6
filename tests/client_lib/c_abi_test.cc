// The shared library's C ABI, exercised by a separate program (crux_client_c_abi_check) that
// links only libcrux_client.so: this test binary links the protocol library itself, and
// protobuf refuses a second registration of the same .proto files in one process.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

TEST(CAbiTest, SharedLibraryThroughTheCAbi) {
  const std::string cmd = std::string(CRUX_BINARY_DIR) + "/client_lib/crux_client_c_abi_check " +
                          CRUX_BINARY_DIR + "/client_lib/libcrux_client.so 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  int status = pclose(p);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  EXPECT_NE(out.find("ok   internal Profiler::Consume hidden"), std::string::npos) << out;
}

}  // namespace
