// UiAssets: the controller's fleet web page (controller/ui/: index.html, app.css, the ES
// modules, favicon.svg; issue 12), compiled into the binary at build time —
// cmake/EmbedFiles.cmake writes EmbeddedUiFiles() into the build directory — and served on
// the controller's http::Router beside the operator API:
//   GET|HEAD /ui          → 301, Location: /ui/
//   GET|HEAD /ui/         → index.html
//   GET|HEAD /ui/{name}   → the embedded file of that name
//   an unknown name, or any other path under /ui/ → 404 {"code":"NOT_FOUND"}; other methods
//   → 405 with Allow: GET, HEAD (the router). HEAD gets GET's headers without the body.
// No authentication here: the files hold nothing secret; the page asks for a user token and
// sends it only with its calls to the operator API (which checks it).
// Every answer carries PageHeaders(): Cache-Control: no-cache (the files change with the
// binary, so a browser revalidates rather than keeping an old page), X-Content-Type-Options:
// nosniff, Referrer-Policy: no-referrer, X-Frame-Options: DENY and ContentSecurityPolicy()
// — nothing but the page's own files runs or loads (no inline script or style anywhere in
// it), it connects only to its own origin (REST, and the WebSocket relay over ws:/wss: to the
// same host) and cannot be framed. Content-Type comes from the name's extension
// (ContentTypeFor). The table is static and immutable; Register may be called once per router.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "http/router.h"

namespace edge::controller {

struct EmbeddedFile {
  std::string_view name;  // "app.js": a plain file name, no directories
  std::string_view data;
};

// The page's files, sorted by name (generated at build time from controller/ui/).
std::span<const EmbeddedFile> EmbeddedUiFiles();

class UiAssets {
 public:
  // Adds the /ui routes to `router`.
  static void Register(http::Router& router);

  // The embedded file called `name`; nullopt when there is none.
  static std::optional<std::string_view> Find(std::string_view name);
  // "text/html; charset=utf-8" for .html, text/css, text/javascript (module scripts need a
  // JavaScript type under nosniff), image/svg+xml, application/json, image/png;
  // application/octet-stream for anything else.
  static std::string_view ContentTypeFor(std::string_view name);
  // The CSP for a request whose Host header is `host`: default-src 'self', scripts, styles,
  // images and fonts from 'self' only, connect-src 'self' plus ws:// and wss:// of that host
  // (a Host that is not a plain host[:port] adds nothing: 'self' alone), base-uri 'none',
  // form-action 'none', object-src 'none', frame-ancestors 'none'.
  static std::string ContentSecurityPolicy(std::optional<std::string_view> host);
  // The headers every /ui answer carries (CSP for `host` included).
  static http::Headers PageHeaders(std::optional<std::string_view> host);
  // The answer to a GET of the request path `path` ("/ui", "/ui/", "/ui/app.js", … as sent,
  // not decoded) with Host `host` (exposed for tests; the server drops the body for HEAD).
  static http::Response Answer(std::string_view path, std::optional<std::string_view> host);
};

}  // namespace edge::controller
