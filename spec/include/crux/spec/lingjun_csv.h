// The Alibaba Lingjun topology file (configs/topologies/lingjun/topo.csv): CSV text ->
// core::LingjunLayout, the host rows core's BuildLingjun lays out (core does no parsing).
//
// Format: the CSV dialect of crux/textio/csv.h (UTF-8 BOM, CRLF, blank and '#' lines skipped,
// fields trimmed) with the header "ip,DSW,PSW,ASW" and one row per host. Structure errors
// name the line: "lingjun csv line 1: missing the header 'ip,DSW,PSW,ASW'", "lingjun csv line 3:
// expected 4 comma-separated fields (got 3)"; BuildLingjun's errors name the line and column
// ("lingjun csv line 3, column 4 (ASW): invalid switch name 'S 2' ...").
//
// Thread-safety: pure functions.
#ifndef CRUX_SPEC_LINGJUN_CSV_H_
#define CRUX_SPEC_LINGJUN_CSV_H_

#include <string_view>

#include "crux/core/base/status.h"
#include "crux/core/topology/builders.h"
#include "crux/core/topology/topology.h"

namespace crux::spec {

// The host rows of `csv`, each with its line. Checks the structure only (header, field
// counts); BuildLingjun checks the content (empty fields, names, duplicates).
core::Result<core::LingjunLayout> ParseLingjunCsv(std::string_view csv);

// ParseLingjunCsv then core::BuildLingjun: what `kind: lingjun` topology specs build.
core::Result<core::Topology> BuildLingjunFromCsv(std::string_view csv,
                                                 const core::LingjunParams& params);

}  // namespace crux::spec

#endif  // CRUX_SPEC_LINGJUN_CSV_H_
