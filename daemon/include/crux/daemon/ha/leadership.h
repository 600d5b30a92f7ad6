// Leadership: one cruxd instance's part in high availability (docs/daemon.md "High
// availability"), between the election on etcd (election.h) and the App that serves:
//
//   Campaign   -> LeaderElection on etcd, advertising this instance's client and admin endpoints.
//   elected    -> (loop thread) opens the shared state: the local state file behind a SharedStore
//                 on etcd, guarded by this instance's election key and term, and hands it to
//                 `on_lead`, which starts the daemon on it.
//   deposed, or elected but unable to serve
//              -> the process exits at once with kExitDeposed, like a kill -9 (which cruxd
//                 survives), so that systemd starts it again as a standby: no store write or push
//                 of this process can follow.
//
// While it stands by, the instance answers its admin endpoint itself (StandbyReply): `status`
// with what a standby knows, anything else with an error naming the leader.
//
// Metrics: the crux_ha_* series (Metrics::EnableHa) follow the election's view after every
// campaign round (role, term, leader changes, etcd errors, fence closes) and the shared state's
// etcd failures and refused writes.
//
// Thread-safety: construction, Campaign, StandbyReply and the destructor on the loop thread;
// MayAct, FillStatus and Resign from any thread (MayAct is the client endpoint's fence).
#ifndef CRUX_DAEMON_HA_LEADERSHIP_H_
#define CRUX_DAEMON_HA_LEADERSHIP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/daemon/config/config.h"
#include "crux/daemon/ha/election.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/runtime/metrics.h"
#include "crux/daemon/store/store.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon::ha {

// Exit code of a deposed leader: systemd (Restart=on-failure) starts it again as a standby.
inline constexpr int kExitDeposed = 75;  // EX_TEMPFAIL.

// The etcd settings of `ha` as Campaign uses them, without contacting etcd (--check-config):
// the endpoints and TLS/auth settings (ConnectGateway: the TLS files readable), and the password
// file (its first line, not empty, the file not readable by group or others). Errors
// (kInvalidArgument) name the config key and file.
core::Status CheckEtcdSettings(const HaConfig& ha);

class Leadership {
 public:
  // On the loop thread, once: this instance leads in `term`, on `store` (the shared state). An
  // error (the daemon cannot start) makes the instance resign and exit.
  using LeadCallback = std::function<core::Status(int64_t term, std::unique_ptr<Store> store)>;

  // `config.ha` must be enabled; `loop` and `metrics` (may be null) must outlive this. Nothing is
  // contacted before Campaign.
  Leadership(const DaemonConfig& config, StoreOpenOptions store_options, EventLoop* loop,
             Metrics* metrics, LeadCallback on_lead);
  // Stops the campaign (joins its thread): nothing is posted to the loop afterwards.
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // Connects to etcd and starts campaigning, advertising `admin_endpoint` (as bound). Errors:
  // those of CheckEtcdSettings.
  core::Status Campaign(const std::string& admin_endpoint);

  // This instance's name (ha.instance, else the host name).
  const std::string& instance() const { return instance_; }
  // True only while this instance leads and is sure of its lease (LeaderElection::MayAct).
  bool MayAct() const;
  // Steps down now (a clean stop): the lease is revoked, so a standby leads at once.
  void Resign();

  // The HA part of a status reply: this instance, its role, the term, the members.
  void FillStatus(v1::HaStatus* out) const;
  // A standby's reply to an admin request: `status` with what a standby knows (`uptime`, the
  // `topology` source and the config) and the HA part; anything else UNAVAILABLE, naming the
  // leader and its endpoints when one is known.
  v1::Envelope StandbyReply(const v1::Envelope& request, core::Duration uptime,
                            const std::string& topology) const;

 private:
  // Loop thread: the campaign won (`term`). Opens the shared state and calls on_lead.
  void Elected(int64_t term);
  // Resigns and exits the process (an instance that won but cannot serve).
  [[noreturn]] void Abdicate(const core::Status& why);
  // Campaign thread: exports `v` to the metrics (counters as increments since the last view).
  void ExportView(const ElectionView& v);

  const DaemonConfig config_;
  const StoreOpenOptions store_options_;
  EventLoop* loop_;
  Metrics* metrics_;
  LeadCallback on_lead_;
  const std::string instance_;
  bool elected_ = false;
  std::unique_ptr<LeaderElection> election_;  // Null before Campaign.
  ElectionView exported_;                     // The last view ExportView saw (campaign thread).
};

}  // namespace crux::daemon::ha

#endif  // CRUX_DAEMON_HA_LEADERSHIP_H_
