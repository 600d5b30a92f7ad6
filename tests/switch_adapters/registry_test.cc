// The backend registry (backends picked by name, parameters checked) and the capability check a
// pushed state must pass before it reaches a device.
#include "crux/switch_adapters/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "crux/core/control/qos.h"
#include "crux/core/topology/topology.h"
#include "crux/switch_adapters/builtin_backends.h"
#include "crux/switch_adapters/file_adapter.h"

namespace crux::switch_adapters {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

core::SwitchQosState MakeState(const core::QosConfig& cfg) {
  core::Topology topo;
  core::NodeId tor = *topo.AddNode("tor0", core::NodeKind::kTor);
  return core::ComputeDesiredQos(cfg, topo, {{"a", 10, 0, {tor}}})->at("tor0");
}

TEST(BackendRegistryTest, BuiltinBackendsArePickedByName) {
  const BackendRegistry& r = BuiltinBackends();
#ifdef CRUX_WITH_SONIC
  EXPECT_THAT(r.Names(), ElementsAre("sonic", "file", "log"));
#else
  EXPECT_THAT(r.Names(), ElementsAre("file", "log"));
#endif
  auto log = r.Create("log", {"tor0", {}});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*log)->capabilities().backend, "log");

  auto unknown = r.Create("gnmi", {"tor0", {}});
  EXPECT_EQ(unknown.status().code(), core::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("backend 'gnmi' is unknown (built in: "));
  EXPECT_THAT(r.Create("log", {"", {}}).status().message(), HasSubstr("--switch-name: required"));
  // A parameter of another backend is refused, naming the option and what the backend takes.
  auto misplaced = r.Create("file", {"tor0", {{"redis-socket", "/x"}}});
  EXPECT_EQ(misplaced.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_THAT(misplaced.status().message(),
              HasSubstr("--redis-socket: not a parameter of the file backend (its parameters: "
                        "--state-dir)"));
}

TEST(BackendRegistryTest, FileBackendParameters) {
  const BackendRegistry& r = BuiltinBackends();
  EXPECT_THAT(r.Create("file", {"tor0", {}}).status().message(),
              HasSubstr("--state-dir: required by the file backend"));
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto file = r.Create("file", {"tor0", {{"state-dir", dir}}});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->capabilities().backend, "file");
  EXPECT_THAT(r.Create("file", {"../tor0", {{"state-dir", dir}}}).status().message(),
              HasSubstr("file.switch_name"));
}

#ifdef CRUX_WITH_SONIC
TEST(BackendRegistryTest, SonicBackendParametersAreCheckedAndNamed) {
  const BackendRegistry& r = BuiltinBackends();
  EXPECT_THAT(r.Create("sonic", {"tor0", {}}).status().message(),
              HasSubstr("--ports: required by the sonic backend"));
  EXPECT_THAT(
      r.Create("sonic", {"tor0", {{"ports", "Ethernet0"}, {"redis-port", "x"}}}).status().message(),
      HasSubstr("--redis-port: 'x' is not an integer"));
  EXPECT_THAT(
      r.Create("sonic", {"tor0", {{"ports", "Ethernet0"}, {"queues", "9"}}}).status().message(),
      HasSubstr("--queues: 9 is out of range 1..8"));
  EXPECT_THAT(r.Create("sonic", {"tor0", {{"ports", "Ethernet0,,Ethernet4"}}}).status().message(),
              HasSubstr("--ports: empty item"));
  auto sonic = r.Create("sonic", {"tor0",
                                  {{"ports", "Ethernet0, Ethernet4"},
                                   {"redis-socket", "/nonexistent/redis.sock"},
                                   {"queues", "4"},
                                   {"no-pfc", "true"}}});
  ASSERT_TRUE(sonic.ok()) << sonic.status().ToString();
  const Capabilities caps = (*sonic)->capabilities();
  EXPECT_EQ(caps.backend, "sonic");
  EXPECT_EQ(caps.queues, 4);
  EXPECT_FALSE(caps.pfc);
  EXPECT_TRUE(caps.transactional);
  // Not connected at creation: the device may come up later.
  EXPECT_EQ((*sonic)->Health().code(), core::StatusCode::kUnavailable);
}
#endif

TEST(BackendRegistryTest, AddRejectsBadDescriptors) {
  BackendRegistry r;
  auto factory = [](const BackendConfig&) -> core::Result<std::unique_ptr<SwitchAdapter>> {
    return core::UnavailableError("never built");
  };
  EXPECT_EQ(r.Add({"Bad Name", "", {}, factory}).code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add({"x", "", {}, nullptr}).code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add({"x", "", {{"p", "", false, ""}, {"p", "", false, ""}}, factory}).code(),
            core::StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.Add({"x", "", {{"p", "", false, ""}}, factory}).ok());
  EXPECT_EQ(r.Add({"x", "", {}, factory}).code(), core::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Create("x", {"tor0", {{"p", "1"}}}).status().message(), "never built");
}

TEST(BackendParamTest, ParsesAndNamesTheOption) {
  const BackendConfig c{"tor0", {{"n", "42"}, {"bad", "4x"}, {"f", "true"}, {"l", " a , b "}}};
  EXPECT_EQ(*ParamInt(c, "n", 0, 0, 100), 42);
  EXPECT_EQ(*ParamInt(c, "absent", 7, 0, 100), 7);
  EXPECT_THAT(ParamInt(c, "bad", 0, 0, 100).status().message(), HasSubstr("--bad: '4x'"));
  EXPECT_THAT(ParamInt(c, "n", 0, 0, 10).status().message(), HasSubstr("--n: 42 is out of range"));
  EXPECT_TRUE(*ParamFlag(c, "f"));
  EXPECT_FALSE(*ParamFlag(c, "absent"));
  EXPECT_FALSE(ParamFlag(c, "n").ok());
  EXPECT_THAT(*ParamList(c, "l"), ElementsAre("a", "b"));
  EXPECT_TRUE(ParamList(c, "absent")->empty());
  EXPECT_EQ(ParamString(c, "absent", "dflt"), "dflt");
}

TEST(CapabilitiesTest, StatesBeyondTheBackendAreRefusedNamingTheField) {
  Capabilities caps;
  caps.backend = "sonic";
  const core::SwitchQosState s = MakeState(core::QosConfig{});  // Queues 0..6, STRICT and DWRR.
  EXPECT_TRUE(CheckCapabilities(caps, s).ok());
  caps.queues = 4;
  core::Status four = CheckCapabilities(caps, s);
  EXPECT_EQ(four.code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(four.message(), HasSubstr("switch_state.tc_to_queue[4]: queue 4 is beyond the 4 "
                                        "queues per port of the sonic backend"));
  caps.queues = 8;
  caps.strict_priority = false;
  EXPECT_THAT(CheckCapabilities(caps, s).message(),
              HasSubstr("switch_state.schedulers[q2]: STRICT scheduling is not supported"));
  caps.strict_priority = true;
  caps.dwrr = false;
  EXPECT_THAT(CheckCapabilities(caps, s).message(),
              HasSubstr("switch_state.schedulers[q0]: DWRR scheduling is not supported"));
  // A backend without PFC still takes a state with lossless TCs (it leaves PFC alone).
  caps.dwrr = true;
  caps.pfc = false;
  EXPECT_FALSE(s.pfc_enable.empty());
  EXPECT_TRUE(CheckCapabilities(caps, s).ok());
}

}  // namespace
}  // namespace crux::switch_adapters
