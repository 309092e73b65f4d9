// Every JSON shape of the compute-member protocol against examples written by hand from the
// contract document (shared/seeds/003, "MESSAGE TYPES" and "COMPUTE MEMBER PROTOCOL"), and
// the CloudEvent envelope: text_data, binary_data, proto_data, attributes.
#include "agent/compute/cloudevent_codec.h"

#include <google/protobuf/any.pb.h>
#include <gtest/gtest.h>

namespace edge::compute {
namespace {

using nlohmann::json;

// The contract's join example.
TEST(CloudEventCodec, JoinFromTheContract) {
  auto j = ParseJoin(json::parse(R"({
    "id": "6f1c1a1e-0000-4000-8000-000000000001",
    "tags": ["approval-service", "notification"],
    "joinedLegalEntityId": "acme-corp"
  })"));
  ASSERT_TRUE(j) << j.error().ToString();
  EXPECT_EQ(j->id, "6f1c1a1e-0000-4000-8000-000000000001");
  EXPECT_EQ(j->tags, (std::vector<std::string>{"approval-service", "notification"}));
  EXPECT_EQ(j->joined_legal_entity_id, "acme-corp");
  EXPECT_TRUE(j->success);  // absent: a join is a success
}

TEST(CloudEventCodec, JoinWrittenWithSuccessAndLegalEntity) {
  JoinEvent e{"j-1", {"a"}, "acme-corp", true};
  EXPECT_EQ(ToJson(e), json::parse(R"({"id":"j-1","tags":["a"],"joinedLegalEntityId":"acme-corp",
                                      "success":true})"));
  JoinEvent none{"j-2", {}, "", true};
  EXPECT_EQ(ToJson(none), json::parse(R"({"id":"j-2","tags":[],"success":true})"));
}

TEST(CloudEventCodec, JoinRefusesBadTags) {
  auto j = ParseJoin(json::parse(R"({"id":"x","tags":"approval"})"));
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(j.error().message, "CalculationMemberJoinEvent.tags must be a list of strings");
  EXPECT_FALSE(ParseJoin(json::parse(R"({"id":"x","tags":[1]})")));
  EXPECT_FALSE(ParseJoin(json::parse(R"({"id":7})")));
  EXPECT_FALSE(ParseJoin(json::parse(R"(["not an object"])")));
}

// The contract's greet example.
TEST(CloudEventCodec, GreetFromTheContract) {
  auto g = ParseGreet(json::parse(R"({
    "id": "member-uuid-1",
    "memberId": "member-uuid-1",
    "joinedLegalEntityId": "acme-corp",
    "success": true
  })"));
  ASSERT_TRUE(g) << g.error().ToString();
  EXPECT_EQ(g->member_id, "member-uuid-1");
  EXPECT_EQ(g->joined_legal_entity_id, "acme-corp");
  EXPECT_EQ(ToJson(*g), json::parse(R"({"id":"member-uuid-1","memberId":"member-uuid-1",
                                        "joinedLegalEntityId":"acme-corp","success":true})"));
  auto missing = ParseGreet(json::parse(R"({"id":"m"})"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "CalculationMemberGreetEvent.memberId is required");
}

TEST(CloudEventCodec, KeepAliveBothWays) {
  auto k = ParseKeepAlive(json::parse(R"({"id":"ka-1","memberId":"m-1","success":true})"));
  ASSERT_TRUE(k);
  EXPECT_EQ(k->member_id, "m-1");
  // The server's keep-alive may leave memberId out.
  auto bare = ParseKeepAlive(json::parse(R"({"id":"ka-2"})"));
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->member_id, "");
  EXPECT_EQ(ToJson(KeepAliveEvent{"ka-1", "m-1", true}),
            json::parse(R"({"id":"ka-1","memberId":"m-1","success":true})"));
  EXPECT_FALSE(ParseKeepAlive(json::parse(R"({"id":"ka","success":"yes"})")));
}

// The contract's EventAckResponse shape, with its optional fields.
TEST(CloudEventCodec, AckFromTheContract) {
  auto a = ParseAck(json::parse(R"({
    "id": "ack-uuid",
    "sourceEventId": "server-event-id",
    "success": true,
    "warnings": [],
    "error": null
  })"));
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->source_event_id, "server-event-id");
  EXPECT_TRUE(a->success);
  EXPECT_FALSE(a->error);
  // success is optional and defaults to true for an ack.
  EXPECT_TRUE(ParseAck(json::parse(R"({"id":"a","sourceEventId":"s"})")).value().success);
  EXPECT_EQ(ToJson(EventAck{"a", "s", true, std::nullopt, {}}),
            json::parse(R"({"id":"a","sourceEventId":"s","success":true})"));
  auto failed = ParseAck(json::parse(R"({"id":"a","sourceEventId":"s","success":false,
      "error":{"code":"CLIENT_ERROR","message":"bad","retryable":null}})"));
  ASSERT_TRUE(failed);
  EXPECT_FALSE(failed->success);
  ASSERT_TRUE(failed->error);
  EXPECT_EQ(failed->error->code, "CLIENT_ERROR");
  EXPECT_FALSE(failed->error->retryable.has_value());
  EXPECT_FALSE(ParseAck(json::parse(R"({"id":"a"})")));  // sourceEventId is required
}

// The contract's error object, including retryable null.
TEST(CloudEventCodec, ErrorObjectFromTheContract) {
  auto e = ParseErrorObject(json::parse(R"({"code":"SERVER_ERROR",
      "message":"SERVER_ERROR: internal error [ticket: 1234]","retryable":null})"),
                            "error");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "SERVER_ERROR");
  EXPECT_FALSE(e->retryable);
  EXPECT_EQ(ToJson(ErrorObject{"TIMED_OUT", "slow", true}),
            json::parse(R"({"code":"TIMED_OUT","message":"slow","retryable":true})"));
  EXPECT_EQ(ToJson(ErrorObject{"X", "m", std::nullopt}),
            json::parse(R"({"code":"X","message":"m","retryable":null})"));
  auto bad = ParseErrorObject(json::parse(R"({"code":"X","retryable":"no"})"), "error");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "error.retryable must be a bool or null");
}

constexpr const char* kProcessorExample = R"({
  "id": "req-1",
  "requestId": "req-1",
  "entityId": "ent-1",
  "processorId": "notify-approval",
  "processorName": "notify-approval",
  "workflow": {"id": "prize-lifecycle", "name": "prize-lifecycle"},
  "transition": {"id": "APPROVE", "name": "APPROVE"},
  "transactionId": "tx-1",
  "success": true,
  "payload": {
    "type": "JSON",
    "data": {"year": "2025", "category": "physics"},
    "meta": {
      "id": "ent-1",
      "modelKey": {"name": "nobel-prize", "version": 1},
      "state": "NEW",
      "creationDate": "2025-08-02T13:31:48.141053Z",
      "lastUpdateTime": "2025-08-02T13:31:48.141053Z",
      "transactionId": "tx-1"
    }
  }
})";

TEST(CloudEventCodec, ProcessorRequestFromTheContract) {
  auto r =
      ParseCalculationRequest(json::parse(kProcessorExample), CalculationRequest::Kind::kProcessor);
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->request_id, "req-1");
  EXPECT_EQ(r->entity_id, "ent-1");
  EXPECT_EQ(r->handler(), "notify-approval");
  EXPECT_EQ(r->transaction_id, "tx-1");
  EXPECT_EQ(r->workflow["name"], "prize-lifecycle");
  EXPECT_EQ(r->transition["id"], "APPROVE");
  EXPECT_EQ(r->data(), json::parse(R"({"year":"2025","category":"physics"})"));
  EXPECT_EQ(r->payload->at("meta").at("modelKey").at("version"), 1);
  // Written back as it came (what a tool reads on stdin).
  EXPECT_EQ(ToJson(*r), json::parse(kProcessorExample));
}

TEST(CloudEventCodec, ProcessorRequestWithoutPayloadOrRequestId) {
  // attachEntity=false: no payload; requestId falls back to the id.
  auto r =
      ParseCalculationRequest(json::parse(R"({"id":"r-9","entityId":"e","processorName":"p"})"),
                              CalculationRequest::Kind::kProcessor);
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->request_id, "r-9");
  EXPECT_FALSE(r->payload);
  EXPECT_TRUE(r->data().is_null());
  auto noname = ParseCalculationRequest(json::parse(R"({"id":"r","entityId":"e"})"),
                                        CalculationRequest::Kind::kProcessor);
  ASSERT_FALSE(noname);
  EXPECT_EQ(noname.error().message,
            "EntityProcessorCalculationRequest.processorName is required (or the id)");
  EXPECT_FALSE(ParseCalculationRequest(json::parse(R"({"processorName":"p"})"),
                                       CalculationRequest::Kind::kProcessor));
  EXPECT_FALSE(
      ParseCalculationRequest(json::parse(R"({"id":"r","processorName":"p","payload":[1]})"),
                              CalculationRequest::Kind::kProcessor));
}

TEST(CloudEventCodec, CriteriaRequestFromTheContract) {
  auto r = ParseCalculationRequest(json::parse(R"({
    "id": "req-2", "requestId": "req-2", "entityId": "ent-1",
    "criteriaId": "my-criteria-fn", "criteriaName": "my-criteria-fn", "target": "TRANSITION",
    "workflow": {"id": "prize-lifecycle", "name": "prize-lifecycle"},
    "transition": {"id": "APPROVE", "name": "APPROVE"},
    "transactionId": "tx-2", "success": true,
    "payload": {"type": "JSON", "data": {"year": "2025"}}
  })"),
                                   CalculationRequest::Kind::kCriteria);
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->handler(), "my-criteria-fn");
  EXPECT_EQ(r->target, "TRANSITION");
  EXPECT_EQ(r->data(), json::parse(R"({"year":"2025"})"));
}

TEST(CloudEventCodec, RequestWrittenFromFields) {
  CalculationRequest r;
  r.kind = CalculationRequest::Kind::kCriteria;
  r.id = r.request_id = "q";
  r.entity_id = "e";
  r.handler_id = r.handler_name = "c";
  r.target = "NA";
  r.payload = json{{"type", "JSON"}, {"data", {{"k", 1}}}};
  EXPECT_EQ(ToJson(r), json::parse(R"({"id":"q","requestId":"q","entityId":"e","criteriaId":"c",
      "criteriaName":"c","target":"NA","success":true,"payload":{"type":"JSON","data":{"k":1}}})"));
}

// The contract's processor response, and the member's own.
TEST(CloudEventCodec, ProcessorResponseBothWays) {
  auto p = ParseProcessorResponse(json::parse(R"({
    "requestId": "req-1", "success": true,
    "payload": {"type": "JSON", "data": {"approved": true}},
    "warnings": [], "error": null
  })"));
  ASSERT_TRUE(p) << p.error().ToString();
  EXPECT_TRUE(p->success);
  EXPECT_EQ(*p->data, json::parse(R"({"approved":true})"));

  ProcessorResponse out;
  out.id = "resp-1";
  out.request_id = "req-1";
  out.entity_id = "ent-1";
  out.data = json{{"approved", true}};
  EXPECT_EQ(ToJson(out), json::parse(R"({"id":"resp-1","requestId":"req-1","entityId":"ent-1",
      "success":true,"payload":{"type":"JSON","data":{"approved":true}}})"));

  ProcessorResponse failed;
  failed.id = "resp-2";
  failed.request_id = "req-1";
  failed.entity_id = "ent-1";
  failed.success = false;
  failed.error = ErrorObject{"TOOL_FAILED", "exit 3", false};
  EXPECT_EQ(ToJson(failed), json::parse(R"({"id":"resp-2","requestId":"req-1","entityId":"ent-1",
      "success":false,"error":{"code":"TOOL_FAILED","message":"exit 3","retryable":false}})"));
  // success absent = false (the reference server's default).
  EXPECT_FALSE(ParseProcessorResponse(json::parse(R"({"requestId":"r"})")).value().success);
  EXPECT_FALSE(ParseProcessorResponse(json::parse(R"({"success":true})")));
}

// The contract's criteria response, and the member's own with a reason.
TEST(CloudEventCodec, CriteriaResponseBothWays) {
  auto c = ParseCriteriaResponse(json::parse(R"({
    "requestId": "req-2", "success": true, "matches": true, "warnings": [], "error": null
  })"));
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_TRUE(c->matches);
  CriteriaResponse out;
  out.id = "r";
  out.request_id = "req-2";
  out.entity_id = "e";
  out.matches = false;
  out.reason = "year too early";
  EXPECT_EQ(ToJson(out), json::parse(R"({"id":"r","requestId":"req-2","entityId":"e",
      "success":true,"matches":false,"reason":"year too early"})"));
  auto no_matches = ParseCriteriaResponse(json::parse(R"({"requestId":"r","success":true})"));
  ASSERT_FALSE(no_matches);
  EXPECT_EQ(no_matches.error().message,
            "EntityCriteriaCalculationResponse.matches is required when success is true");
  EXPECT_FALSE(
      ParseCriteriaResponse(json::parse(R"({"requestId":"r","success":true,"matches":"yes"})")));
}

// The contract's ack envelope: id, source "client", spec_version "1.0", type, text_data.
TEST(CloudEventCodec, EnvelopeFromTheContract) {
  auto ev = MakeCloudEvent(kAckEvent, ToJson(EventAck{"ack-uuid", "server-event-id", true, {}, {}}),
                           kClientSource);
  EXPECT_EQ(ev.id(), "ack-uuid");
  EXPECT_EQ(ev.source(), "client");
  EXPECT_EQ(ev.spec_version(), "1.0");
  EXPECT_EQ(ev.type(), "EventAckResponse");
  ASSERT_EQ(ev.data_case(), ce::CloudEvent::kTextData);
  EXPECT_EQ(json::parse(ev.text_data()),
            json::parse(R"({"id":"ack-uuid","sourceEventId":"server-event-id","success":true})"));
  auto d = DecodeCloudEvent(ev);
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_EQ(d->type, "EventAckResponse");
  EXPECT_EQ(d->id, "ack-uuid");
  // A body without an id gets a new UUID.
  auto fresh = MakeCloudEvent(kKeepAliveEvent, json::object(), kClientSource);
  EXPECT_EQ(fresh.id().size(), 36u);
}

TEST(CloudEventCodec, BinaryDataIsJsonToo) {
  ce::CloudEvent ev;
  ev.set_id("e1");
  ev.set_type(std::string(kKeepAliveEvent));
  ev.set_binary_data(R"({"id":"e1","success":true})");
  auto d = DecodeCloudEvent(ev);
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_EQ(d->body["id"], "e1");
}

TEST(CloudEventCodec, RefusesProtoDataNoDataAndNonObjects) {
  ce::CloudEvent ev;
  ev.set_id("e1");
  ev.set_type(std::string(kProcessorRequest));
  ev.mutable_proto_data()->set_type_url("type.googleapis.com/x");
  auto proto = DecodeCloudEvent(ev);
  ASSERT_FALSE(proto);
  EXPECT_EQ(proto.error().message,
            "CloudEvent EntityProcessorCalculationRequest: proto_data is not supported (JSON in "
            "text_data expected)");
  ev.clear_proto_data();
  EXPECT_FALSE(DecodeCloudEvent(ev));  // no data
  ev.set_text_data("[1,2]");
  EXPECT_FALSE(DecodeCloudEvent(ev));
  ev.set_text_data("{not json");
  EXPECT_FALSE(DecodeCloudEvent(ev));
  ev.set_text_data(std::string(100, '[') + std::string(100, ']'));
  EXPECT_FALSE(DecodeCloudEvent(ev));  // too deep
  ev.set_text_data(R"({"id":"x"})");
  EXPECT_FALSE(DecodeCloudEvent(ev, 4));  // larger than the limit
  ev.set_type("");
  EXPECT_FALSE(DecodeCloudEvent(ev));
}

// The auth context extension attributes the server attaches to dispatched requests.
TEST(CloudEventCodec, AuthAttributes) {
  ce::CloudEvent ev = MakeCloudEvent(kProcessorRequest, json{{"id", "r"}}, kServerSource);
  (*ev.mutable_attributes())["authtype"].set_ce_string("service_account");
  (*ev.mutable_attributes())["authid"].set_ce_string("user-7");
  (*ev.mutable_attributes())["authclaims"].set_ce_string("ROLE_M2M,ROLE_ADMIN");
  (*ev.mutable_attributes())["count"].set_ce_integer(3);
  auto d = DecodeCloudEvent(ev);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->attributes.at("authtype"), "service_account");
  EXPECT_EQ(d->attributes.at("authid"), "user-7");
  EXPECT_EQ(d->attributes.at("authclaims"), "ROLE_M2M,ROLE_ADMIN");
  EXPECT_FALSE(d->attributes.contains("count"));
}

}  // namespace
}  // namespace edge::compute
