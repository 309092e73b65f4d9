// systemd's notify protocol (Type=notify, WatchdogSec=), spoken directly over
// $NOTIFY_SOCKET so the agent needs no libsystemd. A no-op when not run by systemd.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace edge::daemon {

// Sends one state string ("READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=..."); returns
// false when there is no NOTIFY_SOCKET or the send failed.
bool SdNotify(std::string_view state);

// The watchdog interval systemd asked for ($WATCHDOG_USEC, when $WATCHDOG_PID is ours or unset).
std::optional<std::chrono::microseconds> SdWatchdogInterval();

}  // namespace edge::daemon
