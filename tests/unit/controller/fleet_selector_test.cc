// Operator tags and fleet selectors (controller/fleet_selector.h): what is accepted, the
// exact refusal of each kind of bad input, and what a selector matches.
#include "controller/fleet_selector.h"

#include <gtest/gtest.h>

namespace edge::controller {
namespace {

std::string ErrorOf(const Status& st) {
  return st ? "ok" : st.error().message;
}
template <typename T>
std::string ErrorOf(const Result<T>& r) {
  if (r) return "ok";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
  return r.error().message;
}

TEST(NodeTags, KeysAndValuesFollowTheirCharsetAndLength) {
  for (const char* key : {"role", "a", "Zone-1", "team.web", "k8s.io/app", "x_y", "9lives"}) {
    EXPECT_EQ(ErrorOf(ValidateTagKey(key)), "ok") << key;
  }
  EXPECT_EQ(ErrorOf(ValidateTagKey(std::string(63, 'k'))), "ok");
  EXPECT_EQ(ErrorOf(ValidateTagKey("")),
            "tag key \"\" is empty: a tag key is 1-63 bytes of A-Z a-z 0-9 . _ / - starting with "
            "a letter or a digit");
  EXPECT_EQ(ErrorOf(ValidateTagKey(std::string(64, 'k'))),
            "tag key \"" + std::string(64, 'k') +
                "\" is 64 bytes, more than 63: a tag key is 1-63 bytes of A-Z a-z 0-9 . _ / - "
                "starting with a letter or a digit");
  EXPECT_EQ(ErrorOf(ValidateTagKey("bad key")),
            "tag key \"bad key\" has byte 4 (' ') that is not allowed: a tag key is 1-63 bytes "
            "of A-Z a-z 0-9 . _ / - starting with a letter or a digit");
  EXPECT_EQ(ErrorOf(ValidateTagKey(".hidden")),
            "tag key \".hidden\" has byte 1 ('.') that is not allowed first: a tag key is 1-63 "
            "bytes of A-Z a-z 0-9 . _ / - starting with a letter or a digit");
  EXPECT_NE(ErrorOf(ValidateTagKey("a=b")).find("byte 2 ('=')"), std::string::npos);
  EXPECT_NE(ErrorOf(ValidateTagKey("a\nb")).find("byte 2 ('\\n')"), std::string::npos);
  EXPECT_NE(ErrorOf(ValidateTagKey("caf\xc3\xa9")).find("byte 4"), std::string::npos);

  for (const char* v : {"web", "eu-west-1", "alice@example.com", "v1.2+build", "a:b/c", "_"}) {
    EXPECT_EQ(ErrorOf(ValidateTagValue("k", v)), "ok") << v;
  }
  EXPECT_EQ(ErrorOf(ValidateTagValue("k", std::string(128, 'v'))), "ok");
  EXPECT_EQ(ErrorOf(ValidateTagValue("k", "")),
            "value \"\" of tag \"k\" is empty: a tag value is 1-128 bytes of A-Z a-z 0-9 . _ : "
            "/ @ + -");
  EXPECT_NE(ErrorOf(ValidateTagValue("k", std::string(129, 'v'))).find("129 bytes, more than 128"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(ValidateTagValue("role", "a,b")),
            "value \"a,b\" of tag \"role\" has byte 2 (',') that is not allowed: a tag value is "
            "1-128 bytes of A-Z a-z 0-9 . _ : / @ + -");
  EXPECT_NE(ErrorOf(ValidateTagValue("k", "a=b")).find("byte 2 ('=')"), std::string::npos);
  EXPECT_NE(ErrorOf(ValidateTagValue("k", "a b")).find("byte 2 (' ')"), std::string::npos);
}

TEST(NodeTags, AssignmentsAndRemovalsAreParsed) {
  auto kv = ParseTagAssignment("role=web");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->first, "role");
  EXPECT_EQ(kv->second, "web");
  EXPECT_EQ(ErrorOf(ParseTagAssignment("role")),
            "tag \"role\" must be KEY=VALUE, such as role=web");
  EXPECT_NE(ErrorOf(ParseTagAssignment("=web")).find("tag key \"\" is empty"), std::string::npos);
  EXPECT_NE(ErrorOf(ParseTagAssignment("role=")).find("value \"\" of tag \"role\" is empty"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ParseTagAssignment("role=a=b")).find("byte 2 ('=')"), std::string::npos);

  auto any = ParseTagRemoval("role");
  ASSERT_TRUE(any);
  EXPECT_EQ(any->key, "role");
  EXPECT_FALSE(any->value.has_value());
  auto exact = ParseTagRemoval("role=web");
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->value, "web");
  EXPECT_NE(ErrorOf(ParseTagRemoval("")).find("is empty"), std::string::npos);
  EXPECT_NE(ErrorOf(ParseTagRemoval("role=")).find("is empty"), std::string::npos);
}

TEST(FleetSelector, ParsesEveryKindOfTerm) {
  auto sel = FleetSelector::Parse(" tag:role=web , label:site=lab,os:Linux,node:edge-01 ");
  ASSERT_TRUE(sel) << sel.error().message;
  ASSERT_EQ(sel->terms().size(), 4u);
  EXPECT_EQ(sel->terms()[0].kind, SelectorTerm::Kind::kTag);
  EXPECT_EQ(sel->terms()[0].key, "role");
  EXPECT_EQ(sel->terms()[0].value, "web");
  EXPECT_EQ(sel->terms()[1].kind, SelectorTerm::Kind::kLabel);
  EXPECT_EQ(sel->terms()[2].kind, SelectorTerm::Kind::kOs);
  EXPECT_EQ(sel->terms()[2].value, "linux") << "os is compared in lower case";
  EXPECT_EQ(sel->terms()[3].value, "edge-01");
  EXPECT_EQ(sel->ToString(), "tag:role=web,label:site=lab,os:linux,node:edge-01");
  // Labels are the node's: their values may hold what tag values may not.
  auto label = FleetSelector::Parse("label:agent.device_name=Bench Laptop #2");
  ASSERT_TRUE(label) << label.error().message;
  EXPECT_EQ(label->terms()[0].value, "Bench Laptop #2");
}

TEST(FleetSelector, RefusesBadInputNamingTheTerm) {
  EXPECT_EQ(ErrorOf(FleetSelector::Parse("")),
            "selector is empty: name the nodes with comma-separated terms, all of which must "
            "hold; a term is tag:K=V, label:K=V, os:X or node:ID");
  EXPECT_NE(ErrorOf(FleetSelector::Parse("   ")).find("selector is empty"), std::string::npos);
  EXPECT_EQ(ErrorOf(FleetSelector::Parse("os:linux,,tag:a=b")),
            "selector \"os:linux,,tag:a=b\": term 2 is empty; a term is tag:K=V, label:K=V, os:X "
            "or node:ID");
  EXPECT_NE(ErrorOf(FleetSelector::Parse("os:linux,")).find("term 2 is empty"), std::string::npos);
  EXPECT_NE(ErrorOf(FleetSelector::Parse(",os:linux")).find("term 1 is empty"), std::string::npos);
  EXPECT_EQ(ErrorOf(FleetSelector::Parse("os:linux,color:blue")),
            "selector term 2 \"color:blue\" has an unknown kind \"color\"; a term is tag:K=V, "
            "label:K=V, os:X or node:ID");
  EXPECT_EQ(ErrorOf(FleetSelector::Parse("linux")),
            "selector term 1 \"linux\" has no kind; a term is tag:K=V, label:K=V, os:X or "
            "node:ID");
  EXPECT_EQ(ErrorOf(FleetSelector::Parse("tag:role")),
            "selector term 1 \"tag:role\" must be tag:KEY=VALUE with both set");
  EXPECT_NE(ErrorOf(FleetSelector::Parse("tag:=web")).find("must be tag:KEY=VALUE"),
            std::string::npos);
  EXPECT_NE(ErrorOf(FleetSelector::Parse("label:site=")).find("must be label:KEY=VALUE"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(FleetSelector::Parse("tag:bad key=x")),
            "selector term 1 \"tag:bad key=x\": tag key \"bad key\" has byte 4 (' ') that is not "
            "allowed: a tag key is 1-63 bytes of A-Z a-z 0-9 . _ / - starting with a letter or a "
            "digit");
  EXPECT_NE(ErrorOf(FleetSelector::Parse("tag:k=v/w=x")).find("byte 4 ('=')"), std::string::npos);
  EXPECT_NE(ErrorOf(FleetSelector::Parse("label:a=b\x01")).find("control character"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(FleetSelector::Parse("os:")),
            "selector term 1 \"os:\": the value is empty: an os is 1-64 bytes of A-Z a-z 0-9 . _ "
            "-, such as linux");
  EXPECT_NE(ErrorOf(FleetSelector::Parse("node:a/b")).find("byte 2 ('/')"), std::string::npos);
  EXPECT_NE(ErrorOf(FleetSelector::Parse("node:" + std::string(65, 'n'))).find("65 bytes"),
            std::string::npos);

  std::string many;
  for (int i = 0; i < 33; ++i)
    many += (i ? "," : "") + std::string("os:linux");
  EXPECT_NE(ErrorOf(FleetSelector::Parse(many)).find("more than 32 terms"), std::string::npos);
  EXPECT_NE(ErrorOf(FleetSelector::Parse("label:k=" + std::string(5000, 'v'))).find("5008 bytes"),
            std::string::npos);
}

NodeView Node(const std::string& id, const std::string& os, NodeTags tags,
              std::map<std::string, std::string> labels) {
  NodeView v;
  v.node = {.node_id = id, .tenant_id = "t1", .state = kNodeHealthy};
  v.connected = true;
  v.edge = EdgeNodeRecord{.node_id = id, .tenant_id = "t1"};
  v.capabilities.set_os(os);
  for (const auto& [k, val] : labels)
    (*v.capabilities.mutable_custom_labels())[k] = val;
  v.tags = std::move(tags);
  return v;
}

TEST(FleetSelector, MatchesEveryTermAndKeepsTagsAndLabelsApart) {
  const NodeView web = Node("edge-01", "linux", {{"role", "web"}}, {{"site", "lab"}});
  const NodeView db = Node("edge-02", "linux", {{"role", "db"}}, {{"role", "web"}});
  const NodeView mac = Node("mac-01", "darwin", {{"role", "web"}}, {});
  auto matches = [](const std::string& text, const NodeView& v) {
    auto sel = FleetSelector::Parse(text);
    EXPECT_TRUE(sel) << text << ": " << sel.error().message;
    return sel && sel->Matches(v);
  };
  EXPECT_TRUE(matches("tag:role=web", web));
  EXPECT_FALSE(matches("tag:role=web", db)) << "a label of the same name is not a tag";
  EXPECT_TRUE(matches("label:role=web", db));
  EXPECT_FALSE(matches("label:role=web", web)) << "a tag of the same name is not a label";
  EXPECT_TRUE(matches("tag:role=web,os:linux", web));
  EXPECT_FALSE(matches("tag:role=web,os:linux", mac)) << "terms are ANDed";
  EXPECT_TRUE(matches("os:LINUX", web));
  EXPECT_TRUE(matches("node:edge-02", db));
  EXPECT_FALSE(matches("node:edge-02,node:edge-01", db));
  EXPECT_FALSE(matches("tag:role=WEB", web)) << "tag values are compared exactly";
  EXPECT_FALSE(matches("tag:zone=a", web));
}

TEST(FleetSelector, OnlyConnectedEnrolledUnrevokedNodesAreLive) {
  NodeView v = Node("edge-01", "linux", {}, {});
  EXPECT_TRUE(IsLive(v));
  v.connected = false;
  EXPECT_FALSE(IsLive(v));
  v = Node("edge-01", "linux", {}, {});
  v.edge.reset();
  EXPECT_FALSE(IsLive(v));
  v = Node("edge-01", "linux", {}, {});
  v.node.state = kNodeRevoked;
  EXPECT_FALSE(IsLive(v));
  v.node.state = kNodeDraining;
  EXPECT_TRUE(IsLive(v)) << "a draining node is live: it refuses new work itself";
}

}  // namespace
}  // namespace edge::controller
