// An http(s) base URL as the edge_http Client needs it: scheme, host, port and a path prefix.
// Used for the worker's control_plane_url and a worker's advertised rpc_url.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"

namespace edge::http {

struct Url {
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  std::string base_path;  // "" or "/prefix" (no trailing slash)
};

// Parses http(s)://host[:port][/path] (IPv6 hosts in brackets; the port defaults to 80/443).
// INVALID_ARGUMENT naming `what` and the URL for anything else.
Result<Url> ParseUrl(std::string_view url, std::string_view what);

}  // namespace edge::http
