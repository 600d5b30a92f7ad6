// Which Crux job a process belongs to, without any code in the training script (used by the
// NCCL profiler plugin and the verbs shim in every rank).
//
// The rule, first match wins:
//   1. CRUX_JOB_ID                 verbatim (the operator's or launcher's choice);
//   2. SLURM_JOB_ID                "slurm-<id>";
//   3. TORCHELASTIC_RUN_ID         "torchelastic-<id>" (torchrun's rendezvous id; its default
//                                  "none" is ignored: unrelated jobs would share it);
//   4. the world communicator      "nccl-<16 hex digits of commHash>": the process's
//                                  communicator with the most ranks (the first such one), whose
//                                  hash every rank of the job shares.
// Values are made valid job ids (1-128 chars of [A-Za-z0-9._:/-]): other characters become '_',
// longer ones are cut to 128 characters.
//
// Thread-safety: pure functions (the environment is read through the callback).
#ifndef CRUX_HOSTD_JOB_ID_H_
#define CRUX_HOSTD_JOB_ID_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace crux::hostd {

struct JobIdentity {
  std::string id;
  std::string source;  // "CRUX_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "comm_hash".
  friend bool operator==(const JobIdentity&, const JobIdentity&) = default;
};

using GetEnv = std::function<const char*(const char*)>;

// Rules 1-3, or nullopt.
std::optional<JobIdentity> JobIdFromEnvironment(const GetEnv& getenv);
// Rule 4.
JobIdentity JobIdFromCommHash(uint64_t world_comm_hash);
// The valid job id closest to `raw` (see the file comment); "job" for an empty string.
std::string SanitizeJobId(std::string_view raw);
// The process's local slot on its host (its local GPU index), for Hello.local_slot: LOCAL_RANK
// (torchrun, Megatron launchers), else SLURM_LOCALID (srun), when it is a decimal integer
// 0-1023; else -1 (not known). NCCL's profiler ABIs (v4, v5) do not pass the CUDA device to
// the plugin, so the launcher's environment is what the plugin has.
int LocalSlotFromEnvironment(const GetEnv& getenv);
// A character job ids may hold: [A-Za-z0-9._:/-] (the wire protocol's rule).
bool IsJobIdChar(char c);

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_JOB_ID_H_
