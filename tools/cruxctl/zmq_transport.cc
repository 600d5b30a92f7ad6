// The production AdminTransport: one protocol::DealerClient over the admin endpoint.
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "crux/protocol/client.h"
#include "crux/protocol/transport_context.h"
#include "cruxctl.h"

namespace crux::cruxctl {
namespace {

class ZmqAdminTransport final : public AdminTransport {
 public:
  ZmqAdminTransport() = default;

  core::Status Connect(const std::string& endpoint) {
    protocol::ClientOptions options;
    options.endpoint = endpoint;
    // One short-lived request: no ZMTP heartbeats, quick reconnect attempts.
    options.heartbeat_ivl = core::Duration::Zero();
    options.reconnect_ivl = core::Duration::Millis(50);
    options.reconnect_ivl_max = core::Duration::Millis(500);
    CRUX_ASSIGN_OR_RETURN(client_, protocol::DealerClient::Connect(context_, std::move(options)));
    return core::Status::Ok();
  }

  core::Result<v1::Envelope> Call(const v1::Envelope& request, core::Duration timeout) override {
    return client_->Call(request, timeout);
  }

 private:
  // Declaration order matters: the client must be destroyed before its context.
  protocol::TransportContext context_;
  std::unique_ptr<protocol::DealerClient> client_;
};

}  // namespace

core::Result<std::unique_ptr<AdminTransport>> MakeZmqAdminTransport(const std::string& endpoint) {
  constexpr std::string_view kIpc = "ipc://";
  if (endpoint.rfind(kIpc, 0) == 0) {
    // ZeroMQ would wait for an ipc socket that does not exist; say so at once instead.
    const std::string path = endpoint.substr(kIpc.size());
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) {
      return core::UnavailableError("no admin socket at " + path + " (is cruxd running?)");
    }
    if (!std::filesystem::is_socket(status)) {
      return core::UnavailableError(path + " is not a socket");
    }
  }
  auto transport = std::make_unique<ZmqAdminTransport>();
  CRUX_RETURN_IF_ERROR(transport->Connect(endpoint));
  return std::unique_ptr<AdminTransport>(std::move(transport));
}

}  // namespace crux::cruxctl
