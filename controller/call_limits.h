// Limits on calls from connections without a verified client certificate (issue 15 #7: 4000
// grpc.health.v1.Health Watch streams from one peer took the controller from 37 to 100 MB for
// good). A server interceptor counts the calls and streams open at once from unauthenticated
// peers — health, reflection, ExchangeJoinToken and whatever else they try — in total and per
// peer IP address; a call beyond either limit is cancelled before its handler runs (the
// client sees CANCELLED) and logged through RefusalLog. Calls of enrolled nodes (a verified
// certificate) are not counted.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "controller/refusal_log.h"

namespace edge::controller {

struct CallLimitSettings {
  size_t max_calls = 256;    // limits.unauthenticated_calls
  size_t max_per_peer = 16;  // limits.unauthenticated_calls_per_peer
};

// The counts, shared by every interceptor of one server. Thread-safe.
class UnauthenticatedCalls {
 public:
  UnauthenticatedCalls(CallLimitSettings settings, RefusalLog& refusals)
      : settings_(settings), refusals_(refusals) {}

  // Counts a call from `peer`; false (nothing counted) when a limit is reached.
  bool Acquire(const std::string& peer);
  void Release(const std::string& peer);
  size_t open() const;
  const CallLimitSettings& settings() const { return settings_; }
  RefusalLog& refusals() { return refusals_; }

 private:
  const CallLimitSettings settings_;
  RefusalLog& refusals_;
  mutable std::mutex mu_;
  size_t total_ = 0;
  std::map<std::string, size_t> per_peer_;
};

class CallLimitInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallLimitInterceptorFactory(UnauthenticatedCalls& calls) : calls_(calls) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  UnauthenticatedCalls& calls_;
};

}  // namespace edge::controller
