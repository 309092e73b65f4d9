// The fleet page's files as the controller serves them (controller/ui_assets.h): the build
// embedded every file of controller/ui/ byte for byte, the page loads nothing that is not
// one of them (no inline script or style a strict CSP would block, no download), the
// routes, content types, headers and CSP, and the refusals (unknown names, odd spellings,
// other methods). The page in a real browser: tests/browser/.
#include "controller/ui_assets.h"
#include "tests/support/build_paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace edge::controller {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Header(const http::Response& r, std::string_view name) {
  return std::string(http::FindHeader(r.headers, name).value_or(""));
}

fs::path UiDir() {
  return fs::path(edge::testing::SourceDir()) / "controller" / "ui";
}

bool Served(const fs::path& p) {
  static const std::set<std::string> kExt = {".html", ".css", ".js", ".svg"};
  return kExt.contains(p.extension().string());
}

TEST(UiAssetsEmbedding, EveryFileOfTheUiDirectoryIsEmbeddedByteForByte) {
  std::set<std::string> on_disk;
  for (const auto& e : fs::directory_iterator(UiDir())) {
    if (!e.is_regular_file() || !Served(e.path())) continue;
    const std::string name = e.path().filename().string();
    on_disk.insert(name);
    auto data = UiAssets::Find(name);
    ASSERT_TRUE(data) << name << " is in controller/ui/ but not embedded (re-run cmake?)";
    EXPECT_EQ(*data, ReadFile(e.path())) << name << " differs from the embedded copy";
  }
  EXPECT_TRUE(on_disk.contains("index.html"));
  EXPECT_TRUE(on_disk.contains("app.js"));
  EXPECT_TRUE(on_disk.contains("app.css"));
  std::set<std::string> embedded;
  std::string previous;
  for (const auto& f : EmbeddedUiFiles()) {
    EXPECT_LT(previous, f.name) << "the table must be sorted for Find";
    previous = std::string(f.name);
    embedded.insert(previous);
  }
  EXPECT_EQ(embedded, on_disk);
  EXPECT_FALSE(UiAssets::Find("README.md"));
  EXPECT_FALSE(UiAssets::Find(""));
  EXPECT_FALSE(UiAssets::Find("index.htm"));
}

// Everything index.html and the modules load is an embedded file, by a relative name; no
// inline script, inline style, event-handler attribute or javascript: URL (the CSP forbids
// them, so they would silently not work), and nothing from another origin.
TEST(UiAssetsEmbedding, ThePageLoadsOnlyItsOwnFilesAndNothingInline) {
  const std::string html(*UiAssets::Find("index.html"));
  std::regex ref(R"re((?:src|href)="([^"]*)")re");
  int refs = 0;
  for (std::sregex_iterator it(html.begin(), html.end(), ref), end; it != end; ++it) {
    std::string target = (*it)[1];
    if (target.starts_with("#")) continue;  // in-page links (skip link)
    ++refs;
    EXPECT_TRUE(UiAssets::Find(target))
        << "index.html loads \"" << target << "\", which is not an embedded file";
  }
  EXPECT_GE(refs, 3) << "the favicon, the stylesheet and the entry module";
  std::regex script_tag(R"(<script\b[^>]*>)");
  for (std::sregex_iterator it(html.begin(), html.end(), script_tag), end; it != end; ++it) {
    EXPECT_NE(it->str().find("src="), std::string::npos) << "inline script: " << it->str();
    EXPECT_NE(it->str().find("type=\"module\""), std::string::npos) << it->str();
  }
  EXPECT_EQ(html.find("<style"), std::string::npos) << "inline <style>";
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(\sstyle=)"))) << "style attribute";
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(\son[a-z]+=)"))) << "event-handler attribute";
  EXPECT_EQ(html.find("javascript:"), std::string::npos);

  std::regex import_re(R"re(\bfrom\s+'([^']+)')re");
  for (const auto& f : EmbeddedUiFiles()) {
    const std::string text(f.data);
    if (f.name.ends_with(".js")) {
      for (std::sregex_iterator it(text.begin(), text.end(), import_re), end; it != end; ++it) {
        std::string target = (*it)[1];
        ASSERT_TRUE(target.starts_with("./")) << f.name << " imports " << target;
        EXPECT_TRUE(UiAssets::Find(target.substr(2)))
            << f.name << " imports " << target << ", which is not embedded";
      }
      EXPECT_EQ(text.find("innerHTML"), std::string::npos)
          << f.name << ": text from the network is set as text, never parsed as HTML";
      EXPECT_EQ(text.find("eval("), std::string::npos) << f.name;
    }
    for (const char* remote : {"src=\"http", "href=\"http", "url(http", "from 'http", "//cdn"}) {
      EXPECT_EQ(text.find(remote), std::string::npos) << f.name << " loads from elsewhere";
    }
  }
}

TEST(UiAssetsHeaders, ContentTypesByExtension) {
  EXPECT_EQ(UiAssets::ContentTypeFor("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(UiAssets::ContentTypeFor("app.css"), "text/css; charset=utf-8");
  EXPECT_EQ(UiAssets::ContentTypeFor("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(UiAssets::ContentTypeFor("x.mjs"), "text/javascript; charset=utf-8");
  EXPECT_EQ(UiAssets::ContentTypeFor("favicon.svg"), "image/svg+xml");
  EXPECT_EQ(UiAssets::ContentTypeFor("a.json"), "application/json");
  EXPECT_EQ(UiAssets::ContentTypeFor("a.png"), "image/png");
  EXPECT_EQ(UiAssets::ContentTypeFor("README"), "application/octet-stream");
  EXPECT_EQ(UiAssets::ContentTypeFor(".js"), "application/octet-stream");
  EXPECT_EQ(UiAssets::ContentTypeFor("a.js.bak"), "application/octet-stream");
}

TEST(UiAssetsHeaders, StrictCspWithTheSameHostsWebSockets) {
  const std::string csp = UiAssets::ContentSecurityPolicy("127.0.0.1:8080");
  for (const char* part : {"default-src 'self'", "script-src 'self'", "style-src 'self'",
                           "connect-src 'self' ws://127.0.0.1:8080 wss://127.0.0.1:8080",
                           "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"}) {
    EXPECT_NE(csp.find(part), std::string::npos) << part << " missing from " << csp;
  }
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
  EXPECT_NE(UiAssets::ContentSecurityPolicy("[::1]:9000").find("ws://[::1]:9000 wss://[::1]:9000"),
            std::string::npos);
  // A Host that is not a plain authority adds nothing; 'self' still covers the REST calls.
  for (std::string_view bad :
       {std::string_view("evil.example; script-src *"), std::string_view("a b"),
        std::string_view("x\r\nSet-Cookie: a"), std::string_view(""), std::string_view("host/path"),
        std::string_view("*")}) {
    const std::string c = UiAssets::ContentSecurityPolicy(bad);
    EXPECT_NE(c.find("connect-src 'self'; "), std::string::npos) << bad << ": " << c;
    EXPECT_EQ(c.find("ws://"), std::string::npos) << bad << ": " << c;
  }
  EXPECT_EQ(UiAssets::ContentSecurityPolicy(std::nullopt).find("ws://"), std::string::npos);
  EXPECT_EQ(UiAssets::ContentSecurityPolicy(std::string(300, 'a')).find("ws://"),
            std::string::npos);
}

void ExpectPageHeaders(const http::Response& r, const std::string& what) {
  EXPECT_EQ(Header(r, "Cache-Control"), "no-cache") << what;
  EXPECT_EQ(Header(r, "X-Content-Type-Options"), "nosniff") << what;
  EXPECT_EQ(Header(r, "X-Frame-Options"), "DENY") << what;
  EXPECT_EQ(Header(r, "Referrer-Policy"), "no-referrer") << what;
  EXPECT_NE(Header(r, "Content-Security-Policy").find("frame-ancestors 'none'"), std::string::npos)
      << what;
}

TEST(UiAssetsAnswer, IndexFilesRedirectAndNotFound) {
  auto index = UiAssets::Answer("/ui/", "localhost:1234");
  EXPECT_EQ(index.status, 200u);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(index.body, *UiAssets::Find("index.html"));
  ExpectPageHeaders(index, "/ui/");
  EXPECT_NE(Header(index, "Content-Security-Policy").find("ws://localhost:1234"),
            std::string::npos);

  auto js = UiAssets::Answer("/ui/app.js", "localhost:1234");
  EXPECT_EQ(js.status, 200u);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(js.body, *UiAssets::Find("app.js"));
  ExpectPageHeaders(js, "/ui/app.js");
  EXPECT_EQ(UiAssets::Answer("/ui/index.html", std::nullopt).body, index.body);

  auto redirect = UiAssets::Answer("/ui", "localhost:1234");
  EXPECT_EQ(redirect.status, 301u);
  EXPECT_EQ(Header(redirect, "Location"), "/ui/");
  EXPECT_TRUE(redirect.body.empty());
  ExpectPageHeaders(redirect, "/ui");

  for (std::string_view path :
       {"/ui/nope.js", "/ui/README.md", "/ui/app.js/", "/ui/%61pp.js", "//ui/app.js", "/ui//app.js",
        "/ui/../controller.cc", "/uix", "/ui/ui/app.js"}) {
    auto r = UiAssets::Answer(path, std::nullopt);
    EXPECT_EQ(r.status, 404u) << path;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_EQ(j.value("code", ""), "NOT_FOUND") << path << ": " << r.body;
    ExpectPageHeaders(r, std::string(path));
  }
}

// The routes on a real router, through a stand-in Exchange.
class RecordingExchange : public http::Exchange {
 public:
  explicit RecordingExchange(http::Request r) : request_(std::move(r)) {}
  const http::Request& request() const override { return request_; }
  void Respond(http::Response r) override { response = std::move(r); }
  void BeginStream(unsigned, http::Headers, std::string) override {}
  void WriteChunk(std::string, std::function<void(bool)>) override {}
  void EndStream() override {}
  void OnClientGone(std::function<void()>) override {}
  bool client_gone() const override { return false; }
  std::optional<http::Response> response;

 private:
  http::Request request_;
};

http::Response Route(http::Router& router, const std::string& method, const std::string& target) {
  auto ex = std::make_shared<RecordingExchange>(
      http::Request{.method = method,
                    .target = target,
                    .headers = {{"Host", "127.0.0.1:7"}, {"X-Request-ID", "r1"}}});
  router.Handle(ex);
  EXPECT_TRUE(ex->response) << method << " " << target;
  return ex->response.value_or(http::Response{.status = 0});
}

TEST(UiAssetsRoutes, GetAndHeadOnlyUnknownPathsNotFound) {
  http::Router router;
  UiAssets::Register(router);
  auto r = Route(router, "GET", "/ui/?x=1");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(Header(r, "X-Request-ID"), "r1");
  EXPECT_NE(Header(r, "Content-Security-Policy").find("ws://127.0.0.1:7 wss://127.0.0.1:7"),
            std::string::npos);
  // HEAD is routed the same; the server leaves the body out (http_server_test.cc).
  r = Route(router, "HEAD", "/ui/app.css");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.content_type, "text/css; charset=utf-8");
  EXPECT_EQ(Route(router, "GET", "/ui").status, 301u);
  EXPECT_EQ(Route(router, "HEAD", "/ui").status, 301u);
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS"}) {
    r = Route(router, method, "/ui/app.js");
    EXPECT_EQ(r.status, 405u) << method;
    EXPECT_EQ(Header(r, "Allow"), "GET, HEAD") << method;
    EXPECT_EQ(Route(router, method, "/ui/").status, 405u) << method;
  }
  EXPECT_EQ(Route(router, "GET", "/ui/a/b.js").status, 404u);
  EXPECT_EQ(Route(router, "GET", "/ui/nope.html").status, 404u);
}

}  // namespace
}  // namespace edge::controller
