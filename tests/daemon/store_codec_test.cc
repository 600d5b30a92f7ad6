// StoreCodec: the store rows round-trip through protobuf against the topology, and a row that
// does not parse or does not fit says which (the restore logs it and keeps the row).
#include "crux/daemon/store/store_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "crux/protocol/convert.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

using ::testing::HasSubstr;

class StoreCodecTest : public ::testing::Test {
 protected:
  StoreCodecTest()
      : topo_(spec::ParseTopology(EmbeddedTopologyYaml(), "").value()), codec_(topo_) {}

  core::JobDemand Demand(const std::string& id) const {
    const v1::Envelope e = testing::Register(id, {"host0", "host4"});
    core::JobDemand d;
    EXPECT_FALSE(protocol::Failed(protocol::DemandFromProto(e.register_job(), topo_, &d)));
    return d;
  }

  core::Topology topo_;
  StoreCodec codec_;
};

TEST_F(StoreCodecTest, JobRowsRoundTrip) {
  const core::JobDemand d = Demand("a");
  StoredJob row;
  row.job_id = "a";
  row.registration = codec_.EncodeRegistration(d);
  core::Result<core::JobDemand> back = codec_.DecodeRegistration(row);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, d);

  core::JobProfile p;
  p.compute_time = core::Duration::Millis(80);
  p.iteration_period = core::Duration::Millis(160);
  const std::string blob = codec_.EncodeProfile("a", p);
  core::Result<core::JobProfile> profile = codec_.DecodeProfile(blob, d);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_EQ(profile->compute_time, p.compute_time);
  EXPECT_EQ(StoreCodec::EncodePhase(core::JobPhase::kScheduled), v1::JOB_STATE_SCHEDULED);
}

TEST_F(StoreCodecTest, RowsThatDoNotParseOrFitSayWhich) {
  StoredJob row;
  row.job_id = "a";
  row.registration = codec_.EncodeRegistration(Demand("b"));  // Another job's registration.
  EXPECT_EQ(codec_.DecodeRegistration(row).status().message(),
            "stored registration does not parse");
  row.registration = "garbage";
  EXPECT_EQ(codec_.DecodeRegistration(row).status().code(), core::StatusCode::kInvalidArgument);

  EXPECT_EQ(codec_.DecodeProfile("\xff\xff", Demand("a")).status().message(), "does not parse");
  EXPECT_EQ(codec_.DecodeAssignment("\xff\xff").status().message(), "does not parse");
  StoredPart part;
  part.job_id = "a";
  part.registration = codec_.EncodeRegistration(Demand("a"));  // No HostPart.
  EXPECT_THAT(codec_.DecodePartRegistration(part).status().message(),
              HasSubstr("stored part registration does not parse"));
}

TEST_F(StoreCodecTest, PlanRowCarriesTheAssignmentTheRestoreReadsBack) {
  core::AppliedAssignment a;
  a.assignment.job_id = "a";
  a.assignment.level = 3;
  a.assignment.dscp = 10;
  a.epoch = 7;
  const PlanRow row = codec_.EncodePlanRow(a);
  EXPECT_EQ(row.job_id, "a");
  EXPECT_EQ(row.level, 3);
  EXPECT_EQ(row.dscp, 10u);
  EXPECT_EQ(row.epoch, 7u);
  core::Result<core::AppliedAssignment> back = codec_.DecodeAssignment(row.assignment);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->assignment.level, 3);
  EXPECT_EQ(back->epoch, 7u);
}

}  // namespace
}  // namespace crux::daemon
