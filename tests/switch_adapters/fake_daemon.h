// A minimal cruxd for the switch agent tests, on a real ZeroMQ ROUTER (protocol/server.h): answers
// hellos (an ack, or the configured error), acks SwitchApplied, records every message and the
// peers' routing ids, and pushes SwitchQosState on demand to the last peer that spoke.
//
// Thread-safety: the server thread records, the test thread reads; guarded by a mutex (which also
// guards server_: the constructor sets it under the mutex, the handler uses it under the mutex).
#ifndef CRUX_TESTS_SWITCH_ADAPTERS_FAKE_DAEMON_H_
#define CRUX_TESTS_SWITCH_ADAPTERS_FAKE_DAEMON_H_

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "crux/protocol/codec.h"
#include "crux/protocol/server.h"
#include "crux/protocol/transport_context.h"
#include "crux/v1/envelope.pb.h"

namespace crux::switch_adapters::testing {

class FakeDaemon {
 public:
  FakeDaemon(protocol::TransportContext& ctx, const std::string& endpoint,
             std::optional<v1::ErrorCode> hello_error = std::nullopt) {
    protocol::ServerOptions o;
    o.endpoint = endpoint;
    // Held until server_ is set: the server thread may run the handler (which sends through
    // server_) as soon as Start binds, e.g. for a hello an agent queued while the previous fake
    // daemon was gone (found by TSan: the handler read server_ while this thread wrote it).
    std::lock_guard<std::mutex> init_lock(mu_);
    auto s = protocol::RouterServer::Start(ctx, o, [this, hello_error](protocol::Inbound in) {
      std::lock_guard<std::mutex> lock(mu_);
      if (in.msg.has_switch_hello() && hello_error) {
        (void)server_->Send(in.peer, protocol::MakeError(in.msg.request_id(), *hello_error,
                                                         "switch_hello.switch_name: 'tor0' is "
                                                         "not a switch of the topology"));
      } else if (in.msg.has_switch_hello() || in.msg.has_switch_applied() ||
                 in.msg.has_switch_telemetry()) {
        peer_ = in.peer;
        peers_.push_back(in.peer);
        (void)server_->Send(in.peer, protocol::MakeAck(in.msg.request_id()));
      }
      inbound_.push_back(std::move(in.msg));
    });
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  void Push(const v1::SwitchQosState& state) {
    v1::Envelope env = protocol::NewEnvelope(0);
    *env.mutable_switch_state() = state;
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_TRUE(server_->Send(peer_, env).ok());
  }
  std::vector<v1::Envelope> Received() {
    std::lock_guard<std::mutex> lock(mu_);
    return inbound_;
  }
  std::vector<std::string> Peers() {
    std::lock_guard<std::mutex> lock(mu_);
    return peers_;
  }
  std::vector<v1::SwitchApplied> Applied() {
    std::vector<v1::SwitchApplied> out;
    for (const auto& e : Received()) {
      if (e.has_switch_applied()) out.push_back(e.switch_applied());
    }
    return out;
  }
  std::vector<v1::SwitchTelemetry> Telemetry() {
    std::vector<v1::SwitchTelemetry> out;
    for (const auto& e : Received()) {
      if (e.has_switch_telemetry()) out.push_back(e.switch_telemetry());
    }
    return out;
  }
  std::vector<v1::SwitchHello> Hellos() {
    std::vector<v1::SwitchHello> out;
    for (const auto& e : Received()) {
      if (e.has_switch_hello()) out.push_back(e.switch_hello());
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::string peer_;
  std::vector<std::string> peers_;
  std::vector<v1::Envelope> inbound_;
  std::unique_ptr<protocol::RouterServer> server_;
};

}  // namespace crux::switch_adapters::testing

#endif  // CRUX_TESTS_SWITCH_ADAPTERS_FAKE_DAEMON_H_
