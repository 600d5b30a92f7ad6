// Writes the generated seeds of the protocol fuzzers: one encoded Envelope per body type (a
// valid message where the protocol has rules, so that the fuzzers start past Validate's first
// checks), plus a few frames Decode refuses. Usage: crux_fuzz_seedgen <dir> (scripts/fuzz.sh
// --seeds writes fuzz/corpus/protocol_decode and fuzz/corpus/protocol_envelope with it).
#include <google/protobuf/descriptor.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "crux/protocol/codec.h"
#include "crux/protocol/validate.h"

namespace {

using crux::protocol::NewEnvelope;
namespace v1 = crux::v1;

bool Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

void AddValidMessages(std::vector<std::pair<std::string, v1::Envelope>>* out) {
  {
    v1::Envelope m = NewEnvelope(1);
    auto* r = m.mutable_register_job();
    r->set_job_id("gpt-1");
    r->set_tenant("tenant-a");
    auto* h = r->add_placement();
    h->set_host("host0");
    h->set_gpus(8);
    h->add_nics()->set_name("host0/nic0");
    auto* h1 = r->add_placement();
    h1->set_host("host1");
    h1->set_gpus(8);
    auto* qp = r->add_qps();
    qp->set_qp_num(17);
    qp->set_local_nic("host0/nic0");
    qp->set_remote_nic("host1/nic0");
    r->set_pattern("ring_allreduce");
    r->set_bytes_per_iteration(2'600'000'000);
    r->set_lease_ms(15000);
    r->set_model("gpt3_6.7b");
    out->emplace_back("register_job", m);
  }
  {
    v1::Envelope m = NewEnvelope(2);
    auto* r = m.mutable_register_job_reply();
    r->set_job_id("gpt-1");
    r->set_lease_ms(15000);
    r->set_dscp(26);
    out->emplace_back("register_job_reply", m);
  }
  {
    v1::Envelope m = NewEnvelope(3);
    auto* r = m.mutable_profile_report();
    r->set_job_id("gpt-1");
    r->set_compute_time_ns(1'200'000'000);
    r->set_flops_per_iteration(3e15);
    auto* p = r->add_peers();
    p->set_local_nic("host0/nic0");
    p->set_remote_nic("host1/nic0");
    p->set_bytes(1'300'000'000);
    r->set_iteration_period_ns(1'500'000'000);
    r->set_overlap_start(0.6);
    r->set_compression_ratio(1.0);
    r->set_samples(10);
    r->set_converged(true);
    out->emplace_back("profile_report", m);
  }
  {
    v1::Envelope m = NewEnvelope(4);
    auto* r = m.mutable_heartbeat();
    r->set_job_id("gpt-1");
    r->set_seq(7);
    r->set_applied_epoch(3);
    r->set_applied_state_id(0x1234abcd);
    out->emplace_back("heartbeat", m);
  }
  {
    v1::Envelope m = NewEnvelope(5);
    m.mutable_end_job()->set_job_id("gpt-1");
    m.mutable_end_job()->set_reason("finished");
    out->emplace_back("end_job", m);
  }
  {
    v1::Envelope m = NewEnvelope(0);
    auto* a = m.mutable_assignment();
    a->set_job_id("gpt-1");
    a->set_epoch(3);
    a->set_level(1);
    a->set_dscp(26);
    a->set_traffic_class(26 << 2);
    auto* f = a->add_flows();
    f->set_src_nic("host0/nic0");
    f->set_dst_nic("host1/nic0");
    f->set_udp_sport(49152);
    f->add_path("host0/nic0");
    f->add_path("tor0");
    f->add_path("host1/nic0");
    a->set_state(v1::JOB_STATE_SCHEDULED);
    (*a->mutable_nccl_env())["NCCL_IB_TC"] = "104";
    a->set_sent_unix_ns(1'700'000'000'000'000'000);
    a->set_state_id(0x1234abcd);
    out->emplace_back("assignment", m);
  }
  out->emplace_back("ack", crux::protocol::MakeAck(0, "gpt-1", 3));
  out->emplace_back("error",
                    crux::protocol::MakeError(9, v1::ERROR_CODE_INVALID_ARGUMENT,
                                              "profile_report.compute_time_ns: must be > 0"));
  {
    v1::Envelope m = NewEnvelope(6);
    auto* h = m.mutable_switch_hello();
    h->set_switch_name("tor0");
    h->set_agent_version("0.1.0");
    auto* c = h->mutable_capabilities();
    c->set_queues(8);
    c->set_strict_priority(true);
    c->set_dwrr(true);
    c->add_backends("sonic");
    h->set_applied_epoch(2);
    out->emplace_back("switch_hello", m);
  }
  v1::SwitchQosState state;
  state.set_switch_name("tor0");
  state.set_epoch(3);
  for (uint32_t tc = 0; tc < 8; ++tc) {
    (*state.mutable_dscp_to_tc())[tc * 8] = tc;
    (*state.mutable_tc_to_queue())[tc] = tc;
  }
  {
    auto* s = state.add_schedulers();
    s->set_queue(7);
    s->set_type("STRICT");
    auto* d = state.add_schedulers();
    d->set_queue(1);
    d->set_type("DWRR");
    d->set_weight(50);
  }
  state.add_ports("Ethernet0");
  state.add_pfc_enable(3);
  state.set_state_id(0x1234abcd);
  {
    v1::Envelope m = NewEnvelope(0);
    *m.mutable_switch_state() = state;
    out->emplace_back("switch_state", m);
  }
  {
    v1::Envelope m = NewEnvelope(7);
    auto* a = m.mutable_switch_applied();
    a->set_switch_name("tor0");
    a->set_epoch(3);
    a->set_ok(true);
    *a->mutable_state() = state;
    a->set_drifted_fields(2);
    a->set_reconcile(true);
    out->emplace_back("switch_applied", m);
  }
  {
    v1::Envelope m = NewEnvelope(8);
    m.mutable_job_request()->set_job_id("gpt-1");
    out->emplace_back("job_request", m);
  }
  {
    v1::Envelope m = NewEnvelope(10);
    auto* s = m.mutable_set_link_request();
    s->set_link("tor0->agg1");
    s->set_health(v1::LINK_HEALTH_DEGRADED);
    s->set_capacity_bps(100e9);
    out->emplace_back("set_link_request", m);
  }
  {
    v1::Envelope m = NewEnvelope(11);
    m.mutable_list_links_request()->set_all(true);
    out->emplace_back("list_links_request", m);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::pair<std::string, v1::Envelope>> seeds;
  AddValidMessages(&seeds);
  // Every other body type: the empty message (admin requests are empty anyway; replies get
  // their default values).
  const auto* body = v1::Envelope::descriptor()->FindOneofByName("body");
  for (int i = 0; i < body->field_count(); ++i) {
    const auto* f = body->field(i);
    bool have = false;
    for (const auto& [name, m] : seeds) have = have || name == f->name();
    if (have) continue;
    v1::Envelope m = NewEnvelope(100 + static_cast<uint64_t>(i));
    m.GetReflection()->MutableMessage(&m, f);
    seeds.emplace_back(f->name(), m);
  }
  int failures = 0;
  for (const auto& [name, m] : seeds) {
    if (!Write(dir, "seed_" + name + ".bin", crux::protocol::Encode(m))) ++failures;
  }
  // Frames Decode refuses: no body, another version, not protobuf.
  v1::Envelope no_body = NewEnvelope(1);
  v1::Envelope v2 = crux::protocol::MakeAck(1);
  v2.set_protocol_version(2);
  if (!Write(dir, "seed_no_body.bin", crux::protocol::Encode(no_body))) ++failures;
  if (!Write(dir, "seed_version2.bin", crux::protocol::Encode(v2))) ++failures;
  if (!Write(dir, "seed_garbage.bin", std::string("\xff\xff\xff\xff\x0f", 5))) ++failures;
  std::printf("crux_fuzz_seedgen: %zu envelopes + 3 refused frames in %s\n", seeds.size(),
              dir.c_str());
  return failures == 0 ? 0 : 1;
}
