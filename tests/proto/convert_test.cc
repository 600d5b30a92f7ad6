#include "crux/protocol/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace crux::protocol {
namespace {

using ::testing::HasSubstr;

core::SwitchQosState SmallState() {
  core::SwitchQosState s;
  s.switch_name = "tor0";
  for (int d = 0; d < 64; ++d) s.dscp_to_tc[d] = 0;
  s.dscp_to_tc[10] = 3;
  s.dscp_to_tc[48] = 6;
  s.tc_to_queue = {{0, 0}, {3, 3}, {6, 6}};
  s.schedulers = {{0, core::SchedulerType::kDwrr, 40},
                  {3, core::SchedulerType::kStrict, 0},
                  {6, core::SchedulerType::kStrict, 0}};
  s.pfc_enable = {3};
  return s;
}

TEST(ConvertTest, JobStateNamesAreLowerCaseAndTotal) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_REGISTERED), "registered");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_PROFILING), "profiling");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_SCHEDULED), "scheduled");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_GONE), "gone");
  EXPECT_EQ(JobStateName(static_cast<v1::JobState>(99)), "unspecified");
}

TEST(ConvertTest, SwitchStateRoundTripsAndCarriesTheEpoch) {
  const core::SwitchQosState s = SmallState();
  const v1::SwitchQosState p = SwitchQosStateToProto(s, 42);
  EXPECT_EQ(p.epoch(), 42u);
  EXPECT_EQ(p.switch_name(), "tor0");
  EXPECT_EQ(p.dscp_to_tc().at(10), 3u);
  auto back = SwitchQosStateFromProto(p);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
}

TEST(ConvertTest, InvalidWireStateIsRefusedNamingTheField) {
  v1::SwitchQosState p = SwitchQosStateToProto(SmallState(), 1);
  p.mutable_schedulers(1)->set_type("WRR");
  EXPECT_THAT(SwitchQosStateFromProto(p).status().message(),
              HasSubstr("switch_state.schedulers[1].type"));
  p = SwitchQosStateToProto(SmallState(), 1);
  (*p.mutable_dscp_to_tc())[4000000000u] = 1;  // Clamped, then rejected, never wrapped.
  EXPECT_FALSE(SwitchQosStateFromProto(p).ok());
}

}  // namespace
}  // namespace crux::protocol
