#include "crux/core/topology/link_name.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::Must;
using ::testing::HasSubstr;

// Node names with '-' in them: "a-b" must be split where both halves are nodes.
class LinkNameTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const NodeId h = Must(t_.AddNode("host-0", NodeKind::kHost), "host");
    nic_ = Must(t_.AddNode("host-0/nic-0", NodeKind::kNic, h), "nic");
    tor_ = Must(t_.AddNode("tor-0", NodeKind::kTor), "tor");
    other_ = Must(t_.AddNode("tor-1", NodeKind::kTor), "tor1");
    link_ = Must(t_.AddLink(nic_, tor_, Bandwidth::Gbps(400)), "link");
  }
  Topology t_;
  NodeId nic_, tor_, other_;
  LinkId link_;
};

TEST_F(LinkNameTest, ArrowIsOneDirectionDashAndDoubleArrowAreBoth) {
  const LinkName one = Must(ParseLinkName(t_, "host-0/nic-0->tor-0"), "->");
  EXPECT_EQ(one, (LinkName{"host-0/nic-0", "tor-0", link_, false}));
  const LinkName dash = Must(ParseLinkName(t_, "host-0/nic-0-tor-0"), "-");
  EXPECT_EQ(dash, (LinkName{"host-0/nic-0", "tor-0", link_, true}));
  const LinkName both = Must(ParseLinkName(t_, "host-0/nic-0<->tor-0"), "<->");
  EXPECT_EQ(both, dash);
  const LinkName back = Must(ParseLinkName(t_, "tor-0->host-0/nic-0"), "back");
  EXPECT_EQ(back.link, t_.link(link_).reverse);
}

TEST_F(LinkNameTest, ErrorsNameTheLinkAndWhatIsMissing) {
  struct Case {
    const char* name;
    const char* says;
  };
  for (const Case& c :
       {Case{"nonsense", "expected 'a->b' or 'a-b'"}, Case{"tor-9->tor-0", "no node 'tor-9'"},
        Case{"tor-0->", "no node ''"}, Case{"tor-0->tor-1", "tor-0 and tor-1 are not adjacent"},
        Case{"tor-0-tor-1", "tor-0 and tor-1 are not adjacent"}}) {
    const Result<LinkName> r = ParseLinkName(t_, c.name);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("link '") + c.name + "'"));
    EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.name;
  }
}

}  // namespace
}  // namespace crux::core
