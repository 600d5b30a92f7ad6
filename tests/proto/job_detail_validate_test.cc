// Validation of the pair-comparison fields of an admin JobDetail (issue #16 item 5).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "crux/protocol/validate.h"

namespace crux::protocol {
namespace {

v1::Envelope Detail() {
  v1::Envelope e;
  e.set_protocol_version(1);
  e.set_request_id(3);
  v1::JobDetail* d = e.mutable_job_detail();
  d->mutable_summary()->set_job_id("small");
  d->set_work_flops(1e15);
  d->set_comm_time_ms(10);
  d->set_pair_gain(0.012);
  d->set_pair_loss(0.0);
  d->set_reference_job("big-ring");
  return e;
}

std::string Error(const v1::Envelope& e) { return Validate(e).message(); }

TEST(JobDetailValidateTest, PairFieldsPass) {
  EXPECT_TRUE(Validate(Detail()).ok()) << Error(Detail());
  v1::Envelope none = Detail();
  none.mutable_job_detail()->clear_reference_job();  // No reference: allowed.
  EXPECT_TRUE(Validate(none).ok()) << Error(none);
}

TEST(JobDetailValidateTest, BadPairFieldsAreRefused) {
  v1::Envelope e = Detail();
  e.mutable_job_detail()->set_pair_gain(std::nan(""));
  EXPECT_NE(Error(e).find("job_detail.pair_gain: must be"), std::string::npos) << Error(e);
  e = Detail();
  e.mutable_job_detail()->set_pair_loss(-1);
  EXPECT_NE(Error(e).find("job_detail.pair_loss: must be"), std::string::npos) << Error(e);
  e = Detail();
  e.mutable_job_detail()->set_pair_loss(std::numeric_limits<double>::infinity());
  EXPECT_NE(Error(e).find("job_detail.pair_loss: must be"), std::string::npos) << Error(e);
  e = Detail();
  e.mutable_job_detail()->set_reference_job("bad name");
  EXPECT_NE(Error(e).find("job_detail.reference_job: invalid name"), std::string::npos) << Error(e);
}

}  // namespace
}  // namespace crux::protocol
