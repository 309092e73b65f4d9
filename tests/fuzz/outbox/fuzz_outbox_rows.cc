// Fuzz target: the edge outbox's rows as they are read back from disk (agent/edge/
// outbox_store.h) — whatever a crash, a full disk or an older version left in the table. The
// input is split into a result blob, a command id, a stream id and an attempts count, written
// with SQL straight into `edge_outbox`, then read through All, Get and TakeForResend.
//
// Invariants: nothing crashes or throws; All lists the row at most once (an unreadable one
// is skipped); TakeForResend drops a row whose command id is not UTF-8 and returns any other
// exactly once and deliverable: when the stored result
// did not parse, was too large or was tried too often, it is an Err naming the command.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/edge/outbox_store.h"
#include "common/log.h"
#include "common/utf8.h"
#include "sandbox/state_db.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace {

struct World {
  edge::testing::TempDir dir{"fuzz-outbox"};
  edge::ManualClock clock;
  std::unique_ptr<edge::agentedge::OutboxStore> outbox;
  std::unique_ptr<edge::sandbox::StateDb> raw;  // a second connection, as another process
  World() {
    edge::log::Init({.level = spdlog::level::off});  // thousands of inputs a second
    auto o = edge::agentedge::OutboxStore::Open(dir.path(), clock, {.max_attempts = 3});
    auto r = edge::sandbox::StateDb::Open(dir.path());
    if (!o || !r) __builtin_trap();
    outbox = std::move(*o);
    raw = std::move(*r);
  }
};

// The next length-prefixed piece of the input (one byte of length), or the rest.
std::string Take(std::string_view& in) {
  if (in.empty()) return {};
  const size_t n = std::min<size_t>(static_cast<unsigned char>(in[0]), in.size() - 1);
  std::string out(in.substr(1, n));
  in.remove_prefix(1 + n);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Destroyed at exit (a static, not a leaked pointer), so its temp dir goes with it.
  static World world;
  World* w = &world;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string command_id = Take(in);
  if (command_id.empty()) command_id = "cmd";
  const std::string stream_id = Take(in);
  const int64_t attempts = in.empty() ? 0 : static_cast<signed char>(in[0]);
  if (!in.empty()) in.remove_prefix(1);
  const std::string result(in);  // the rest: the stored EdgeResult bytes

  if (!w->raw->Exec("DELETE FROM edge_outbox")) __builtin_trap();
  if (!w->raw->Exec("INSERT INTO edge_outbox (command_id, result, created_ms, stream_id, "
                    "written_ms, attempts) VALUES (?, ?, ?, ?, ?, ?)",
                    {command_id, edge::sandbox::SqlBlob{result}, int64_t{1}, stream_id, int64_t{2},
                     attempts})) {
    __builtin_trap();
  }
  auto all = w->outbox->All();  // an unreadable row is skipped there (with a warning)
  if (!all || all->size() > 1) __builtin_trap();
  if (all->size() == 1 && (*all)[0].command_id != command_id) __builtin_trap();
  (void)w->outbox->Get(command_id);  // an unreadable row is an error, not a crash

  auto taken = w->outbox->TakeForResend(/*max_result_bytes=*/4096);
  if (!taken) __builtin_trap();
  if (!edge::IsValidUtf8(command_id)) {  // damaged beyond addressing: dropped
    if (!taken->empty() || !w->outbox->All()->empty()) __builtin_trap();
    return 0;
  }
  if (taken->size() != 1) __builtin_trap();
  const auto& e = (*taken)[0];
  if (e.command_id != command_id) __builtin_trap();
  std::string wire;
  if (!e.result.SerializeToString(&wire)) __builtin_trap();
  if (e.result.has_err() &&
      e.result.err().message().find("could not be delivered") != std::string::npos) {
    if (e.result.err().message().find(command_id) == std::string::npos) __builtin_trap();
  } else if (result.size() > 4096) {
    __builtin_trap();  // too large for one message, yet not replaced
  }
  // What was replaced is stored replaced: the next read parses.
  auto again = w->outbox->Get(command_id);
  if (!again || !*again) __builtin_trap();
  return 0;
}
