#include "crux/daemon/ha/election.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

namespace crux::daemon::ha {

using json = nlohmann::json;

const char* RoleName(Role r) {
  switch (r) {
    case Role::kCampaigning:
      return "campaigning";
    case Role::kStandby:
      return "standby";
    case Role::kLeader:
      return "leader";
    case Role::kDeposed:
      return "deposed";
  }
  return "unknown";
}

namespace {

Member MemberOf(const KeyValue& kv) {
  Member m;
  m.create_revision = kv.create_revision;
  json v = json::parse(kv.value, nullptr, /*allow_exceptions=*/false);
  if (v.is_object()) {
    m.instance = v.value("instance", std::string());
    m.client_endpoint = v.value("client_endpoint", std::string());
    m.admin_endpoint = v.value("admin_endpoint", std::string());
  }
  if (m.instance.empty()) m.instance = kv.key;
  return m;
}

}  // namespace

int64_t LeaderElection::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

LeaderElection::LeaderElection(ElectionOptions options, std::unique_ptr<Etcd> etcd, Elected elected,
                               Deposed deposed)
    : options_(std::move(options)),
      etcd_(std::move(etcd)),
      elected_(std::move(elected)),
      deposed_(std::move(deposed)),
      margin_ns_(options_.ttl.nanos() / 6) {
  thread_ = std::thread([this] { Run(); });
}

LeaderElection::~LeaderElection() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LeaderElection::MayAct() const {
  return leader_.load() && NowNs() < deadline_ns_.load() - margin_ns_;
}

std::string LeaderElection::key() const {
  std::lock_guard<std::mutex> lock(mu_);
  return key_;
}

ElectionView LeaderElection::view() const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_;
}

void LeaderElection::SetError(const char* op, const std::string& e) {
  std::lock_guard<std::mutex> lock(mu_);
  view_.last_error = e;
  ++view_.etcd_errors[op];
}

void LeaderElection::Notify() {
  if (options_.on_view) options_.on_view(view());
}

void LeaderElection::Resign() {
  if (leader_.exchange(false)) {  // The fence closes first.
    std::lock_guard<std::mutex> lock(mu_);
    ++view_.fence_closes["resigned"];
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (lease_ != 0) {
    if (core::Status s = etcd_->Revoke(lease_); !s.ok()) {
      SetError("revoke", s.ToString());
      spdlog::warn("ha: could not revoke lease {:x} (it expires by itself): {}", lease_,
                   s.ToString());
    } else {
      spdlog::info("ha: resigned (lease {:x} revoked)", lease_);
    }
    lease_ = 0;
  }
}

void LeaderElection::Depose(const std::string& why, const char* reason) {
  const bool was_leading = leader_.exchange(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    view_.role = Role::kDeposed;
    if (was_leading) ++view_.fence_closes[reason];
  }
  Notify();
  if (!deposed_called_) {
    deposed_called_ = true;
    if (deposed_) deposed_(why);
  }
}

core::Status LeaderElection::Campaign() {
  const int64_t ttl_s = std::max<int64_t>(1, options_.ttl.nanos() / 1'000'000'000);
  const int64_t sent = NowNs();
  CRUX_ASSIGN_OR_RETURN(LeaseGrant g, etcd_->Grant(ttl_s));
  char hex[24];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(g.id));
  const std::string key = options_.prefix + "/election/" + hex;
  const json value = {{"instance", options_.instance},
                      {"client_endpoint", options_.client_endpoint},
                      {"admin_endpoint", options_.admin_endpoint},
                      {"pid", static_cast<int64_t>(::getpid())}};
  Compare absent{key, Compare::Target::kCreateRevision, Compare::Op::kEqual, 0, {}};
  CRUX_ASSIGN_OR_RETURN(
      TxnResult r, etcd_->Txn({absent}, {TxnOp::Put(key, value.dump(), g.id)}, {TxnOp::Get(key)}));
  (void)r;
  lease_ = g.id;
  deadline_ns_.store(sent + g.ttl_s * 1'000'000'000);
  next_keepalive_ns_ = sent + options_.ttl.nanos() / 3;
  std::lock_guard<std::mutex> lock(mu_);
  key_ = key;
  view_.role = Role::kStandby;
  spdlog::info("ha: campaigning as {} with key {} (lease TTL {} s) via {}", options_.instance, key,
               g.ttl_s, etcd_->endpoint());
  return core::Status::Ok();
}

bool LeaderElection::Step() {
  const bool leading = leader_.load();
  if (lease_ == 0) {
    if (core::Status s = Campaign(); !s.ok()) {
      SetError("campaign", s.ToString());
      spdlog::warn("ha: cannot campaign: {}", s.ToString());
      // Run waits a poll before the next try (a refused connection or TLS handshake fails at
      // once: without this the thread would retry in a tight loop).
      next_keepalive_ns_ = NowNs() + options_.poll.nanos();
      return true;
    }
  }
  int64_t now = NowNs();
  if (now >= next_keepalive_ns_) {
    const int64_t sent = now;
    auto ttl = etcd_->KeepAlive(lease_);
    next_keepalive_ns_ = sent + options_.ttl.nanos() / 3;
    if (!ttl.ok()) {
      SetError("keepalive", ttl.status().ToString());
      spdlog::warn("ha: lease keep-alive failed: {}", ttl.status().ToString());
      // Retry soon: the deadline decides what that costs.
      next_keepalive_ns_ = sent + std::min(options_.ttl.nanos() / 3, options_.poll.nanos());
    } else if (*ttl <= 0) {
      if (leading) {
        Depose("the lease expired in etcd", "deposed");
        return false;
      }
      spdlog::warn("ha: lease {:x} expired; campaigning again", lease_);
      lease_ = 0;
      return true;
    } else {
      deadline_ns_.store(sent + *ttl * 1'000'000'000);
    }
  }
  now = NowNs();
  if (leading && now >= deadline_ns_.load() - margin_ns_) {
    Depose("the lease could not be renewed before it expires", "lease");
    return false;
  }
  const std::string prefix = options_.prefix + "/election/";
  auto range = etcd_->Range(prefix, PrefixEnd(prefix), /*by_create_revision=*/true);
  if (!range.ok()) {
    SetError("list", range.status().ToString());
    return true;
  }
  std::string my_key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    my_key = key_;
  }
  std::vector<Member> members;
  int64_t mine = 0;
  for (const KeyValue& kv : range->kvs) {
    members.push_back(MemberOf(kv));
    if (kv.key == my_key) mine = kv.create_revision;
  }
  if (!members.empty()) members.front().leader = true;
  const bool lowest = mine != 0 && range->kvs.front().key == my_key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    view_.members = members;
    view_.last_error.clear();
    view_.leader = members.empty() ? "" : members.front().instance;
    view_.leader_client_endpoint = members.empty() ? "" : members.front().client_endpoint;
    view_.term = members.empty() ? 0 : members.front().create_revision;
    if (view_.term != 0) {
      if (last_leader_term_ != 0 && view_.term != last_leader_term_) ++view_.leader_changes;
      last_leader_term_ = view_.term;
    }
  }
  if (leading) {
    if (mine == 0) {
      Depose("the election key is gone from etcd", "deposed");
      return false;
    }
    if (!lowest) {
      Depose("another instance holds a lower election revision", "deposed");
      return false;
    }
    return true;
  }
  if (mine == 0) {
    spdlog::warn("ha: election key {} is gone; campaigning again", my_key);
    lease_ = 0;
    return true;
  }
  if (lowest && NowNs() < deadline_ns_.load() - margin_ns_) {
    term_.store(mine);
    leader_.store(true);
    {
      std::lock_guard<std::mutex> lock(mu_);
      view_.role = Role::kLeader;
    }
    spdlog::info("ha: {} leads, term {}", options_.instance, mine);
    if (elected_) elected_(mine);
  }
  return true;
}

void LeaderElection::Run() {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    const bool go_on = Step();
    Notify();
    if (!go_on) return;
    const int64_t now = NowNs();
    int64_t wait = std::min(options_.poll.nanos(), std::max<int64_t>(0, next_keepalive_ns_ - now));
    if (leader_.load()) {
      wait = std::min(wait, std::max<int64_t>(0, deadline_ns_.load() - margin_ns_ - now));
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::nanoseconds(wait), [this] { return stop_; });
    if (stop_) return;
  }
}

}  // namespace crux::daemon::ha
