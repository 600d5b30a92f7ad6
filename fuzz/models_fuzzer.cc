// Fuzz target: the simulator's model catalogue YAML (configs/models.yaml), through
// sim::workload::ParseModels. Every accepted model must give a job that passes core::ValidateJob
// (MakeJobSpec's documented contract; MakeJobSpecOn for hybrid profiles, at their smallest size
// when it fits the example fabric, where an error must be a clean one). Seeds:
// configs/models.yaml and slices of it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "crux/core/model/job.h"
#include "crux/sim/workload/models.h"
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
  auto catalog = crux::sim::workload::ParseModels(crux::fuzz::AsText(data, size));
  if (!catalog.ok()) {
    crux::fuzz::CheckError(catalog.status(), "ParseModels");
    return 0;
  }
  const crux::core::Topology& topo = Topo();
  std::vector<crux::core::NodeId> hosts;
  for (const char* name : {"host0", "host4"}) {
    auto id = topo.FindNode(name);
    if (!id.ok()) crux::fuzz::Violated("example topology has no", name);
    hosts.push_back(*id);
  }
  for (const auto& model : catalog->models()) {
    if (catalog->Find(model.name) == nullptr) crux::fuzz::Violated("Find(name) of a loaded model");
    if (model.hybrid) {
      // The smallest size it runs on, on whole hosts of the example fabric (16 x 8 GPUs).
      const int gpus = model.min_gpus;
      if (gpus % 8 != 0 || gpus / 8 > static_cast<int>(topo.hosts().size())) continue;
      const std::vector<crux::core::NodeId> some(topo.hosts().begin(),
                                                 topo.hosts().begin() + gpus / 8);
      auto job = crux::sim::workload::MakeJobSpecOn(topo, model, "job", some, 8);
      if (!job.ok()) {
        crux::fuzz::CheckError(job.status(), "MakeJobSpecOn");
        continue;
      }
      if (crux::core::Status s = crux::core::ValidateJob(topo, *job); !s.ok()) {
        crux::fuzz::Violated("MakeJobSpecOn of an accepted model fails ValidateJob:", s.ToString());
      }
      continue;
    }
    const crux::core::JobSpec job = crux::sim::workload::MakeJobSpec(model, "job", hosts, 8);
    if (crux::core::Status s = crux::core::ValidateJob(topo, job); !s.ok()) {
      crux::fuzz::Violated("MakeJobSpec of an accepted model fails ValidateJob:", s.ToString());
    }
  }
  return 0;
}
