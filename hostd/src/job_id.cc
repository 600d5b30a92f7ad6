#include "crux/hostd/job_id.h"

#include <cstdio>
#include <cstdlib>

namespace crux::hostd {

bool IsJobIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '/' || c == '-';
}

std::string SanitizeJobId(std::string_view raw) {
  std::string out;
  for (char c : raw.substr(0, 128)) out.push_back(IsJobIdChar(c) ? c : '_');
  return out.empty() ? "job" : out;
}

std::optional<JobIdentity> JobIdFromEnvironment(const GetEnv& getenv) {
  auto value = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  if (std::string v = value("CRUX_JOB_ID"); !v.empty()) {
    return JobIdentity{SanitizeJobId(v), "CRUX_JOB_ID"};
  }
  if (std::string v = value("SLURM_JOB_ID"); !v.empty()) {
    return JobIdentity{SanitizeJobId("slurm-" + v), "SLURM_JOB_ID"};
  }
  if (std::string v = value("TORCHELASTIC_RUN_ID"); !v.empty() && v != "none") {
    return JobIdentity{SanitizeJobId("torchelastic-" + v), "TORCHELASTIC_RUN_ID"};
  }
  return std::nullopt;
}

int LocalSlotFromEnvironment(const GetEnv& getenv) {
  for (const char* name : {"LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* v = getenv(name);
    if (v == nullptr || *v < '0' || *v > '9') continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end == '\0' && x >= 0 && x <= 1023) return static_cast<int>(x);
  }
  return -1;
}

JobIdentity JobIdFromCommHash(uint64_t world_comm_hash) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "nccl-%016llx", static_cast<unsigned long long>(world_comm_hash));
  return JobIdentity{buf, "comm_hash"};
}

}  // namespace crux::hostd
