// Fuzz target: the compute-member parser (agent/compute/cloudevent_codec.h). The input is read
// twice: as a serialized CloudEvent (the wire), decoded and its body parsed as the shape its
// type names, and as the JSON body of every event type. Whatever parses must write back and
// parse again to the same value (round trip); nothing may crash, throw or recurse unbounded.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/compute/cloudevent_codec.h"
#include "common/json_parse.h"

namespace {

using namespace edge::compute;
using nlohmann::json;

template <typename T, typename Parse>
void RoundTrip(const json& body, Parse parse) {
  auto first = parse(body);
  if (!first) return;
  const json written = ToJson(*first);
  auto second = parse(written);
  if (!second) __builtin_trap();  // what we write, we must read
  if (ToJson(*second) != written) __builtin_trap();
}

void AllShapes(const json& body) {
  RoundTrip<JoinEvent>(body, ParseJoin);
  RoundTrip<GreetEvent>(body, ParseGreet);
  RoundTrip<KeepAliveEvent>(body, ParseKeepAlive);
  RoundTrip<EventAck>(body, ParseAck);
  RoundTrip<ProcessorResponse>(body, ParseProcessorResponse);
  RoundTrip<CriteriaResponse>(body, ParseCriteriaResponse);
  for (auto kind : {CalculationRequest::Kind::kProcessor, CalculationRequest::Kind::kCriteria}) {
    auto r = ParseCalculationRequest(body, kind);
    if (r) {
      (void)r->data();
      (void)ToJson(*r).dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  (void)ParseErrorObject(body, "error");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  ce::CloudEvent event;
  if (event.ParseFromString(bytes)) {
    if (auto d = DecodeCloudEvent(event, 1 << 20)) AllShapes(d->body);
  }
  if (auto body = edge::ParseJsonBounded(bytes, "fuzz input")) AllShapes(*body);
  return 0;
}
