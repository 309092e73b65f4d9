// Fuzz target: bytes as a UI's WebSocket text frame (ParseControlFrame, then a SessionRelay
// with two sockets: rate limit, de-duplication, the security filter, the echo) and as a
// session process's stdout/stderr chunks (SessionOutput: line assembly, classification).
//
// Invariants: nothing crashes or throws; a frame the parser accepts has a UUIDv4 message_id,
// this session's id and an object payload; every frame the relay sends is valid JSON of
// version rawp-dps-1.0, numbered frames carry increasing seq; every line the assembler hands
// out is at most the limit and its frame's payload is an object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "controller/sessions/rawp_frame.h"
#include "controller/sessions/session_output.h"
#include "controller/sessions/session_relay.h"
#include "tests/support/manual_clock.h"

namespace {

namespace ctl = edge::controller;
constexpr const char* kSession = "5b0c8f0e-1d2a-4c3b-9e4f-0a1b2c3d4e5f";

void Check(bool ok) {
  if (!ok) std::abort();
}

class Sink : public ctl::RelaySocket {
 public:
  void Send(std::string frame) override {
    auto j = nlohmann::json::parse(frame, nullptr, false);
    Check(j.is_object() && j.value("v", "") == "rawp-dps-1.0");
    if (j.contains("seq")) {
      const uint64_t seq = j["seq"].get<uint64_t>();
      Check(seq > last_seq);
      last_seq = seq;
    }
  }
  size_t pending_bytes() const override { return 0; }
  void Close(uint16_t, std::string) override {}
  uint64_t last_seq = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto f = ctl::ParseControlFrame(text, kSession, 4096);
  if (f) {
    Check(ctl::IsUuidV4(f->message_id));
    Check(f->session_id == kSession);
    Check(f->payload.is_object());
  }

  static edge::ManualClock clock;
  ctl::RelaySettings settings;
  settings.max_buffer_size = 64 << 10;
  settings.pinned_tools = {"file.read", "search"};
  settings.denied_tools = {"exec"};
  ctl::SessionRelay relay(kSession, clock, settings);
  auto a = std::make_shared<Sink>(), b = std::make_shared<Sink>();
  const uint64_t ia = relay.Attach(a, std::nullopt);
  const uint64_t ib = relay.Attach(b, std::nullopt);
  // The same bytes twice from two sockets (dedup), split at a newline into two frames too.
  relay.OnText(ia, text);
  relay.OnText(ib, text);
  if (auto nl = text.find('\n'); nl != std::string_view::npos) {
    relay.OnText(ia, text.substr(0, nl));
    relay.OnText(ib, text.substr(nl + 1));
  }

  ctl::SessionOutput out(64);
  auto sink = [&](ctl::ProcessFrame pf) {
    Check(pf.payload.is_object());
    if (pf.type == "agent.output") {
      const auto& d = pf.payload["data"].get_ref<const std::string&>();
      // U+FFFD for each bad byte may triple a line's length, never more.
      Check(d.size() <= 3 * 64 + 3);
    }
    ctl::OutFrame o;
    o.type = pf.type;
    o.session_id = kSession;
    o.turn_id = pf.turn_id;
    o.payload = std::move(pf.payload);
    relay.Publish(std::move(o));
  };
  const size_t half = size / 2;
  out.Append(false, text.substr(0, half), sink);
  out.Append(true, text.substr(half), sink);
  out.Append(false, text.substr(half), sink);
  out.Flush(sink);
  return 0;
}
