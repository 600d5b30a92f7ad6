#include "crux/daemon/ha/etcd_gateway.h"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

#include "crux/core/base/ids.h"

namespace crux::daemon::ha {

using json = nlohmann::json;

TxnOp TxnOp::Put(std::string key, std::string value, int64_t lease) {
  return {Kind::kPut, std::move(key), std::move(value), {}, lease};
}
TxnOp TxnOp::Delete(std::string key, std::string range_end) {
  return {Kind::kDelete, std::move(key), {}, std::move(range_end), 0};
}
TxnOp TxnOp::Get(std::string key, std::string range_end) {
  return {Kind::kRange, std::move(key), {}, std::move(range_end), 0};
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string Base64Encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(v >> s) & 63]);
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    const uint32_t v = (at(i) << 16) | (rest == 2 ? at(i + 1) << 8 : 0);
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

core::Result<std::string> Base64Decode(const std::string& text) {
  std::array<int, 256> value{};
  value.fill(-1);
  for (int k = 0; k < 64; ++k) value[static_cast<unsigned char>(kAlphabet[k])] = k;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : text) {
    if (c == '=') {
      ++pad;
      continue;
    }
    const int v = value[static_cast<unsigned char>(c)];
    if (v < 0 || pad > 0) return core::InvalidArgumentError("base64: invalid character");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (pad > 2 || (text.size() % 4) != 0) return core::InvalidArgumentError("base64: bad length");
  return out;
}

namespace {

// int64 / uint64 fields come back as JSON strings ("revision": "12"); absent = 0 (proto3 JSON).
template <typename T>
T Number(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<T>();
  if (!it->is_string()) return 0;
  try {
    if constexpr (std::is_signed_v<T>) {
      return std::stoll(it->get<std::string>());
    } else {
      return std::stoull(it->get<std::string>());
    }
  } catch (...) {
    return 0;
  }
}
int64_t Int(const json& j, const char* name) { return Number<int64_t>(j, name); }
uint64_t UInt(const json& j, const char* name) { return Number<uint64_t>(j, name); }

std::string Bytes(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) return {};
  auto decoded = Base64Decode(it->get<std::string>());
  return decoded.ok() ? *decoded : std::string();
}

KeyValue KvFromJson(const json& j) {
  KeyValue kv;
  kv.key = Bytes(j, "key");
  kv.value = Bytes(j, "value");
  kv.create_revision = Int(j, "create_revision");
  kv.mod_revision = Int(j, "mod_revision");
  kv.version = Int(j, "version");
  kv.lease = Int(j, "lease");
  return kv;
}

std::vector<KeyValue> KvsFromJson(const json& j) {
  std::vector<KeyValue> out;
  auto it = j.find("kvs");
  if (it == j.end() || !it->is_array()) return out;
  out.reserve(it->size());
  for (const json& kv : *it) out.push_back(KvFromJson(kv));
  return out;
}

json OpToJson(const TxnOp& op) {
  json body = {{"key", Base64Encode(op.key)}};
  if (!op.range_end.empty()) body["range_end"] = Base64Encode(op.range_end);
  switch (op.kind) {
    case TxnOp::Kind::kPut:
      body["value"] = Base64Encode(op.value);
      if (op.lease != 0) body["lease"] = std::to_string(op.lease);
      return {{"request_put", body}};
    case TxnOp::Kind::kDelete:
      return {{"request_delete_range", body}};
    case TxnOp::Kind::kRange:
      return {{"request_range", body}};
  }
  return {};
}

json CompareToJson(const Compare& c) {
  static constexpr std::array<const char*, 4> kOps = {"EQUAL", "NOT_EQUAL", "GREATER", "LESS"};
  json j = {{"key", Base64Encode(c.key)}, {"result", kOps[static_cast<size_t>(c.op)]}};
  switch (c.target) {
    case Compare::Target::kCreateRevision:
      j["target"] = "CREATE";
      j["create_revision"] = std::to_string(c.number);
      break;
    case Compare::Target::kModRevision:
      j["target"] = "MOD";
      j["mod_revision"] = std::to_string(c.number);
      break;
    case Compare::Target::kVersion:
      j["target"] = "VERSION";
      j["version"] = std::to_string(c.number);
      break;
    case Compare::Target::kValue:
      j["target"] = "VALUE";
      j["value"] = Base64Encode(c.value);
      break;
  }
  return j;
}

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

class GatewayClient final : public Etcd {
 public:
  explicit GatewayClient(GatewayOptions options)
      : options_(std::move(options)), tls_(options_.endpoints.front().rfind("https://", 0) == 0) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    curl_ = curl_easy_init();
  }
  ~GatewayClient() override {
    if (curl_ != nullptr) curl_easy_cleanup(curl_);
  }
  GatewayClient(const GatewayClient&) = delete;
  GatewayClient& operator=(const GatewayClient&) = delete;

  core::Result<LeaseGrant> Grant(int64_t ttl_s) override {
    CRUX_ASSIGN_OR_RETURN(json r, Post("/v3/lease/grant", {{"TTL", std::to_string(ttl_s)}}));
    LeaseGrant g{Int(r, "ID"), Int(r, "TTL")};
    if (g.id == 0) return core::InternalError("etcd lease grant: no lease id in " + r.dump());
    return g;
  }

  core::Result<int64_t> KeepAlive(int64_t lease) override {
    CRUX_ASSIGN_OR_RETURN(json r, Post("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}));
    auto it = r.find("result");
    if (it == r.end()) return core::InternalError("etcd lease keepalive: no result");
    return Int(*it, "TTL");
  }

  core::Status Revoke(int64_t lease) override {
    return Post("/v3/lease/revoke", {{"ID", std::to_string(lease)}}).status();
  }

  core::Result<RangeResult> Range(const std::string& key, const std::string& range_end,
                                  bool by_create_revision) override {
    json body = {{"key", Base64Encode(key)}};
    if (!range_end.empty()) body["range_end"] = Base64Encode(range_end);
    if (by_create_revision) {
      body["sort_target"] = "CREATE";
      body["sort_order"] = "ASCEND";
    }
    CRUX_ASSIGN_OR_RETURN(json r, Post("/v3/kv/range", body));
    RangeResult out;
    out.kvs = KvsFromJson(r);
    auto h = r.find("header");
    if (h != r.end()) out.revision = Int(*h, "revision");
    return out;
  }

  core::Result<TxnResult> Txn(const std::vector<Compare>& compares,
                              const std::vector<TxnOp>& success,
                              const std::vector<TxnOp>& failure) override {
    json body = {
        {"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
    for (const Compare& c : compares) body["compare"].push_back(CompareToJson(c));
    for (const TxnOp& op : success) body["success"].push_back(OpToJson(op));
    for (const TxnOp& op : failure) body["failure"].push_back(OpToJson(op));
    CRUX_ASSIGN_OR_RETURN(json r, Post("/v3/kv/txn", body));
    TxnResult out;
    out.succeeded = r.value("succeeded", false);
    auto h = r.find("header");
    if (h != r.end()) out.revision = Int(*h, "revision");
    auto resp = r.find("responses");
    if (resp != r.end() && resp->is_array()) {
      for (const json& one : *resp) {
        auto range = one.find("response_range");
        if (range != one.end()) out.ranges.push_back(KvsFromJson(*range));
      }
    }
    return out;
  }

  core::Result<MemberStatus> Status() override {
    CRUX_ASSIGN_OR_RETURN(json r, Post("/v3/maintenance/status", json::object()));
    MemberStatus out;
    auto h = r.find("header");
    if (h != r.end()) out.member_id = UInt(*h, "member_id");
    out.leader = UInt(r, "leader");
    return out;
  }

  std::string endpoint() const override { return options_.endpoints[current_]; }

 private:
  // POSTs `body` to `path`; on a transport failure tries the next endpoints (each once).
  core::Result<json> Post(const std::string& path, const json& body) {
    const std::string payload = body.dump();
    core::Status last;
    for (size_t attempt = 0; attempt < options_.endpoints.size(); ++attempt) {
      auto r = Call(options_.endpoints[current_], path, payload);
      if (r.ok() || r.status().code() != core::StatusCode::kUnavailable) return r;
      last = r.status();
      current_ = (current_ + 1) % options_.endpoints.size();
    }
    return last;
  }

  // One call to one endpoint, with the auth token when a user is set: fetched first when there
  // is none, renewed once when etcd no longer knows it (expired, or the user's password changed).
  core::Result<json> Call(const std::string& base, const std::string& path,
                          const std::string& payload) {
    if (!options_.user.empty() && token_.empty()) CRUX_RETURN_IF_ERROR(Authenticate(base));
    int code = 0;
    auto r = PostOnce(base + path, payload, &code);
    if (r.ok() || options_.user.empty() || code != kGrpcUnauthenticated) return r;
    token_.clear();
    CRUX_RETURN_IF_ERROR(Authenticate(base));
    return PostOnce(base + path, payload, &code);
  }

  core::Status Authenticate(const std::string& base) {
    const json body = {{"name", options_.user}, {"password", options_.password}};
    int code = 0;
    auto r = PostOnce(base + "/v3/auth/authenticate", body.dump(), &code, /*authenticate=*/true);
    if (!r.ok()) {
      // Unreachable, or refused for another reason than the user (a certificate's CN): as is.
      if (r.status().code() == core::StatusCode::kUnavailable ||
          r.status().code() == core::StatusCode::kFailedPrecondition) {
        return r.status();
      }
      return core::FailedPreconditionError(
          "etcd refused user " + core::QuoteName(options_.user) +
          " (check ha.etcd_auth: user and password): " + r.status().message());
    }
    token_ = r->value("token", std::string());
    if (token_.empty()) return core::InternalError("etcd authenticate: no token in the answer");
    return core::Status::Ok();
  }

  // Sets the TLS options of the next request (https:// endpoints): the members are verified
  // against ca_file only, host name included; the client certificate when one is configured.
  void SetTlsOptions() {
    curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(curl_, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    curl_easy_setopt(curl_, CURLOPT_CAINFO, options_.ca_file.c_str());
    curl_easy_setopt(curl_, CURLOPT_CAPATH, nullptr);  // Not the system's CA directory.
#if LIBCURL_VERSION_NUM >= 0x075700
    curl_easy_setopt(curl_, CURLOPT_CA_CACHE_TIMEOUT, 0L);  // A new connection reads ca_file.
#endif
    if (!options_.cert_file.empty()) {
      curl_easy_setopt(curl_, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(curl_, CURLOPT_SSLCERT, options_.cert_file.c_str());
      curl_easy_setopt(curl_, CURLOPT_SSLKEYTYPE, "PEM");
      curl_easy_setopt(curl_, CURLOPT_SSLKEY, options_.key_file.c_str());
    }
  }

  // A failed transfer as a Status: kUnavailable (another member may do better), with what to
  // check when TLS failed.
  core::Status TransferError(const std::string& url, CURLcode rc, const char* detail) const {
    std::string what = curl_easy_strerror(rc);
    if (detail[0] != '\0') what += std::string(" (") + detail + ")";
    std::string tls;
    switch (rc) {
      case CURLE_PEER_FAILED_VERIFICATION:
        tls =
            "the member's certificate is not trusted: it must be signed by ha.etcd_tls.ca_file "
            "and name the endpoint's host or IP address";
        break;
      case CURLE_SSL_CERTPROBLEM:
        tls =
            "the client certificate or key cannot be used (ha.etcd_tls.cert_file, key_file: "
            "PEM, the key of that certificate)";
        break;
      case CURLE_SSL_CACERT_BADFILE:
        tls = "the CA file cannot be used (ha.etcd_tls.ca_file: PEM certificates)";
        break;
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
        if (url.rfind("https://", 0) == 0) {
          tls =
              "the handshake failed or the member closed the connection; with "
              "--client-cert-auth a member does so when the client presents no certificate "
              "or one not signed by a CA it trusts (ha.etcd_tls.cert_file, key_file)";
        }
        break;
      default:
        break;
    }
    if (!tls.empty()) return core::UnavailableError("etcd " + url + ": TLS: " + tls + ": " + what);
    return core::UnavailableError("etcd " + url + ": " + what);
  }

  // One POST. `*grpc_code` is the gRPC code of an error answer (0 otherwise). `authenticate`:
  // the auth call itself (sent without a token).
  core::Result<json> PostOnce(const std::string& url, const std::string& payload, int* grpc_code,
                              bool authenticate = false) {
    *grpc_code = 0;
    if (curl_ == nullptr) return core::InternalError("libcurl: no handle");
    std::string response;
    char detail[CURL_ERROR_SIZE] = {};
    curl_easy_reset(curl_);
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_POST, 1L);
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, payload.c_str());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &AppendBody);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &response);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    const long timeout_ms = static_cast<long>(options_.timeout.nanos() / 1'000'000);
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, std::max(1L, timeout_ms));
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, timeout_ms));
    curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, tls_ ? "https" : "http");
    // HTTP/1.1 over TLS too (libcurl would offer HTTP/2 by ALPN): the same gateway requests and
    // error answers as over http://.
    curl_easy_setopt(curl_, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    if (tls_) SetTlsOptions();
    struct curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    const std::string auth = "Authorization: " + token_;
    if (!authenticate && !token_.empty()) headers = curl_slist_append(headers, auth.c_str());
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
    const CURLcode rc = curl_easy_perform(curl_);
    long status = 0;
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, nullptr);
    if (rc != CURLE_OK) return TransferError(url, rc, detail);
    json r = json::parse(response, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded()) {
      const std::string what = "etcd " + url + ": HTTP " + std::to_string(status);
      // etcd 3.4 with auth enabled refuses, in plain text, any gateway request whose client
      // certificate has a Common Name (the gateway cannot pass the name on to the server).
      if (response.find("CommonName") != std::string::npos) {
        return core::FailedPreconditionError(
            what +
            ": etcd has auth enabled and refuses a client certificate with a Common Name "
            "on its JSON gateway: give cruxd a certificate without CN (subject e.g. "
            "\"/O=cruxd\") and an etcd user (ha.etcd_auth): " +
            response.substr(0, 200));
      }
      return core::UnavailableError(what + ", not JSON: " + response.substr(0, 200));
    }
    // Errors: a non-200 answer {"error", "code", "message"}, or on the streaming keepalive a
    // 200 answer {"error": {"grpc_code", "message"}}.
    auto err = r.find("error");
    if (status != 200 || err != r.end()) {
      std::string message = r.value("message", std::string());
      int code = r.value("code", 0);
      if (err != r.end() && err->is_object()) {
        message = err->value("message", message);
        code = err->value("grpc_code", code);
      } else if (message.empty() && err != r.end() && err->is_string()) {
        message = err->get<std::string>();
      }
      *grpc_code = code;
      const std::string what = "etcd " + url + ": HTTP " + std::to_string(status) + " " + message;
      // gRPC UNAVAILABLE (14), DEADLINE_EXCEEDED (4), or a server error: try another member.
      if (status >= 500 || code == 14 || code == 4) {
        if (tls_ && message == "connection closed") {
          return core::UnavailableError(
              what +
              " (over TLS also the answer of a member whose own certificate lacks "
              "extendedKeyUsage clientAuth: its gateway connects to itself with it)");
        }
        return core::UnavailableError(what);
      }
      // PERMISSION_DENIED (7), UNAUTHENTICATED (16), or a request without a user while etcd
      // has auth enabled: no other member answers differently.
      if (code == kGrpcPermissionDenied) {
        return core::FailedPreconditionError(what + " (the etcd user " +
                                             core::QuoteName(options_.user) +
                                             " needs readwrite on the /crux/<election>/ prefix)");
      }
      if (code == kGrpcUnauthenticated) return core::FailedPreconditionError(what);
      if (options_.user.empty() && message.find("user name is empty") != std::string::npos) {
        return core::FailedPreconditionError(
            what + " (etcd has auth enabled: cruxd needs a user, ha.etcd_auth)");
      }
      return core::InvalidArgumentError(what);
    }
    return r;
  }

  static constexpr int kGrpcPermissionDenied = 7;
  static constexpr int kGrpcUnauthenticated = 16;

  GatewayOptions options_;
  bool tls_ = false;  // https:// endpoints.
  size_t current_ = 0;
  CURL* curl_ = nullptr;
  std::string token_;  // etcd auth token ("" = none yet).
};

// "" when `path` can be opened for reading, else why not.
std::string Unreadable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::strerror(errno);
  std::fclose(f);
  return "";
}

}  // namespace

core::Result<std::unique_ptr<Etcd>> ConnectGateway(const GatewayOptions& options) {
  if (options.endpoints.empty()) return core::InvalidArgumentError("etcd: no endpoint");
  size_t https = 0;
  for (const std::string& e : options.endpoints) {
    if (e.rfind("https://", 0) == 0) {
      ++https;
    } else if (e.rfind("http://", 0) != 0) {
      return core::InvalidArgumentError("etcd endpoint \"" + e +
                                        "\": must start with http:// or https://");
    }
  }
  const bool tls = https > 0;
  if (tls && https != options.endpoints.size()) {
    return core::InvalidArgumentError("etcd endpoints: all http:// or all https://, not a mix");
  }
  const bool any_file =
      !options.ca_file.empty() || !options.cert_file.empty() || !options.key_file.empty();
  if (!tls && any_file) {
    return core::InvalidArgumentError(
        "ha.etcd_tls: given for http:// endpoints (the files would not be used): use https://");
  }
  if (tls && options.ca_file.empty()) {
    return core::InvalidArgumentError(
        "ha.etcd_tls.ca_file: required with https:// endpoints (the CA that signed the members' "
        "certificates)");
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return core::InvalidArgumentError(
        "ha.etcd_tls: cert_file and key_file go together (got only one)");
  }
  if (!options.user.empty() && (!tls || options.password.empty())) {
    return core::InvalidArgumentError("ha.etcd_auth: user " + core::QuoteName(options.user) +
                                      " needs https:// endpoints and a password");
  }
  const std::pair<const char*, const std::string*> files[] = {
      {"ha.etcd_tls.ca_file", &options.ca_file},
      {"ha.etcd_tls.cert_file", &options.cert_file},
      {"ha.etcd_tls.key_file", &options.key_file}};
  for (const auto& [key, path] : files) {
    if (path->empty()) continue;
    if (std::string why = Unreadable(*path); !why.empty()) {
      return core::InvalidArgumentError(std::string(key) + " " + core::QuoteName(*path) +
                                        ": cannot read it: " + why);
    }
  }
  GatewayOptions o = options;
  for (std::string& e : o.endpoints) {
    while (!e.empty() && e.back() == '/') e.pop_back();
  }
  return std::unique_ptr<Etcd>(new GatewayClient(std::move(o)));
}

}  // namespace crux::daemon::ha
