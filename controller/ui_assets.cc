#include "controller/ui_assets.h"

#include <algorithm>
#include <array>
#include <utility>

namespace edge::controller {
namespace {

// host, host:port, [v6]:port — the characters a Host header of a plain authority has; nothing
// that could end a CSP directive or a header.
bool PlainAuthority(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == ':' || c == '[' || c == ']';
  });
}

http::Response NotFound() {
  return http::JsonError(404, "NOT_FOUND", "no such file of the fleet page");
}

}  // namespace

std::optional<std::string_view> UiAssets::Find(std::string_view name) {
  auto files = EmbeddedUiFiles();
  auto it = std::lower_bound(files.begin(), files.end(), name,
                             [](const EmbeddedFile& f, std::string_view n) { return f.name < n; });
  if (it == files.end() || it->name != name) return std::nullopt;
  return it->data;
}

std::string_view UiAssets::ContentTypeFor(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kTypes = {{
      {".html", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".json", "application/json"},
      {".png", "image/png"},
  }};
  for (const auto& [ext, type] : kTypes) {
    if (name.size() > ext.size() && name.ends_with(ext)) return type;
  }
  return "application/octet-stream";
}

std::string UiAssets::ContentSecurityPolicy(std::optional<std::string_view> host) {
  std::string connect = "connect-src 'self'";
  if (host && PlainAuthority(*host)) {
    connect += " ws://" + std::string(*host) + " wss://" + std::string(*host);
  }
  return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
         "font-src 'self'; " +
         connect +
         "; base-uri 'none'; form-action 'none'; object-src 'none'; frame-ancestors 'none'";
}

http::Headers UiAssets::PageHeaders(std::optional<std::string_view> host) {
  return {{"Cache-Control", "no-cache"},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Frame-Options", "DENY"},
          {"Content-Security-Policy", ContentSecurityPolicy(host)}};
}

http::Response UiAssets::Answer(std::string_view path, std::optional<std::string_view> host) {
  http::Response r;
  if (path == "/ui") {
    r = {.status = 301, .headers = {{"Location", "/ui/"}}, .body = "", .content_type = ""};
  } else {
    std::string_view name;
    if (path == "/ui/") {
      name = "index.html";
    } else if (path.starts_with("/ui/")) {
      name = path.substr(4);
    }
    // The router percent-decodes; the page's own links are plain names, so an escaped or
    // otherwise odd spelling ("//ui/x", "/ui/%61pp.js") is simply not found.
    auto data = name.empty() ? std::nullopt : Find(name);
    if (!data) {
      r = NotFound();
    } else {
      r = {.status = 200,
           .headers = {},
           .body = std::string(*data),
           .content_type = std::string(ContentTypeFor(name))};
    }
  }
  auto headers = PageHeaders(host);
  r.headers.insert(r.headers.end(), headers.begin(), headers.end());
  return r;
}

void UiAssets::Register(http::Router& router) {
  auto serve = [](std::shared_ptr<http::Exchange> ex, const http::PathParams&) {
    const http::Request& req = ex->request();
    http::RespondEchoingRequestId(ex, Answer(req.Path(), req.Header("Host")));
  };
  for (const char* method : {"GET", "HEAD"}) {
    router.Add(method, "/ui", serve);
    router.Add(method, "/ui/{name}", serve);
  }
}

}  // namespace edge::controller
