// Router: an http::Handler that hands each request to the route whose method and path pattern
// match, for servers with more than one endpoint (the controller's worker control-plane
// endpoints and the operator API share one). A pattern is a path whose `{name}` segments each
// match one non-empty segment, percent-decoded ("/api/v1/worker/{id}/heartbeat"); a decoded
// segment holding '/' or a NUL byte matches nothing. A path no route matches is 404, a path
// that matches only with other methods is 405 with an Allow header; both answer with the JSON
// error body {"code","message"} of JsonError. Routes are added before the server starts and
// never change after; Handle may then run on any number of threads.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"

namespace edge::http {

using PathParams = std::map<std::string, std::string, std::less<>>;
using RouteHandler = std::function<void(std::shared_ptr<Exchange>, const PathParams&)>;

// {"code": code, "message": message} with `status`.
Response JsonError(unsigned status, std::string_view code, std::string_view message);

// The request's X-Request-ID, cut to 128 bytes ("" when there is none); escape it to log it.
std::string RequestId(const Request& request);
// Sends `response`, echoing the request's X-Request-ID when it has one.
void RespondEchoingRequestId(const std::shared_ptr<Exchange>& exchange, Response response);

class Router final : public Handler {
 public:
  // `method` is matched exactly ("POST"); `pattern` starts with '/'.
  void Add(std::string method, std::string_view pattern, RouteHandler handler);
  void Handle(std::shared_ptr<Exchange> exchange) override;

  // The route for a method and path, with its parameters (exposed for tests); nullptr when
  // none matches.
  const RouteHandler* Match(std::string_view method, std::string_view path,
                            PathParams& params) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // "{name}" = a parameter
    RouteHandler handler;
  };
  static bool MatchSegments(const Route& route, const std::vector<std::string>& path,
                            PathParams& params);

  std::vector<Route> routes_;
};

}  // namespace edge::http
