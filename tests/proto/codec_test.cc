#include "crux/protocol/codec.h"

#include <gtest/gtest.h>

#include <string>

namespace crux::protocol {
namespace {

TEST(CodecTest, RoundTripKeepsEveryField) {
  v1::Envelope msg = NewEnvelope(42);
  v1::ProfileReport* r = msg.mutable_profile_report();
  r->set_job_id("job-a");
  r->set_compute_time_ns(123456789);
  r->set_flops_per_iteration(3.5e15);
  r->set_iteration_period_ns(200000000);
  r->set_overlap_start(0.25);
  r->set_samples(17);
  auto* peer = r->add_peers();
  peer->set_local_nic("host0/nic0");
  peer->set_remote_nic("host1/nic0");
  peer->set_bytes(1 << 30);

  const std::string frame = Encode(msg);
  auto decoded = Decode(frame);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->request_id(), 42u);
  EXPECT_EQ(decoded->protocol_version(), kProtocolVersion);
  ASSERT_EQ(decoded->body_case(), v1::Envelope::kProfileReport);
  EXPECT_EQ(decoded->profile_report().compute_time_ns(), 123456789u);
  EXPECT_DOUBLE_EQ(decoded->profile_report().overlap_start(), 0.25);
  EXPECT_EQ(decoded->profile_report().peers(0).bytes(), uint64_t{1} << 30);
  EXPECT_EQ(BodyName(*decoded), "profile_report");
}

TEST(CodecTest, OversizeFrameIsTooLarge) {
  std::string frame(kMaxFrameBytes + 1, 'x');
  v1::ErrorCode code{};
  auto decoded = Decode(frame, &code);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(code, v1::ERROR_CODE_TOO_LARGE);
  EXPECT_EQ(DecodeErrorCode(decoded.status()), v1::ERROR_CODE_TOO_LARGE);
  EXPECT_NE(decoded.status().message().find("1048576"), std::string::npos);
}

TEST(CodecTest, EncodeCheckedRefusesOversizeMessages) {
  v1::Envelope msg = NewEnvelope(1);
  msg.mutable_end_job()->set_job_id("j");
  msg.mutable_end_job()->set_reason(std::string(kMaxFrameBytes, 'r'));
  auto frame = EncodeChecked(msg);
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), core::StatusCode::kOutOfRange);
  msg.mutable_end_job()->set_reason("short");
  EXPECT_TRUE(EncodeChecked(msg).ok());
}

TEST(CodecTest, GarbageIsMalformed) {
  for (const std::string& frame :
       {std::string(), std::string("\xff\xff\xff\xff\xff", 5), std::string("hello world"),
        std::string("\x0a\x05"
                    "ab",
                    4)}) {
    v1::ErrorCode code{};
    auto decoded = Decode(frame, &code);
    ASSERT_FALSE(decoded.ok()) << "frame of " << frame.size() << " bytes decoded";
    EXPECT_EQ(code, v1::ERROR_CODE_MALFORMED);
    EXPECT_EQ(DecodeErrorCode(decoded.status()), v1::ERROR_CODE_MALFORMED);
  }
}

TEST(CodecTest, EnvelopeWithoutBodyIsMalformed) {
  v1::Envelope msg = NewEnvelope(7);
  v1::ErrorCode code{};
  auto decoded = Decode(Encode(msg), &code);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(code, v1::ERROR_CODE_MALFORMED);
  EXPECT_NE(decoded.status().message().find("envelope.body"), std::string::npos);
}

TEST(CodecTest, WrongVersionIsUnsupported) {
  v1::Envelope msg = NewEnvelope(9);
  msg.mutable_heartbeat()->set_job_id("j");
  msg.set_protocol_version(2);
  v1::ErrorCode code{};
  auto decoded = Decode(Encode(msg), &code);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(code, v1::ERROR_CODE_UNSUPPORTED_VERSION);
  EXPECT_NE(decoded.status().message().find("protocol_version"), std::string::npos);
  msg.set_protocol_version(0);
  EXPECT_FALSE(Decode(Encode(msg)).ok());
}

TEST(CodecTest, MakeErrorAndAck) {
  v1::Envelope err = MakeError(5, v1::ERROR_CODE_UNKNOWN_HOST, "register_job.placement[0].host");
  EXPECT_EQ(err.protocol_version(), kProtocolVersion);
  EXPECT_EQ(err.request_id(), 5u);
  EXPECT_EQ(err.error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  core::Status st = StatusFromError(err.error());
  EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "ERROR_CODE_UNKNOWN_HOST: register_job.placement[0].host");

  v1::Envelope ack = MakeAck(6, "job-a", 12);
  EXPECT_TRUE(ack.ack().ok());
  EXPECT_EQ(ack.ack().job_id(), "job-a");
  EXPECT_EQ(ack.ack().epoch(), 12u);
  EXPECT_EQ(BodyName(ack), "ack");
  EXPECT_EQ(BodyName(NewEnvelope()), "none");
}

TEST(CodecTest, StatusMappings) {
  EXPECT_EQ(ErrorCodeFromStatus(core::InvalidArgumentError("x")), v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(ErrorCodeFromStatus(core::NotFoundError("x")), v1::ERROR_CODE_NOT_FOUND);
  EXPECT_EQ(ErrorCodeFromStatus(core::AlreadyExistsError("x")), v1::ERROR_CODE_CONFLICT);
  EXPECT_EQ(ErrorCodeFromStatus(core::UnavailableError("x")), v1::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(ErrorCodeFromStatus(core::InternalError("x")), v1::ERROR_CODE_INTERNAL);
  v1::Error e;
  e.set_code(v1::ERROR_CODE_UNKNOWN_JOB);
  EXPECT_EQ(StatusFromError(e).code(), core::StatusCode::kNotFound);
  e.set_code(v1::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(StatusFromError(e).code(), core::StatusCode::kUnavailable);
  EXPECT_EQ(ErrorCodeName(v1::ERROR_CODE_TOO_LARGE), "ERROR_CODE_TOO_LARGE");
}

}  // namespace
}  // namespace crux::protocol

namespace crux::protocol {
namespace {

// A push built from an assignment serialized earlier decodes to exactly the envelope built the
// usual way (NewEnvelope(0) + the assignment + the stamps), even when the earlier serialization
// carried other stamps (the later ones win).
TEST(CodecTest, AssignmentPushFromSerializedBytesDecodesLikeTheUsualEnvelope) {
  v1::Assignment a;
  a.set_job_id("job-a");
  a.set_epoch(7);
  a.set_level(3);
  a.set_dscp(10);
  a.set_traffic_class(40);
  a.set_state_id(1);  // Stale stamps in the stored bytes.
  a.set_sent_unix_ns(5);
  v1::FlowAssignment* f = a.add_flows();
  f->set_src_nic("host0/nic0");
  f->set_dst_nic("host1/nic0");
  f->set_udp_sport(49152);
  f->add_path("tor0");
  (*a.mutable_nccl_env())["NCCL_IB_TC"] = "40";
  const std::string frame = EncodeAssignmentPush(a.SerializeAsString(), 0xabcdef, 123456789);
  auto decoded = Decode(frame);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  v1::Envelope expected = NewEnvelope(0);
  *expected.mutable_assignment() = a;
  expected.mutable_assignment()->set_state_id(0xabcdef);
  expected.mutable_assignment()->set_sent_unix_ns(123456789);
  EXPECT_EQ(decoded->SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(decoded->request_id(), 0u);
  EXPECT_EQ(decoded->assignment().state_id(), 0xabcdefu);
  EXPECT_EQ(decoded->assignment().flows(0).udp_sport(), 49152u);
}

}  // namespace
}  // namespace crux::protocol
