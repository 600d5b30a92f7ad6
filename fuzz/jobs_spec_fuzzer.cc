// Fuzz target: a jobs spec YAML document, through spec::ParseJobs (crux-plan / crux-sim `jobs`
// files), against the example two-tier Clos (host0..host15). Seeds: configs/jobs/*.yaml,
// configs/scenarios/jobs/*.yaml. Dictionary: fuzz/dict/jobs_spec.dict.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "crux/core/model/job.h"
#include "crux/spec/jobs_spec.h"
#include "crux/spec/topology_spec.h"
#include "fuzz_util.h"

namespace {

const crux::core::Topology& Topo() {
  static const crux::core::Topology* topo = [] {
    auto t = crux::spec::ParseTopology(crux::fuzz::kExampleClos2Yaml, "");
    if (!t.ok()) crux::fuzz::Violated("example topology:", t.status().ToString());
    return new crux::core::Topology(std::move(*t));
  }();
  return *topo;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const crux::core::Topology& topo = Topo();
  auto jobs = crux::spec::ParseJobs(crux::fuzz::AsText(data, size), topo);
  if (!jobs.ok()) {
    crux::fuzz::CheckError(jobs.status(), "ParseJobs");
    return 0;
  }
  // The loader's contract: every job it returns passes core::ValidateJob.
  for (const crux::core::JobSpec& spec : crux::spec::JobSpecs(*jobs)) {
    if (crux::core::Status s = crux::core::ValidateJob(topo, spec); !s.ok()) {
      crux::fuzz::Violated("ParseJobs returned a job that fails ValidateJob:", s.ToString());
    }
  }
  return 0;
}
