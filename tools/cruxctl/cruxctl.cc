#include "cruxctl.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "crux/core/base/text.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/validate.h"
#include "crux/textio/cli.h"
#include "render.h"

namespace crux::cruxctl {
namespace {

constexpr const char* kProgram = "cruxctl";
constexpr uint64_t kRequestId = 1;

enum class Health { kUp, kDown, kDegraded };

struct Options {
  std::string socket;
  int64_t timeout_ms = kDefaultTimeoutMs;
  bool json = false;
  // links
  bool all_links = false;
  // job
  std::string job_id;
  // set-link
  std::string link;
  std::string health;
  double capacity_gbps = 0;
  bool capacity_given = false;
  // plan
  bool dry_run = false;
  // keygen
  std::string out_dir;
  std::string key_name = "client";
  bool force = false;
  uint32_t impact_top = 5;            // impact --top.
  double impact_error_threshold = 0;  // impact --error-threshold (0: the daemon's).
};

// Escapes each line of `text` on its own; the newlines between lines stay.
std::string EscapeLines(const std::string& text) {
  std::string out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    out += core::EscapeForTerminal(std::string_view(text).substr(begin, end - begin));
    if (end < text.size()) out += '\n';
    begin = end + 1;
  }
  return out;
}

// Every error line is escaped as a whole: it may quote the daemon's text, the environment
// ($CRUX_ADMIN_SOCKET) or the command line, and must stay one harmless line.
int Fail(std::ostream& err, int code, const std::string& message) {
  err << kProgram << ": " << core::EscapeForTerminal(message) << "\n";
  return code;
}

// Sends one request, checks the reply's body kind. On failure prints the reason and returns the
// exit code; on success stores the reply and returns kExitOk.
int Exchange(const CruxctlEnvironment& env, const Options& options, v1::Envelope request,
             v1::Envelope::BodyCase expected, v1::Envelope* reply, std::ostream& err) {
  if (!env.make_transport) return Fail(err, kExitDaemonError, "no transport configured");
  std::string socket = options.socket;
  if (socket.empty()) socket = env.admin_socket_env.value_or(kDefaultAdminSocket);
  if (socket.empty()) socket = kDefaultAdminSocket;
  const std::string endpoint = NormalizeEndpoint(socket);

  auto transport = env.make_transport(endpoint);
  if (!transport.ok()) {
    const core::Status& s = transport.status();
    return Fail(err,
                s.code() == core::StatusCode::kUnavailable ? kExitUnreachable : kExitDaemonError,
                "cannot reach cruxd at " + endpoint + ": " + s.message());
  }
  protocol::SetVersion(&request);
  request.set_request_id(kRequestId);
  auto result = (*transport)->Call(request, core::Duration::Millis(options.timeout_ms));
  if (!result.ok()) {
    const core::Status& s = result.status();
    if (s.code() == core::StatusCode::kNotFound) {
      return Fail(err, kExitUnreachable, "cannot reach cruxd at " + endpoint + ": " + s.message());
    }
    if (s.code() == core::StatusCode::kUnavailable) {
      return Fail(err, kExitUnreachable,
                  "cruxd at " + endpoint + " did not answer within " +
                      std::to_string(options.timeout_ms) + " ms (is it running?): " + s.message());
    }
    return Fail(err, kExitDaemonError, "bad reply from cruxd at " + endpoint + ": " + s.ToString());
  }
  v1::Envelope& got = *result;
  if (got.body_case() == v1::Envelope::kError) {
    const v1::ErrorCode code = got.error().code();
    return Fail(err, kExitDaemonError,
                "cruxd: " + std::string(protocol::ErrorCodeName(code)) + " (" +
                    DescribeErrorCode(code) + "): " + got.error().message());
  }
  if (got.body_case() != expected) {
    return Fail(err, kExitDaemonError,
                "unexpected reply '" + std::string(protocol::BodyName(got)) + "' from cruxd");
  }
  if (core::Status s = protocol::Validate(got); !s.ok()) {
    return Fail(err, kExitDaemonError, "invalid reply from cruxd: " + s.message());
  }
  *reply = std::move(got);
  return kExitOk;
}

void PrintJson(std::ostream& out, const nlohmann::json& doc) { out << DumpJson(doc) << "\n"; }

int RunStatus(const CruxctlEnvironment& env, const Options& o, std::ostream& out,
              std::ostream& err) {
  v1::Envelope request;
  request.mutable_status_request();
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kStatusReply, &reply, err); rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.status_reply()));
  } else {
    out << RenderStatusText(reply.status_reply());
  }
  return kExitOk;
}

int RunJobs(const CruxctlEnvironment& env, const Options& o, std::ostream& out, std::ostream& err) {
  v1::Envelope request;
  request.mutable_list_jobs_request();
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kListJobsReply, &reply, err);
      rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.list_jobs_reply()));
  } else {
    out << RenderJobsTable(reply.list_jobs_reply());
  }
  return kExitOk;
}

int RunJob(const CruxctlEnvironment& env, const Options& o, std::ostream& out, std::ostream& err) {
  if (!protocol::IsValidId(o.job_id)) {
    return Fail(
        err, kExitUsage,
        "job: invalid job id \"" + o.job_id + "\" (allowed: 1-128 chars of [A-Za-z0-9._:/-])");
  }
  v1::Envelope request;
  request.mutable_job_request()->set_job_id(o.job_id);
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kJobDetail, &reply, err); rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.job_detail()));
  } else {
    out << RenderJobDetailText(reply.job_detail());
  }
  return kExitOk;
}

int RunLinks(const CruxctlEnvironment& env, const Options& o, std::ostream& out,
             std::ostream& err) {
  v1::Envelope request;
  request.mutable_list_links_request()->set_all(o.all_links);
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kListLinksReply, &reply, err);
      rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.list_links_reply()));
  } else {
    out << RenderLinksTable(reply.list_links_reply());
  }
  return kExitOk;
}

int RunSetLink(const CruxctlEnvironment& env, const Options& o, std::ostream& out,
               std::ostream& err) {
  v1::LinkHealth health = v1::LINK_HEALTH_UNSPECIFIED;
  const bool automatic = o.health == "auto";
  if (automatic) {
    if (o.capacity_given)
      return Fail(err, kExitUsage, "set-link: --capacity-gbps only applies to degraded");
  } else if (o.health == "up") {
    health = v1::LINK_HEALTH_UP;
  } else if (o.health == "down") {
    health = v1::LINK_HEALTH_DOWN;
  } else if (o.health == "degraded") {
    health = v1::LINK_HEALTH_DEGRADED;
  } else {
    return Fail(err, kExitUsage,
                "set-link: HEALTH must be up, down, degraded or auto (got \"" + o.health + "\")");
  }
  if (health == v1::LINK_HEALTH_DEGRADED && !o.capacity_given) {
    return Fail(err, kExitUsage, "set-link: --capacity-gbps is required with degraded");
  }
  if (health != v1::LINK_HEALTH_DEGRADED && o.capacity_given) {
    return Fail(err, kExitUsage, "set-link: --capacity-gbps only applies to degraded");
  }
  v1::Envelope request;
  v1::SetLinkRequest* set = request.mutable_set_link_request();
  set->set_link(o.link);
  set->set_health(health);
  set->set_automatic(automatic);
  if (o.capacity_given) set->set_capacity_bps(o.capacity_gbps * 1e9);
  if (core::Status s = protocol::ValidateSetLinkRequest(*set, "set-link"); !s.ok()) {
    return Fail(err, kExitUsage, s.message());
  }
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kSetLinkReply, &reply, err); rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.set_link_reply()));
  } else {
    out << RenderSetLinkText(reply.set_link_reply());
  }
  return kExitOk;
}

int RunPlan(const CruxctlEnvironment& env, const Options& o, std::ostream& out, std::ostream& err) {
  if (!o.dry_run) {
    return Fail(err, kExitUsage,
                "plan: only --dry-run is supported (cruxd re-plans by itself on every change)");
  }
  v1::Envelope request;
  request.mutable_plan_dry_run_request();
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kPlanDryRunReply, &reply, err);
      rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.plan_dry_run_reply()));
  } else {
    out << RenderPlanDryRunText(reply.plan_dry_run_reply());
  }
  return kExitOk;
}

int RunFaults(const CruxctlEnvironment& env, const Options& o, std::ostream& out,
              std::ostream& err) {
  v1::Envelope request;
  request.mutable_list_faults_request();
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kListFaultsReply, &reply, err);
      rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.list_faults_reply()));
  } else {
    out << RenderFaultsText(reply.list_faults_reply());
  }
  return kExitOk;
}

int RunImpact(const CruxctlEnvironment& env, const Options& o, std::ostream& out,
              std::ostream& err) {
  v1::Envelope request;
  v1::ImpactRequest* r = request.mutable_impact_request();
  r->set_top(o.impact_top);
  r->set_error_threshold(o.impact_error_threshold);
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kImpactReply, &reply, err); rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.impact_reply()));
  } else {
    out << RenderImpactText(reply.impact_reply());
  }
  return kExitOk;
}

int RunSwitches(const CruxctlEnvironment& env, const Options& o, std::ostream& out,
                std::ostream& err) {
  v1::Envelope request;
  request.mutable_list_switches_request();
  v1::Envelope reply;
  if (int rc = Exchange(env, o, request, v1::Envelope::kListSwitchesReply, &reply, err);
      rc != kExitOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(out, ToJson(reply.list_switches_reply()));
  } else {
    out << RenderSwitchesTable(reply.list_switches_reply());
  }
  return kExitOk;
}

int RunKeygen(const Options& o, std::ostream& out, std::ostream& err) {
  // The name becomes a file name: an id without '/' or a leading '.'.
  if (!protocol::IsValidId(o.key_name) || o.key_name.find('/') != std::string::npos ||
      o.key_name.front() == '.') {
    return Fail(err, kExitUsage,
                "keygen: --name: invalid key name \"" + o.key_name +
                    "\" (allowed: 1-128 chars of [A-Za-z0-9._:-], not starting with '.')");
  }
  std::error_code ec;
  const std::filesystem::path dir(o.out_dir);
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return Fail(err, kExitDaemonError,
                  "keygen: --out-dir: cannot create " + o.out_dir + ": " + ec.message());
    }
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  } else if (!std::filesystem::is_directory(dir, ec)) {
    return Fail(err, kExitUsage, "keygen: --out-dir: " + o.out_dir + " is not a directory");
  }
  auto keys = protocol::GenerateCurveKeyPair();
  if (!keys.ok()) return Fail(err, kExitDaemonError, "keygen: " + keys.status().ToString());
  const std::string base = (dir / o.key_name).string();
  if (core::Status s = protocol::SaveKeyPair(*keys, base, o.force); !s.ok()) {
    return Fail(
        err, kExitDaemonError,
        "keygen: " + s.message() +
            (s.code() == core::StatusCode::kAlreadyExists ? " (use --force to replace)" : ""));
  }
  if (o.json) {
    PrintJson(out, {{"name", o.key_name},
                    {"public_key", keys->public_z85},
                    {"secret_key_file", base + ".key"},
                    {"public_key_file", base + ".pub"}});
  } else {
    const std::string shown = core::EscapeForTerminal(base);
    out << "Wrote " << shown << ".key (secret, mode 0600) and " << shown << ".pub (public).\n"
        << "Public key: " << keys->public_z85 << "\n"
        << "Authorise it on the daemon by copying " << shown
        << ".pub into cruxd's curve.authorized_keys_dir.\n";
  }
  return kExitOk;
}

}  // namespace

std::string DescribeErrorCode(v1::ErrorCode code) {
  switch (code) {
    case v1::ERROR_CODE_MALFORMED:
      return "the request did not parse";
    case v1::ERROR_CODE_TOO_LARGE:
      return "the request is too large";
    case v1::ERROR_CODE_UNSUPPORTED_VERSION:
      return "this cruxctl speaks another protocol version";
    case v1::ERROR_CODE_INVALID_ARGUMENT:
      return "invalid argument";
    case v1::ERROR_CODE_UNKNOWN_HOST:
      return "unknown host";
    case v1::ERROR_CODE_UNKNOWN_JOB:
      return "unknown job";
    case v1::ERROR_CODE_PERMISSION_DENIED:
      return "permission denied";
    case v1::ERROR_CODE_CONFLICT:
      return "conflicts with the current state";
    case v1::ERROR_CODE_UNAVAILABLE:
      return "cruxd is shutting down or overloaded, retry later";
    case v1::ERROR_CODE_INTERNAL:
      return "internal error in cruxd";
    case v1::ERROR_CODE_NOT_FOUND:
      return "not found";
    case v1::ERROR_CODE_RESOURCE_EXHAUSTED:
      return "a quota is reached";
    case v1::ERROR_CODE_UNSUPPORTED:
      return "not supported by this peer (e.g. a switch without the QoS features cruxd needs)";
    default:
      return "unknown error code " + std::to_string(static_cast<int>(code));
  }
}

std::string NormalizeEndpoint(const std::string& socket) {
  if (socket.find("://") != std::string::npos) return socket;
  return "ipc://" + socket;
}

int RunCruxctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
               const CruxctlEnvironment& env) {
  Options o;
  CLI::App app(
      "cruxctl: inspect and steer cruxd, the Crux scheduling daemon, over its local "
      "admin socket.\nExit codes: 0 ok, 1 daemon reported an error (or bad reply), "
      "2 usage, 3 daemon unreachable or timed out.",
      kProgram);
  app.require_subcommand(1);
  app.fallthrough();  // Global flags may also follow the command ("cruxctl jobs --json").
  app.add_option("--socket", o.socket,
                 std::string("Admin socket path or ZeroMQ endpoint (default: $") + kAdminSocketEnv +
                     ", else " + kDefaultAdminSocket + ")");
  app.add_option("--timeout-ms", o.timeout_ms, "Give up on the daemon after this many ms")
      ->check(CLI::Range(int64_t{1}, int64_t{600000}));
  app.add_flag("--json", o.json, "Print JSON (stable keys) instead of tables");

  CLI::App* status = app.add_subcommand("status", "Daemon summary");
  CLI::App* jobs = app.add_subcommand("jobs", "List jobs with intensity, priority and level");
  CLI::App* job = app.add_subcommand("job", "Explain one job's level, paths and contention");
  job->add_option("ID", o.job_id, "Job id")->required();
  CLI::App* links = app.add_subcommand("links", "Link health and committed load");
  links->add_flag("--all", o.all_links, "Every link, not only loaded or unhealthy ones");
  CLI::App* set_link = app.add_subcommand(
      "set-link",
      "Pin a link up, down or degraded (automatic fault handling no longer changes it), or hand "
      "it back with auto");
  set_link->add_option("LINK", o.link, "\"a->b\" (one direction) or \"a-b\" (both)")->required();
  set_link->add_option("HEALTH", o.health, "up | down | degraded | auto")->required();
  CLI::Option* capacity =
      set_link->add_option("--capacity-gbps", o.capacity_gbps, "Remaining capacity (degraded)")
          ->check(textio::FinitePositiveReal());
  CLI::App* plan = app.add_subcommand("plan", "Re-plan without applying (--dry-run)");
  plan->add_flag("--dry-run", o.dry_run, "Only show what would change (required)");
  CLI::App* switches = app.add_subcommand("switches", "Switch agents and their QoS state");
  CLI::App* faults = app.add_subcommand(
      "faults", "Suspect and unhealthy links: score, evidence, state, since, automatic or admin");
  CLI::App* impact = app.add_subcommand(
      "impact",
      "What the plan gains against ECMP (predicted), and the jobs that gain, lose and are "
      "mispredicted most");
  impact->add_option("--top", o.impact_top, "Jobs per list (default 5)")
      ->check(CLI::Range(1, 1000));
  impact
      ->add_option("--error-threshold", o.impact_error_threshold,
                   "Mispredicted above this fraction (default: cruxd's impact.error_threshold)")
      ->check(CLI::Range(0.0, 10.0));
  CLI::App* keygen = app.add_subcommand("keygen", "Create a CurveZMQ key pair (no daemon needed)");
  keygen->add_option("--out-dir", o.out_dir, "Directory for NAME.key and NAME.pub")->required();
  keygen->add_option("--name", o.key_name, "Base name of the key files (default: client)");
  keygen->add_flag("--force", o.force, "Replace existing key files");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes the offending arguments: escaped like everything else (line by line, so the
    // help text keeps its lines).
    std::ostringstream cli_out, cli_err;
    const int rc = app.exit(e, cli_out, cli_err);
    out << EscapeLines(cli_out.str());
    err << EscapeLines(cli_err.str());
    return rc == 0 ? kExitOk : kExitUsage;
  }
  o.capacity_given = capacity->count() > 0;

  if (*status) return RunStatus(env, o, out, err);
  if (*jobs) return RunJobs(env, o, out, err);
  if (*job) return RunJob(env, o, out, err);
  if (*links) return RunLinks(env, o, out, err);
  if (*set_link) return RunSetLink(env, o, out, err);
  if (*plan) return RunPlan(env, o, out, err);
  if (*switches) return RunSwitches(env, o, out, err);
  if (*faults) return RunFaults(env, o, out, err);
  if (*impact) return RunImpact(env, o, out, err);
  if (*keygen) return RunKeygen(o, out, err);
  return Fail(err, kExitUsage, "no command given (try --help)");
}

}  // namespace crux::cruxctl
