#include "crux/loadgen/cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <functional>
#include <iomanip>
#include <string>
#include <vector>

#include "crux/core/base/text.h"
#include "crux/loadgen/flow_model.h"
#include "crux/loadgen/runner.h"
#include "crux/loadgen/workload.h"
#include "crux/protocol/curve.h"
#include "crux/spec/topology_spec.h"

namespace crux::loadgen {

namespace {

// A ZeroMQ context for `connections` DealerClients.
protocol::TransportContextOptions ContextFor(size_t connections) {
  protocol::TransportContextOptions co;
  co.io_threads = connections > 1000 ? 2 : 1;
  co.max_sockets = static_cast<int>(connections) * protocol::kSocketsPerClient + 64;
  return co;
}

// Runs `jobs` in this process with its own ZeroMQ context.
core::Result<RunSummary> RunSlice(const std::vector<SimJob>& jobs, const LoadGenOptions& options,
                                  const std::atomic<bool>* stop) {
  protocol::TransportContext ctx(ContextFor(jobs.size()));
  return RunLoad(ctx, jobs, options, stop);
}

// Runs the agents [begin, end) of `agents` in this process with its own ZeroMQ context.
core::Result<RunSummary> RunAgentSlice(const std::vector<SimJob>& jobs,
                                       const std::vector<SimAgent>& agents, size_t begin,
                                       size_t end, const LoadGenOptions& options,
                                       const std::atomic<bool>* stop) {
  std::vector<SimAgent> slice(agents.begin() + static_cast<long>(begin),
                              agents.begin() + static_cast<long>(end));
  protocol::TransportContext ctx(ContextFor(slice.size()));
  return RunHostAgents(ctx, jobs, slice, options, stop);
}

// Runs the items [begin, end) (jobs, or agents) of one worker with the worker's options.
using SliceRunner =
    std::function<core::Result<RunSummary>(size_t begin, size_t end, const LoadGenOptions&)>;

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Forks `workers` processes (before any ZeroMQ context or thread exists in this process), each
// running a contiguous slice of the `n` jobs (or agents) through `run`; each child reports its
// summary (lossless JSON) over a pipe, and the parent merges them. Every process has its own
// open-file limit.
core::Result<RunSummary> RunWorkers(size_t n, LoadGenOptions options, int workers,
                                    std::ostream& err, const SliceRunner& run) {
  struct Child {
    pid_t pid;
    int fd;
  };
  std::vector<Child> children;
  err.flush();
  for (int w = 0; w < workers; ++w) {
    const size_t begin = n * static_cast<size_t>(w) / static_cast<size_t>(workers);
    const size_t end = n * static_cast<size_t>(w + 1) / static_cast<size_t>(workers);
    int fds[2];
    if (::pipe(fds) != 0) return core::UnavailableError("pipe failed");
    pid_t pid = ::fork();
    if (pid < 0) return core::UnavailableError("fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      for (const Child& c : children) ::close(c.fd);
      if (options.log) {
        auto parent_log = options.log;
        options.log = [parent_log, w](const std::string& line) {
          parent_log("worker " + std::to_string(w) + ": " + line);
        };
      }
      options.seed = options.seed * 1000003 + static_cast<uint64_t>(w);
      auto result = run(begin, end, options);
      int rc = 0;
      if (result.ok()) {
        rc = WriteAll(fds[1], result->ToWireJson().dump()) ? 0 : 1;
      } else {
        err << "crux-loadgen: worker " << w << ": " << result.status().message() << "\n";
        err.flush();
        rc = 1;
      }
      ::close(fds[1]);
      ::_exit(rc);
    }
    ::close(fds[1]);
    children.push_back(Child{pid, fds[0]});
  }
  RunSummary total;
  total.workers = 0;
  core::Status failure;
  for (size_t w = 0; w < children.size(); ++w) {
    const std::string text = ReadAll(children[w].fd);
    ::close(children[w].fd);
    int status = 0;
    ::waitpid(children[w].pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || text.empty()) {
      failure = core::UnavailableError("worker " + std::to_string(w) + " failed");
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    auto part = RunSummary::FromWireJson(j);
    if (!part.ok()) {
      failure = part.status();
      continue;
    }
    total.Merge(*part);
  }
  if (total.workers == 0)
    return failure.ok() ? core::UnavailableError("no worker result") : failure;
  if (!failure.ok()) err << "crux-loadgen: " << failure.message() << " (partial summary)\n";
  return total;
}

// What an operator can do about a registration failure reason (RunSummary::register_failures).
std::string RegisterFailureAdvice(const std::string& reason) {
  if (reason == "ERROR_CODE_RESOURCE_EXHAUSTED") {
    return "a quota of the daemon is reached (jobs per connection or per client key): fewer "
           "--jobs, or more client keys";
  }
  if (reason == "ERROR_CODE_UNAVAILABLE") return "the daemon is shutting down or overloaded";
  if (reason == "ERROR_CODE_UNKNOWN_HOST") return "is --topology the daemon's topology?";
  if (reason == "ERROR_CODE_CONFLICT") {
    return "the job ids are registered with another placement (another crux-loadgen with the "
           "same --job-prefix and --seed?)";
  }
  if (reason == "ERROR_CODE_PERMISSION_DENIED") {
    return "the jobs belong to another client key";
  }
  if (reason == "TIMEOUT" || reason == "NO_REPLY") {
    return "no answer: is --endpoint right, and are the CURVE keys authorised by the daemon?";
  }
  if (reason == "SEND_FAILED") return "the messages could not be queued";
  return "";
}

// "8 of 8 jobs: ERROR_CODE_RESOURCE_EXHAUSTED 8 (a quota ...; e.g. \"...\")"; escaped for a
// terminal (the examples are the daemon's text).
std::string DescribeRegisterFailures(const RunSummary& s) {
  std::string out = std::to_string(s.register_failed) + " of " + std::to_string(s.jobs) + " jobs";
  bool first = true;
  for (const auto& [reason, f] : s.register_failures) {
    out += first ? ": " : "; ";
    first = false;
    out += core::EscapeForTerminal(reason) + " " + std::to_string(f.jobs);
    const std::string advice = RegisterFailureAdvice(reason);
    std::string detail = advice;
    if (!f.example.empty()) {
      detail += (detail.empty() ? "" : "; ") + std::string("e.g. \"") +
                core::EscapeForTerminal(f.example) + "\"";
    }
    if (!detail.empty()) out += " (" + detail + ")";
  }
  return out;
}

// JSON for stdout: ASCII only (non-ASCII and control characters in the daemon's messages are
// \u-escaped), invalid UTF-8 replaced instead of throwing.
std::string DumpJson(const nlohmann::json& doc) {
  return doc.dump(2, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           const std::atomic<bool>* stop) {
  CLI::App app{"crux-loadgen: plays N training jobs' clients against a running cruxd"};
  std::string endpoint = "tcp://127.0.0.1:7450";
  std::string server_key, client_key, topology;
  bool insecure = false, benchmark = false, end_jobs = false, json = false, quiet = false;
  bool no_host_batches = false;
  int jobs = 8, inflight = 0, ack_every = 1, gpus_per_host = 8, workers = 0;
  double duration_s = 30;
  int64_t report_interval_ms = -1, heartbeat_ms = 0, lease_ms = 0, timeout_ms = 5000;
  uint64_t seed = 1;
  double jitter_pct = 2;
  std::string prefix = "lg";
  bool flow_stats = false;
  double flow_gbps = 100;
  std::vector<std::string> fault_specs;
  int hostd_agents = 0, arrivals = 0;
  int64_t arrival_interval_ms = 5000;
  app.add_option("--endpoint", endpoint, "cruxd client endpoint")->capture_default_str();
  app.add_option("--server-key", server_key, "daemon public key file (.pub) for CurveZMQ");
  app.add_option("--client-key", client_key, "own secret key file (.key, mode 0600)");
  app.add_flag("--insecure", insecure, "plain ZeroMQ without CURVE (labs only)");
  app.add_option("--topology", topology, "topology YAML (the daemon's), hosts are taken from it")
      ->required();
  app.add_option("--jobs", jobs, "simulated jobs (one DEALER socket each)")->capture_default_str();
  app.add_option("--duration-s", duration_s,
                 "seconds to run in all, registration included (0 = until ^C)")
      ->capture_default_str();
  app.add_option("--report-interval-ms", report_interval_ms,
                 "profile report interval per job (0 = back to back; default 5000, "
                 "benchmark 0)");
  app.add_option("--heartbeat-ms", heartbeat_ms, "heartbeat interval (0 = lease / 3)");
  app.add_option("--lease-ms", lease_ms, "requested lease (0 = daemon default)");
  app.add_option("--timeout-ms", timeout_ms, "request timeout")->capture_default_str();
  app.add_option("--seed", seed, "workload seed")->capture_default_str();
  app.add_option("--jitter-pct", jitter_pct,
                 "noise on reported compute time / period in percent (0 = stable profiles)")
      ->capture_default_str();
  app.add_flag("--benchmark", benchmark,
               "measure report ingestion rate and push latency; prints JSON");
  app.add_option("--inflight", inflight,
                 "outstanding reports per job (default 1; benchmark: 2 below 2000 jobs)");
  app.add_option("--ack-every", ack_every,
                 "ask for an Ack on every Nth profile report only; the N-1 before it are sent "
                 "quiet (cruxd answers them only when it refuses them; --inflight counts the "
                 "acknowledged ones)")
      ->capture_default_str();
  app.add_option("--job-prefix", prefix, "job id prefix")->capture_default_str();
  app.add_option("--gpus-per-host", gpus_per_host, "GPUs per host per job")->capture_default_str();
  app.add_option("--workers", workers,
                 "processes to spread the jobs over (0 = as many as the open-file limit needs)");
  app.add_flag("--end-jobs", end_jobs, "send EndJob for every job at the end");
  app.add_flag("--json", json, "print the summary as JSON");
  app.add_flag("--no-host-batches", no_host_batches,
               "--hostd: the parts register without HostPart.accepts_batches (as crux-hostd "
               "before batching), so cruxd pushes one Assignment per part");
  app.add_flag("--quiet", quiet, "no progress lines");
  app.add_flag("--flow-stats", flow_stats,
               "report every pinned flow's bytes, transfer time and transport errors with the "
               "heartbeats (docs/faults.md)");
  app.add_option("--flow-gbps", flow_gbps, "line rate of the simulated flows (--flow-stats)")
      ->capture_default_str();
  uint64_t probe_bytes = 65536;
  app.add_option("--probe-bytes", probe_bytes,
                 "bytes each probe of an assignment sends per heartbeat (--flow-stats)")
      ->capture_default_str();
  std::vector<std::string> lie_specs;
  app.add_option("--lie", lie_specs,
                 "JOB:FRACTION[@AFTER_S]: job JOB reports every flow at FRACTION of its rate (0: "
                 "no progress) from AFTER_S on, whatever its paths cross (a lying tenant); "
                 "implies --flow-stats; repeatable");
  app.add_option("--fault", fault_specs,
                 "LINK:FRACTION[@AFTER_S[+DURATION_S]]: slow (FRACTION of the rate) or cut (0) the "
                 "flows whose pinned path crosses LINK ('a->b' or 'a-b'), from AFTER_S for "
                 "DURATION_S (default: to the end); implies --flow-stats; repeatable");
  app.add_option("--hostd", hostd_agents,
                 "play N crux-hostd agents (one connection per host, the first N hosts of the "
                 "topology) carrying the parts of the jobs placed on their hosts, instead of one "
                 "connection per job (0 = off)")
      ->capture_default_str();
  app.add_option("--arrivals", arrivals,
                 "hold back K jobs (the last ones, on several hosts where possible) and register "
                 "them during the run; reports their trigger-to-push latency")
      ->capture_default_str();
  app.add_option("--arrival-interval-ms", arrival_interval_ms,
                 "time between arrivals, the first one this long after registration ends")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      out << app.help();
      return kExitOk;
    }
    err << "crux-loadgen: " << e.what() << "\n";
    return kExitBadInput;
  }

  auto bad = [&](const std::string& msg) {
    err << "crux-loadgen: " << msg << "\n";
    return kExitBadInput;
  };
  if (jobs < 1 || jobs > 1000000) return bad("--jobs: must be 1-1000000");
  if (!(duration_s >= 0) || duration_s > 1e7) return bad("--duration-s: must be >= 0");
  if (report_interval_ms < -1) return bad("--report-interval-ms: must be >= 0");
  if (heartbeat_ms < 0) return bad("--heartbeat-ms: must be >= 0");
  if (lease_ms < 0 || lease_ms > 86400000) return bad("--lease-ms: must be 0-86400000");
  if (timeout_ms <= 0) return bad("--timeout-ms: must be > 0");
  if (inflight < 0 || inflight > 1000) return bad("--inflight: must be 1-1000");
  if (ack_every < 1 || ack_every > 1000) return bad("--ack-every: must be 1-1000");
  if (gpus_per_host < 1 || gpus_per_host > 1024) return bad("--gpus-per-host: must be 1-1024");
  if (workers < 0 || workers > 256) return bad("--workers: must be 0-256");
  if (!(jitter_pct >= 0 && jitter_pct <= 50)) return bad("--jitter-pct: must be 0-50");
  if (hostd_agents < 0) return bad("--hostd: must be >= 0 (0 = off)");
  if (arrivals < 0 || arrivals > 10000) return bad("--arrivals: must be 0-10000");
  if (arrivals >= jobs) return bad("--arrivals: must be below --jobs");
  if (arrival_interval_ms < 1 || arrival_interval_ms > 86400000) {
    return bad("--arrival-interval-ms: must be 1-86400000");
  }
  const bool hostd = hostd_agents > 0;
  if (hostd && (flow_stats || !fault_specs.empty() || !lie_specs.empty())) {
    return bad(
        "--hostd: cannot be combined with --flow-stats, --fault or --lie (crux-hostd "
        "sends no per-flow stats)");
  }

  LoadGenOptions options;
  options.endpoint = endpoint;
  if (!server_key.empty() || !client_key.empty()) {
    if (insecure) return bad("--insecure: cannot be combined with --server-key/--client-key");
    if (server_key.empty()) return bad("--server-key: required with --client-key");
    if (client_key.empty()) return bad("--client-key: required with --server-key");
    auto spub = protocol::LoadPublicKeyFile(server_key);
    if (!spub.ok()) return bad("--server-key: " + spub.status().message());
    auto ckeys = protocol::LoadSecretKeyFile(client_key);
    if (!ckeys.ok()) return bad("--client-key: " + ckeys.status().message());
    options.curve = true;
    options.server_public_z85 = *spub;
    options.client_keys = *ckeys;
  } else if (!insecure) {
    return bad("either --server-key and --client-key (CurveZMQ) or --insecure is required");
  }

  auto topo = spec::LoadTopologyFile(topology);
  if (!topo.ok()) return bad("--topology: " + topo.status().message());

  if (!(flow_gbps > 0 && flow_gbps <= 1e6)) return bad("--flow-gbps: must be in (0, 1e6]");
  for (const std::string& spec : fault_specs) {
    auto f = ParseLinkFault(spec, *topo);
    if (!f.ok()) return bad(f.status().message());
    options.faults.push_back(*f);
  }
  for (const std::string& spec : lie_specs) {
    auto l = ParseJobLie(spec);
    if (!l.ok()) return bad(l.status().message());
    options.lies.push_back(*l);
  }
  options.flow_stats = flow_stats || !options.faults.empty() || !options.lies.empty();
  options.flow_gbps = flow_gbps;
  if (probe_bytes < 1 || probe_bytes > (uint64_t{1} << 30)) {
    return bad("--probe-bytes: must be 1-1073741824");
  }
  options.probe_bytes = probe_bytes;

  WorkloadOptions wo;
  wo.jobs = jobs;
  wo.seed = seed;
  wo.job_prefix = prefix;
  wo.gpus_per_host = gpus_per_host;
  auto sim_jobs = hostd ? MakeHostdJobs(*topo, wo, hostd_agents) : MakeJobs(*topo, wo);
  if (!sim_jobs.ok()) return bad(sim_jobs.status().message());
  const std::vector<SimAgent> agents = hostd ? AgentsOf(*sim_jobs) : std::vector<SimAgent>{};
  // What the simulated clients are: jobs, or agents (each one connection).
  const size_t connections = hostd ? agents.size() : sim_jobs->size();

  options.duration = core::Duration::Seconds(duration_s);
  // crux-hostd re-reports a part when its ranks' merged profile moves by more than 10 %, and the
  // NCCL plugin refreshes a rank's profile once per sampling window (CRUX_NCCL_SAMPLE_EVERY_MS,
  // default 60 s): one report per part per minute is the most crux-hostd sends.
  if (report_interval_ms < 0) report_interval_ms = hostd ? 60000 : (benchmark ? 0 : 5000);
  options.report_at_register = hostd;
  options.host_batches = !no_host_batches;
  options.arrivals = arrivals;
  options.arrival_interval = core::Duration::Millis(arrival_interval_ms);
  options.report_interval = core::Duration::Millis(report_interval_ms);
  options.heartbeat_interval = core::Duration::Millis(heartbeat_ms);
  options.lease_ms = static_cast<uint32_t>(lease_ms);
  options.request_timeout = core::Duration::Millis(timeout_ms);
  // Benchmark: enough requests in flight to keep the daemon busy without a queue so deep that
  // requests time out and get resent (which would inflate the load).
  // crux-hostd's sessions have one request in flight per part.
  options.inflight = inflight > 0 ? inflight : (benchmark && jobs < 2000 && !hostd ? 2 : 1);
  options.ack_every = ack_every;
  options.end_jobs = end_jobs;
  options.seed = seed;
  options.profile_jitter = jitter_pct / 100.0;
  if (!quiet)
    options.log = [&err](const std::string& line) { err << "crux-loadgen: " << line << "\n"; };

  auto limit = RaiseFdLimit(connections);
  if (!limit.ok()) {
    err << "crux-loadgen: " << limit.status().message() << "\n";
    return kExitFailure;
  }
  const size_t per_process = JobsPerProcess(*limit);
  const char* what = hostd ? "agents" : "jobs";
  if (workers == 0) workers = static_cast<int>((connections + per_process - 1) / per_process);
  workers = std::min(workers, static_cast<int>(connections));
  if (connections > per_process * static_cast<size_t>(workers)) {
    err << "crux-loadgen: WARNING: " << connections << " " << what << " over " << workers
        << " process(es) exceed the open-file limit " << *limit << " (about " << per_process << " "
        << what << " per process); use --workers or raise ulimit -n\n";
  }
  if (arrivals > 0 && workers > 1) {
    // An arrival's trigger and pushes must be seen by one process.
    return bad("--arrivals: needs one process (--workers 1, and an open-file limit for all " +
               std::string(what) + ")");
  }
  if (!options.curve && !quiet) {
    err << "crux-loadgen: WARNING: --insecure: talking to " << endpoint << " without CurveZMQ\n";
  }
  core::Result<RunSummary> summary = core::InternalError("not run");
  const SliceRunner run = [&](size_t begin, size_t end, const LoadGenOptions& o) {
    if (hostd) return RunAgentSlice(*sim_jobs, agents, begin, end, o, stop);
    std::vector<SimJob> slice(sim_jobs->begin() + static_cast<long>(begin),
                              sim_jobs->begin() + static_cast<long>(end));
    return RunSlice(slice, o, stop);
  };
  if (workers <= 1) {
    summary = run(0, connections, options);
  } else {
    summary = RunWorkers(connections, options, workers, err, run);
  }
  if (summary.ok() && hostd) {
    // Jobs spanning workers were counted by each of them.
    summary->agents = static_cast<int>(agents.size());
    summary->hostd_jobs = static_cast<int>(sim_jobs->size());
  }
  if (!summary.ok()) {
    err << "crux-loadgen: " << summary.status().message() << "\n";
    return summary.status().code() == core::StatusCode::kInvalidArgument ? kExitBadInput
                                                                         : kExitFailure;
  }
  RunSummary& s = *summary;
  if (json || benchmark) {
    out << DumpJson(s.ToJson()) << "\n";
  } else {
    out << std::fixed << std::setprecision(1);
    if (hostd) {
      out << "agents              " << s.agents << " (" << s.hostd_jobs << " jobs)\n"
          << "parts registered    " << s.registered << "/" << s.jobs << "\n";
    } else {
      out << "jobs registered     " << s.registered << "/" << s.jobs << "\n";
    }
    if (s.register_failed > 0) out << "not registered      " << DescribeRegisterFailures(s) << "\n";
    out << "duration            " << s.duration_s << " s\n"
        << "reports acked       " << s.reports_acked << " (" << s.ReportRate() << "/s"
        << (s.reports_quiet > 0 ? ", " + std::to_string(s.reports_quiet) + " sent quiet" : "")
        << ")\n"
        << "heartbeats acked    " << s.heartbeats_acked << "\n"
        << "assignments         " << s.assignments << "\n"
        << "push latency p50/99 "
        << (s.push_latency.count() == 0
                ? std::string("n/a (no Assignment carried sent_unix_ns)")
                : std::to_string(s.push_latency.Percentile(50) / 1e6) + " / " +
                      std::to_string(s.push_latency.Percentile(99) / 1e6) + " ms")
        << "\n"
        << "errors              " << s.ToJson()["errors"].dump() << "\n"
        << "timeouts            " << s.timeouts << "\n";
    if (s.arrivals > 0) {
      out << "arrivals pushed     " << s.arrival_latency.count() << "/" << s.arrivals;
      if (s.arrival_latency.count() > 0) {
        out << " (trigger to push p50/max " << s.arrival_latency.Percentile(50) / 1e6 << " / "
            << s.arrival_latency.Percentile(100) / 1e6 << " ms)";
      }
      out << "\n";
    }
  }
  if (s.registered == 0) {
    err << "crux-loadgen: no job could register with " << core::EscapeForTerminal(endpoint) << ": "
        << DescribeRegisterFailures(s) << "\n";
    return kExitFailure;
  }
  if (s.register_failed > 0 && !quiet) {
    err << "crux-loadgen: WARNING: not registered: " << DescribeRegisterFailures(s) << "\n";
  }
  return kExitOk;
}

}  // namespace crux::loadgen
