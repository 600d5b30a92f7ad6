// pybind11 binding `crux._crux` of the client library; the Python package `crux`
// (python/crux/__init__.py) adds `Client.iteration()` and the DDP helpers on top.
//
// GIL: blocking calls (construction, wait_for_assignment, close, destruction) release the GIL.
// The hot-path marks keep it (they cost well under a microsecond; releasing would cost more).
// The assignment callback runs on the library's background thread and takes the GIL.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "crux/client/client.h"
#include "crux/client/nccl.h"

namespace py = pybind11;
using crux::client::Assignment;
using crux::client::Client;
using crux::client::ClientOptions;

namespace {

// Owns the C++ client; destruction (which joins the background thread) releases the GIL so that
// a callback waiting for the GIL on that thread can finish.
struct PyClient {
  std::unique_ptr<Client> client;

  ~PyClient() {
    if (client) {
      py::gil_scoped_release release;
      client.reset();
    }
  }
  Client& get() {
    if (!client) throw std::runtime_error("crux.Client is closed");
    return *client;
  }
};

py::dict AssignmentDict(const Assignment& a) {
  py::dict d;
  d["epoch"] = a.epoch;
  d["level"] = a.level;
  d["dscp"] = a.dscp;
  d["traffic_class"] = a.traffic_class;
  d["state"] = a.state;
  py::list flows;
  for (const auto& f : a.flows) {
    py::dict fd;
    fd["src_nic"] = f.src_nic;
    fd["dst_nic"] = f.dst_nic;
    fd["udp_sport"] = f.udp_sport;
    fd["path"] = f.path;
    flows.append(fd);
  }
  d["flows"] = flows;
  d["nccl_env"] = a.nccl_env;
  d["sent_unix_ns"] = a.sent_unix_ns;
  d["received_unix_ns"] = a.received_unix_ns;
  d["state_id"] = a.state_id;
  return d;
}

py::object OptAssignment(const std::optional<Assignment>& a) {
  if (!a) return py::none();
  return AssignmentDict(*a);
}

py::dict StatsDict(const crux::client::ClientStats& s) {
  py::dict d;
  d["registered"] = s.registered;
  d["registrations"] = s.registrations;
  d["register_failures"] = s.register_failures;
  d["reports_sent"] = s.reports_sent;
  d["heartbeats_sent"] = s.heartbeats_sent;
  d["assignments_applied"] = s.assignments_applied;
  d["assignments_stale"] = s.assignments_stale;
  d["events_dropped"] = s.events_dropped;
  d["iterations"] = s.iterations;
  d["lease_ms"] = s.lease_ms;
  d["last_error"] = s.last_error;
  d["state_resets"] = s.state_resets;
  d["rebinds"] = s.rebinds;
  d["quota_refusals"] = s.quota_refusals;
  d["reconnects"] = s.reconnects;
  return d;
}

std::vector<crux::client::HostPlacement> Placement(const std::vector<std::string>& hosts,
                                                   py::object gpus_per_host) {
  std::vector<crux::client::HostPlacement> out;
  std::vector<uint32_t> gpus;
  if (py::isinstance<py::int_>(gpus_per_host)) {
    gpus.assign(hosts.size(), gpus_per_host.cast<uint32_t>());
  } else {
    gpus = gpus_per_host.cast<std::vector<uint32_t>>();
    if (gpus.size() != hosts.size()) {
      throw py::value_error("gpus_per_host: " + std::to_string(gpus.size()) + " entries for " +
                            std::to_string(hosts.size()) + " hosts");
    }
  }
  for (size_t i = 0; i < hosts.size(); ++i) out.push_back({hosts[i], gpus[i], {}});
  return out;
}

}  // namespace

PYBIND11_MODULE(_crux, m) {
  m.doc() = "Crux job-side client library (native part; use the `crux` package)";

  py::class_<PyClient>(m, "Client")
      .def(py::init([](const std::string& endpoint, const std::string& job_id,
                       const std::vector<std::string>& hosts, py::object gpus_per_host,
                       double flops_per_iteration, double gpu_peak_flops, uint32_t lease_ms,
                       const std::string& model, const std::string& pattern,
                       uint64_t bytes_per_iteration, bool end_job_on_close, int64_t call_timeout_ms,
                       int64_t reconnect_min_ms, int64_t reconnect_max_ms,
                       const std::string& tenant, const std::string& server_public_key,
                       const std::string& client_public_key, const std::string& client_secret_key) {
             ClientOptions o;
             o.endpoint = endpoint;
             o.job_id = job_id;
             o.placement = Placement(hosts, std::move(gpus_per_host));
             o.flops_per_iteration = flops_per_iteration;
             o.gpu_peak_flops = gpu_peak_flops;
             o.lease_ms = lease_ms;
             o.model = model;
             o.pattern = pattern;
             o.bytes_per_iteration = bytes_per_iteration;
             o.end_job_on_close = end_job_on_close;
             o.call_timeout_ms = call_timeout_ms;
             o.reconnect_min_ms = reconnect_min_ms;
             o.reconnect_max_ms = reconnect_max_ms;
             o.tenant = tenant;
             o.server_public_key = server_public_key;
             o.client_public_key = client_public_key;
             o.client_secret_key = client_secret_key;
             crux::core::Result<std::unique_ptr<Client>> c = [&] {
               py::gil_scoped_release release;
               return Client::Start(std::move(o));
             }();
             if (!c.ok()) throw py::value_error(c.status().ToString());
             auto pc = std::make_unique<PyClient>();
             pc->client = std::move(*c);
             return pc;
           }),
           py::arg("endpoint"), py::arg("job_id"), py::arg("hosts"), py::arg("gpus_per_host") = 1,
           py::arg("flops_per_iteration") = 0.0, py::arg("gpu_peak_flops") = 0.0,
           py::arg("lease_ms") = 0, py::arg("model") = "", py::arg("pattern") = "",
           py::arg("bytes_per_iteration") = 0, py::arg("end_job_on_close") = true,
           py::arg("call_timeout_ms") = 2000, py::arg("reconnect_min_ms") = 100,
           py::arg("reconnect_max_ms") = 10000, py::arg("tenant") = "",
           py::arg("server_public_key") = "", py::arg("client_public_key") = "",
           py::arg("client_secret_key") = "")
      .def(
          "add_peer",
          [](PyClient& c, const std::string& local, const std::string& remote) {
            auto id = c.get().AddPeer(local, remote);
            if (!id.ok()) throw py::value_error(id.status().ToString());
            return *id;
          },
          py::arg("local_nic"), py::arg("remote_nic"),
          "Declares a peer (local NIC -> remote NIC); returns its id for comm_start/comm_end.")
      .def("begin_iteration", [](PyClient& c) { c.get().BeginIteration(); })
      .def("end_iteration", [](PyClient& c) { c.get().EndIteration(); })
      .def("compute_end", [](PyClient& c) { c.get().ComputeEnd(); })
      .def(
          "comm_start",
          [](PyClient& c, uint32_t peer, uint64_t bytes) { c.get().CommStart(peer, bytes); },
          py::arg("peer"), py::arg("bytes"))
      .def(
          "comm_end", [](PyClient& c, uint32_t peer) { c.get().CommEnd(peer); }, py::arg("peer"))
      .def(
          "record_comm",
          [](PyClient& c, uint32_t peer, uint64_t bytes, int64_t start_ns, int64_t end_ns) {
            c.get().RecordComm(peer, bytes, start_ns, end_ns);
          },
          py::arg("peer"), py::arg("bytes"), py::arg("start_ns"), py::arg("end_ns"))
      .def("assignment", [](PyClient& c) { return OptAssignment(c.get().CurrentAssignment()); })
      .def(
          "wait_for_assignment",
          [](PyClient& c, uint64_t after_epoch, double timeout_s,
             std::optional<uint64_t> after_state_id) {
            Client& client = c.get();
            const auto timeout_ms = static_cast<int64_t>(timeout_s * 1000.0);
            std::optional<Assignment> a;
            {
              py::gil_scoped_release release;
              a = after_state_id
                      ? client.WaitForAssignment(after_epoch, *after_state_id, timeout_ms)
                      : client.WaitForAssignment(after_epoch, timeout_ms);
            }
            return OptAssignment(a);
          },
          py::arg("after_epoch") = 0, py::arg("timeout_s") = 10.0,
          py::arg("after_state_id") = py::none(),
          "Waits (GIL released) for an assignment with epoch > after_epoch; None on timeout.\n"
          "With after_state_id: for one newer than (after_epoch, after_state_id), i.e. another\n"
          "state_id or a greater epoch (exact across a daemon state reset). Without it, a reset\n"
          "does not hang the wait either (see Client::WaitForAssignment in client.h).")
      .def(
          "on_assignment",
          [](PyClient& c, py::object callback) {
            if (callback.is_none()) {
              c.get().SetAssignmentCallback(nullptr);
              return;
            }
            // The Python callable is released under the GIL whichever thread drops it.
            auto holder =
                std::shared_ptr<py::object>(new py::object(std::move(callback)), [](py::object* p) {
                  py::gil_scoped_acquire acquire;
                  delete p;
                });
            c.get().SetAssignmentCallback([holder](const Assignment& a) {
              py::gil_scoped_acquire acquire;
              try {
                (*holder)(AssignmentDict(a));
              } catch (py::error_already_set& e) {
                e.discard_as_unraisable("crux assignment callback");
              }
            });
          },
          py::arg("callback"),
          "Calls callback(assignment_dict) on the library thread for every new assignment.")
      .def("profile",
           [](PyClient& c) -> py::object {
             auto p = c.get().LastReportedProfile();
             if (!p) return py::none();
             py::dict d;
             d["iteration_period_ns"] = p->iteration_period_ns;
             d["compute_time_ns"] = p->compute_time_ns;
             d["comm_time_ns"] = p->comm_time_ns;
             d["overlap_start"] = p->overlap_start;
             d["flops_per_iteration"] = p->flops_per_iteration;
             d["bytes_per_iteration"] = p->bytes_per_iteration;
             d["samples"] = p->samples;
             d["converged"] = p->converged;
             d["detected"] = p->detected;
             py::list peers;
             for (const auto& b : p->peers) {
               py::dict pd;
               pd["local_nic"] = b.local_nic;
               pd["remote_nic"] = b.remote_nic;
               pd["bytes"] = b.bytes;
               peers.append(pd);
             }
             d["peers"] = peers;
             return d;
           })
      .def("stats", [](PyClient& c) { return StatsDict(c.get().Stats()); })
      .def(
          "wait_for_stats",
          [](PyClient& c, py::object predicate, double timeout_s) {
            Client& client = c.get();
            std::optional<py::error_already_set> error;
            bool ok = false;
            {
              py::gil_scoped_release release;
              // The library evaluates the predicate on this thread without its locks held.
              ok = client.WaitForStats(
                  [&](const crux::client::ClientStats& s) {
                    py::gil_scoped_acquire acquire;
                    try {
                      py::object r = predicate(StatsDict(s));
                      const int truth = PyObject_IsTrue(r.ptr());
                      if (truth < 0) throw py::error_already_set();
                      return truth == 1;
                    } catch (py::error_already_set& e) {
                      error.emplace(std::move(e));
                      return true;
                    }
                  },
                  static_cast<int64_t>(timeout_s * 1000.0));
            }
            if (error) throw std::move(*error);
            return ok;
          },
          py::arg("predicate"), py::arg("timeout_s") = 10.0,
          "Waits (GIL released) until predicate(stats_dict) is true, re-evaluated whenever the\n"
          "library's stats change; returns whether it became true before timeout_s.")
      .def(
          "nccl_env",
          [](PyClient& c, uint32_t ecn_bits) -> py::object {
            auto a = c.get().CurrentAssignment();
            if (!a) return py::none();
            crux::client::NcclOptions o;
            o.ecn_bits = ecn_bits & 3u;
            return py::cast(crux::client::NcclEnvironment(*a, o));
          },
          py::arg("ecn_bits") = 0,
          "NCCL environment (NCCL_IB_TC, ...) for the current assignment, or None.")
      .def("close",
           [](PyClient& c) {
             if (!c.client) return;
             std::unique_ptr<Client> client = std::move(c.client);
             py::gil_scoped_release release;
             client.reset();
           })
      .def(
          "_abandon_after_fork",
          [](PyClient& c) {
            // In a fork()ed child the background thread does not exist: joining it would hang,
            // so the native client is leaked (the child owns no socket work of its own).
            (void)c.client.release();
          },
          "Internal: called in fork()ed children (os.register_at_fork).")
      .def_property_readonly("closed", [](const PyClient& c) { return !c.client; });

  m.def("now_ns", &Client::NowNs, "steady-clock ns, the clock of record_comm");
}
