// Sincronia's Bottleneck-Select-Scale-Iterate ordering (policies.h, docs/policies.md).
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "crux/core/policies/policies.h"

namespace crux::core::policies {

std::vector<int> BssiOrder(const std::vector<std::vector<PortDemand>>& demand,
                           std::vector<double> weights) {
  const int n = static_cast<int>(demand.size());
  // Dense port ids, per-port totals and per-port users.
  std::unordered_map<uint32_t, int> port_index;
  std::vector<uint32_t> port_id;
  std::vector<double> total;
  std::vector<std::vector<std::pair<int, double>>> users;  // (coflow, D[p][c]) per port.
  std::vector<int> last_block;  // Coflows without demand: after everyone, in index order.
  for (int c = 0; c < n; ++c) {
    if (demand[c].empty()) last_block.push_back(c);
    for (const PortDemand& d : demand[c]) {
      auto [it, inserted] = port_index.emplace(d.port, static_cast<int>(port_id.size()));
      if (inserted) {
        port_id.push_back(d.port);
        total.push_back(0);
        users.emplace_back();
      }
      total[it->second] += d.time;
      users[it->second].emplace_back(c, d.time);
    }
  }
  std::vector<char> alive(n, 1);
  for (int c : last_block) alive[c] = 0;
  int remaining = n - static_cast<int>(last_block.size());
  std::vector<int> reversed;  // Last first.
  reversed.reserve(n);
  const size_t m = total.size();
  while (remaining > 0) {
    // Bottleneck: the port with the largest remaining total (ties: lowest port id).
    int b = -1;
    for (size_t p = 0; p < m; ++p) {
      if (total[p] <= 0) continue;
      if (b < 0 || total[p] > total[b] || (total[p] == total[b] && port_id[p] < port_id[b])) {
        b = static_cast<int>(p);
      }
    }
    if (b < 0) break;  // Numerically exhausted: the rest go in index order below.
    // Select: min w_c / D[b][c] goes last (ties: highest index).
    int sel = -1;
    double sel_d = 0;
    double best = 0;
    for (const auto& [c, d] : users[b]) {
      if (!alive[c]) continue;
      const double v = weights[c] / d;
      if (sel < 0 || v < best || (v == best && c > sel)) {
        sel = c;
        sel_d = d;
        best = v;
      }
    }
    if (sel < 0) {  // Only dead coflows left on this port: drop its residue.
      total[b] = 0;
      continue;
    }
    // Scale.
    const double w_sel = weights[sel];
    for (const auto& [c, d] : users[b]) {
      if (!alive[c] || c == sel) continue;
      weights[c] = std::max(0.0, weights[c] - w_sel * d / sel_d);
    }
    // Iterate: remove sel from every port it uses.
    alive[sel] = 0;
    --remaining;
    reversed.push_back(sel);
    for (const PortDemand& d : demand[sel]) total[port_index[d.port]] -= d.time;
  }
  std::vector<int> order;
  order.reserve(n);
  // Any alive leftover (only through floating-point exhaustion) goes first in index order, then
  // the BSSI order, then coflows without demand.
  for (int c = 0; c < n; ++c) {
    if (alive[c]) order.push_back(c);
  }
  order.insert(order.end(), reversed.rbegin(), reversed.rend());
  order.insert(order.end(), last_block.begin(), last_block.end());
  return order;
}

}  // namespace crux::core::policies
