#include "crux/core/faults/fault_localisation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "crux/core/base/random.h"

namespace crux::core {
namespace {

PathObservation Obs(std::vector<uint32_t> links, double ratio = 1.0, bool failed = false) {
  PathObservation o;
  for (uint32_t l : links) o.links.push_back(LinkId(l));
  o.rate_ratio = ratio;
  o.failed = failed;
  return o;
}

std::set<uint32_t> LinksOf(const std::vector<Suspect>& s) {
  std::set<uint32_t> out;
  for (const Suspect& x : s) out.insert(x.link.value());
  return out;
}

TEST(VoteHardFaultsTest, CutLinkCollectsTheVotesHealthyFlowsExonerateTheRest) {
  // Link 5 is cut: the three flows over it fail. Their other links (1, 2, 3, 7) carry healthy
  // flows too.
  const std::vector<PathObservation> obs = {
      Obs({1, 5, 7}, 0, true), Obs({2, 5, 7}, 0, true), Obs({3, 5, 8}, 0, true),
      Obs({1, 6, 7}),          Obs({2, 6, 8}),          Obs({3, 6, 7}),
  };
  const std::vector<Suspect> s = VoteHardFaults(obs, {});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].link, LinkId(5));
  EXPECT_EQ(s[0].kind, SuspectKind::kHard);
  EXPECT_DOUBLE_EQ(s[0].score, 1.0);  // 3 flows x 1/3.
  EXPECT_EQ(s[0].evidence, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_FALSE(s[0].ambiguous);
}

TEST(VoteHardFaultsTest, TwoCutLinksAreBothFoundByReVoting) {
  const std::vector<PathObservation> obs = {
      Obs({1, 5}, 0, true), Obs({2, 5}, 0, true), Obs({3, 5}, 0, true), Obs({1, 9}, 0, true),
      Obs({4, 9}, 0, true), Obs({1, 2}),          Obs({3, 4}),
  };
  const std::vector<Suspect> s = VoteHardFaults(obs, {});
  EXPECT_EQ(LinksOf(s), (std::set<uint32_t>{5, 9}));
  EXPECT_EQ(s[0].link, LinkId(5));  // More votes first.
}

TEST(VoteHardFaultsTest, NoLinkQualifiesBelowMinFlowsOrWhenEveryLinkIsExonerated) {
  // One failed flow only.
  EXPECT_TRUE(VoteHardFaults(std::vector{Obs({1, 2}, 0, true), Obs({3})}, {}).empty());
  // Two failed flows whose links healthy flows all cross (the failure is elsewhere, e.g. a host).
  EXPECT_TRUE(VoteHardFaults(
                  std::vector{Obs({1, 2}, 0, true), Obs({1, 2}, 0, true), Obs({1}), Obs({2})}, {})
                  .empty());
  LocalisationOptions one;
  one.min_flows = 1;
  EXPECT_EQ(LinksOf(VoteHardFaults(std::vector{Obs({1, 2}, 0, true), Obs({1})}, one)),
            (std::set<uint32_t>{2}));
}

TEST(VoteHardFaultsTest, LinksTheFlowsCannotTellApartAreReturnedTogetherAsAmbiguous) {
  // Links 4 and 5 are crossed by exactly the same (failed) flows.
  const std::vector<PathObservation> obs = {Obs({1, 4, 5}, 0, true), Obs({2, 4, 5}, 0, true),
                                            Obs({1, 2})};
  const std::vector<Suspect> s = VoteHardFaults(obs, {});
  EXPECT_EQ(LinksOf(s), (std::set<uint32_t>{4, 5}));
  for (const Suspect& x : s) EXPECT_TRUE(x.ambiguous);
}

TEST(GrayFaultsTest, DegradedLinkIsEstimatedAtItsFractionAndNothingElseIsBlamed) {
  // Link 5 delivers 30 % of its rate; flows over it see 0.3, everything else 1.
  const std::vector<PathObservation> obs = {
      Obs({1, 5, 7}, 0.3), Obs({2, 5, 8}, 0.3), Obs({3, 5, 7}, 0.3), Obs({1, 6, 7}),
      Obs({2, 6, 8}),      Obs({3, 6, 7}),      Obs({4, 6, 8}),
  };
  const std::vector<Suspect> s = GrayFaults(obs, {});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].link, LinkId(5));
  EXPECT_EQ(s[0].kind, SuspectKind::kGray);
  EXPECT_NEAR(s[0].estimate, 0.3, 0.02);
  EXPECT_EQ(s[0].evidence.size(), 3u);
  const auto x = EstimateLinkRates(obs, {});
  for (uint32_t l : {1, 2, 3, 6, 7, 8}) EXPECT_GT(x.at(LinkId(l)), 0.95) << l;
}

TEST(GrayFaultsTest, AHealthyRowBoundsItsPathOnlyFromBelow) {
  // Link 5 (a NIC cable) delivers 60 % of its capacity. Two slow rows over it (6, 7: the peers'
  // links) saw 0.6; three healthy flows over it (8, 9, 10) got what they were entitled to, at
  // 50-55 % of the link: they prove the link carried 55 %, not that it is whole.
  auto bound = [](std::vector<uint32_t> links, double at_least) {
    PathObservation o = Obs(std::move(links));
    o.at_least = at_least;
    return o;
  };
  std::vector<PathObservation> obs = {Obs({5, 6}, 0.6), Obs({5, 7}, 0.6), bound({5, 8}, 0.5),
                                      bound({5, 9}, 0.55), bound({5, 10}, 0.52)};
  std::vector<Suspect> s = GrayFaults(obs, {});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].link, LinkId(5));
  EXPECT_NEAR(s[0].estimate, 0.6, 0.02);
  EXPECT_EQ(s[0].healthy, 3u);
  // Counted both ways (as rate_ratio 1), the same three rows clear it.
  for (size_t i = 2; i < obs.size(); ++i) obs[i].at_least = -1;
  EXPECT_TRUE(GrayFaults(obs, {}).empty());
  // A bound above the slow rows' level still speaks against the link: one flow carried 95 % of
  // it at the same time, so the slow rows are not the link's doing (the link estimate stays at
  // the bound, above gray_ratio).
  obs[2].at_least = 0.95;
  const auto x = EstimateLinkRates(obs, {});
  EXPECT_GE(x.at(LinkId(5)), 0.8);
  EXPECT_TRUE(LinksOf(GrayFaults(obs, {})).count(5) == 0);
}

TEST(GrayFaultsTest, OneSidedTermsAreMinimisedExactlyOnOneLink) {
  // One link, random rows both ways and bounded: the estimate is the argmin over [0, 1] of the
  // objective of the header (a grid of 10^4 points is never better).
  Rng rng(7);
  auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * rng.UniformDouble(); };
  const LocalisationOptions opt;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PathObservation> obs = {Obs({5}, uniform(0.0, 0.79))};  // One unhealthy row.
    const int n = 1 + static_cast<int>(uniform(0.0, 6.0));
    for (int i = 0; i < n; ++i) {
      PathObservation o = Obs({5}, uniform(0.0, 1.0));
      if (uniform(0.0, 1.0) < 0.6) o.at_least = uniform(0.0, 1.2);
      obs.push_back(o);
    }
    auto objective = [&](double x) {
      double f = opt.lambda * x * (1 - x);
      for (const PathObservation& o : obs) {
        const double t = o.failed ? 0.0 : o.rate_ratio;
        if (o.at_least >= 0 && IsHealthy(o, opt)) {
          const double gap = std::min(o.at_least, 1.0) - x;
          f += gap > 0 ? gap * gap : 0.0;
        } else {
          f += (t - x) * (t - x);
        }
      }
      return f;
    };
    const double x = EstimateLinkRates(obs, opt).at(LinkId(5));
    double grid = objective(0);
    for (int k = 1; k <= 10000; ++k) grid = std::min(grid, objective(k / 1e4));
    EXPECT_LE(objective(x), grid + 1e-9) << "trial " << trial << " x " << x;
  }
}

TEST(GrayFaultsTest, HealthyMatrixHasNoSubproblem) {
  const std::vector<PathObservation> obs = {Obs({1, 2}), Obs({2, 3}, 0.9), Obs({3, 4}, 0.85)};
  EXPECT_TRUE(EstimateLinkRates(obs, {}).empty());
  EXPECT_TRUE(GrayFaults(obs, {}).empty());
  EXPECT_TRUE(VoteHardFaults(obs, {}).empty());
}

TEST(GrayFaultsTest, IdenticalColumnsAreMergedAndReportedAsAmbiguous) {
  const std::vector<PathObservation> obs = {Obs({1, 4, 5}, 0.4), Obs({2, 4, 5}, 0.4), Obs({1, 2})};
  const std::vector<Suspect> s = GrayFaults(obs, {});
  ASSERT_EQ(LinksOf(s), (std::set<uint32_t>{4, 5}));
  for (const Suspect& x : s) {
    EXPECT_TRUE(x.ambiguous);
    EXPECT_NEAR(x.estimate, 0.4, 0.03);
  }
}

// Random fabrics: 2-tier Clos-like paths (host link, up link, down link, host link) with one
// degraded link (a random fraction) and noisy healthy flows. The estimate must name exactly that
// link, or an ambiguous group of links that exactly the same flows cross (here a host link whose
// few flows all took the degraded uplink: no observation separates them; probes would), and
// never a healthy link.
TEST(GrayFaultsTest, RandomClosMatricesLocaliseTheDegradedLinkOnly) {
  constexpr uint32_t kTors = 8;
  constexpr uint32_t kAggs = 4;
  constexpr uint32_t kHostsPerTor = 4;
  // Link ids: host up (h), host down (h + H), tor->agg (2H + t*A + a), agg->tor (2H + TA + ...).
  constexpr uint32_t kHosts = kTors * kHostsPerTor;
  const auto up = [](uint32_t t, uint32_t a) { return 2 * kHosts + t * kAggs + a; };
  const auto down = [](uint32_t a, uint32_t t) {
    return 2 * kHosts + kTors * kAggs + t * kAggs + a;
  };
  int correct = 0;
  int ambiguous = 0;
  int skipped = 0;
  constexpr int kTrials = 60;
  for (int trial = 0; trial < kTrials; ++trial) {
    Rng rng(1000 + trial);
    // The degraded link: a random uplink or downlink.
    const uint32_t t0 = static_cast<uint32_t>(rng.Uniform(kTors));
    const uint32_t a0 = static_cast<uint32_t>(rng.Uniform(kAggs));
    const uint32_t bad = rng.UniformDouble() < 0.5 ? up(t0, a0) : down(a0, t0);
    const double fraction = 0.1 + 0.5 * rng.UniformDouble();
    std::vector<PathObservation> obs;
    for (int f = 0; f < 120; ++f) {
      const uint32_t src = static_cast<uint32_t>(rng.Uniform(kHosts));
      uint32_t dst = static_cast<uint32_t>(rng.Uniform(kHosts));
      if (dst / kHostsPerTor == src / kHostsPerTor) dst = (dst + kHostsPerTor) % kHosts;
      const uint32_t a = static_cast<uint32_t>(rng.Uniform(kAggs));
      PathObservation o =
          Obs({src, up(src / kHostsPerTor, a), down(a, dst / kHostsPerTor), kHosts + dst});
      const bool crosses = std::count(o.links.begin(), o.links.end(), LinkId(bad)) > 0;
      const double noise = 0.9 + 0.1 * rng.UniformDouble();  // Healthy flows: 90-100 %.
      o.rate_ratio = crosses ? fraction * noise : noise;
      obs.push_back(std::move(o));
    }
    const auto crossing = std::count_if(obs.begin(), obs.end(), [&](const PathObservation& o) {
      return std::count(o.links.begin(), o.links.end(), LinkId(bad)) > 0;
    });
    if (crossing < 2) {  // Too little evidence by construction (min_flows): not a trial.
      ++skipped;
      continue;
    }
    const std::vector<Suspect> s = GrayFaults(obs, {});
    const bool named =
        !s.empty() && std::fabs(s[0].estimate - fraction) < 0.1 && LinksOf(s).count(bad) > 0;
    if (named && s.size() == 1) {
      ++correct;
    } else if (named && std::all_of(s.begin(), s.end(), [&](const Suspect& x) {
                 return x.ambiguous && x.evidence == s[0].evidence;
               })) {
      ++ambiguous;  // The flows cross both links alike: no method can tell them apart.
    } else {
      ADD_FAILURE() << "trial " << trial << ": degraded link " << bad << " at " << fraction
                    << ", got " << s.size() << " suspects"
                    << (s.empty() ? "" : ", first " + std::to_string(s[0].link.value()));
    }
  }
  EXPECT_EQ(correct + ambiguous + skipped, kTrials);
  EXPECT_LT(skipped + ambiguous, kTrials / 4);
}

}  // namespace
}  // namespace crux::core
