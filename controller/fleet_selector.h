// Operator tags and fleet selectors: the rules, as pure functions (no Store, no I/O).
//
// Tags (`edge-controller tag --node N add|remove K=V`) are the operator's own key/value pairs
// on a node, stored on the controller only (seeds/000: "server-managed tags are never
// overwritten" by a node's CapabilityUpdate). The rules:
//   key    1–63 bytes of A–Z a–z 0–9 . _ / -, starting with a letter or a digit;
//   value  1–128 bytes of A–Z a–z 0–9 . _ : / @ + -   (no ',', '=' or spaces: a value must
//          read back unambiguously inside a selector);
//   at most kMaxTagsPerNode tags per node.
// Every refusal is INVALID_ARGUMENT naming the key or value, the offending byte and the rule.
//
// A selector picks the nodes of a fleet command: comma-separated terms, all of which must
// hold (AND); spaces around a term are ignored:
//   tag:K=V     the node has operator tag K with value V
//   label:K=V   the node reported label K with value V (EdgeCapabilities.custom_labels, the
//               agent config's `labels` plus the agent.* labels the agent states itself)
//   os:X        the node's reported os is X, compared case-insensitively (the agent reports
//               uname's sysname in lower case: "linux")
//   node:ID     the node's id is ID
// An empty selector, an empty term, a term without a kind, an unknown kind or a malformed
// value is INVALID_ARGUMENT naming the term and its position. At most kMaxSelectorTerms
// terms and kMaxSelectorBytes bytes. The selector matches terms only; which nodes may take
// part (live ones) is FleetCommands' rule.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "controller/edge_fleet.h"
#include "controller/store.h"

namespace edge::controller {

inline constexpr size_t kMaxTagsPerNode = 32;
inline constexpr size_t kMaxTagKeyBytes = 63;
inline constexpr size_t kMaxTagValueBytes = 128;
inline constexpr size_t kMaxSelectorTerms = 32;
inline constexpr size_t kMaxSelectorBytes = 4096;

// OK for a valid tag key; INVALID_ARGUMENT otherwise (see above).
Status ValidateTagKey(std::string_view key);
// OK for a valid value of tag `key`; INVALID_ARGUMENT otherwise.
Status ValidateTagValue(std::string_view key, std::string_view value);
// "K=V" (what `tag add` takes): the validated key and value.
Result<std::pair<std::string, std::string>> ParseTagAssignment(std::string_view text);
// "K" (whatever its value) or "K=V" (only with that value): what `tag remove` takes.
Result<TagRemoval> ParseTagRemoval(std::string_view text);

struct SelectorTerm {
  enum class Kind { kTag, kLabel, kOs, kNode };
  Kind kind = Kind::kNode;
  std::string key;    // tag and label terms
  std::string value;  // the tag's or label's value, the os (lower case), the node id
};

class FleetSelector {
 public:
  static Result<FleetSelector> Parse(std::string_view text);

  // True when every term holds for `node` (its tags, labels, os and id).
  bool Matches(const NodeView& node) const;
  const std::vector<SelectorTerm>& terms() const { return terms_; }
  // The terms as one canonical string ("tag:role=web,os:linux").
  std::string ToString() const;

 private:
  std::vector<SelectorTerm> terms_;
};

// A node that can take part in a fleet command now: it has a live edge stream, it is
// edge-enrolled and it is not revoked.
bool IsLive(const NodeView& node);

}  // namespace edge::controller
