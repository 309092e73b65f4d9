// Fuzz target: what the operator's fleet extension reads from the wire and the command line —
// a fleet selector (the REST body's `selector`, `fleet invoke --selector`), a tag assignment
// or removal (`tag add K=V`, `tag remove K[=V]`) and the REST POST body. The first byte picks
// the parser: 'S' selector, 'A' assignment, 'R' removal, anything else the body.
//
// Invariants: nothing crashes or throws; every refusal is INVALID_ARGUMENT with a message; a
// parsed selector's canonical form parses again to the same form and matches a node without
// crashing; a parsed tag passes the key and value rules again; a parsed body has a selector
// and a tool.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "controller/fleet_api.h"
#include "controller/fleet_selector.h"

namespace {

namespace ctl = edge::controller;

void Check(bool ok) {
  if (!ok) std::abort();
}

template <typename R>
void CheckRefusal(const R& r) {
  if (r) return;
  Check(r.error().code == edge::ErrorCode::kInvalidArgument);
  Check(!r.error().message.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0]) {
    case 'S': {
      auto sel = ctl::FleetSelector::Parse(in);
      CheckRefusal(sel);
      if (!sel) break;
      const std::string canonical = sel->ToString();
      auto again = ctl::FleetSelector::Parse(canonical);
      Check(again.has_value() && again->ToString() == canonical);
      ctl::NodeView node;
      node.node.node_id = "edge-01";
      node.capabilities.set_os("linux");
      (*node.capabilities.mutable_custom_labels())["role"] = "web";
      node.tags = {{"role", "web"}};
      (void)sel->Matches(node);
      break;
    }
    case 'A': {
      auto kv = ctl::ParseTagAssignment(in);
      CheckRefusal(kv);
      if (kv) Check(ctl::ValidateTagKey(kv->first) && ctl::ValidateTagValue(kv->first, kv->second));
      break;
    }
    case 'R': {
      auto r = ctl::ParseTagRemoval(in);
      CheckRefusal(r);
      if (r) {
        Check(static_cast<bool>(ctl::ValidateTagKey(r->key)));
        if (r->value) Check(static_cast<bool>(ctl::ValidateTagValue(r->key, *r->value)));
      }
      break;
    }
    default: {
      auto spec = ctl::FleetApi::ParseInvokeBody(in);
      CheckRefusal(spec);
      if (spec) Check(!spec->selector.empty() && !spec->tool.empty());
      break;
    }
  }
  return 0;
}
