#include "controller/call_limits.h"

#include "controller/node_cluster_service.h"
#include "controller/peer_identity.h"

namespace edge::controller {

bool UnauthenticatedCalls::Acquire(const std::string& peer) {
  std::lock_guard lock(mu_);
  auto& n = per_peer_[peer];
  if (total_ >= settings_.max_calls || n >= settings_.max_per_peer) {
    if (n == 0) per_peer_.erase(peer);
    return false;
  }
  ++n;
  ++total_;
  return true;
}

void UnauthenticatedCalls::Release(const std::string& peer) {
  std::lock_guard lock(mu_);
  auto it = per_peer_.find(peer);
  if (it == per_peer_.end()) return;
  if (--it->second == 0) per_peer_.erase(it);
  --total_;
}

size_t UnauthenticatedCalls::open() const {
  std::lock_guard lock(mu_);
  return total_;
}

namespace {

namespace exp = grpc::experimental;

class CallLimitInterceptor final : public exp::Interceptor {
 public:
  CallLimitInterceptor(exp::ServerRpcInfo* info, UnauthenticatedCalls& calls, std::string peer)
      : info_(info), calls_(calls), peer_(std::move(peer)) {
    acquired_ = calls_.Acquire(peer_);
    if (!acquired_) {
      calls_.refusals().Warn(
          log::Get("limits"), peer_,
          "call " + log::Escape(info_->method()) + " from " + log::Escape(peer_) +
              " without a client certificate cancelled: at most " +
              std::to_string(calls_.settings().max_per_peer) + " per address and " +
              std::to_string(calls_.settings().max_calls) + " in total may be open at once");
    }
  }
  ~CallLimitInterceptor() override {
    if (acquired_) calls_.Release(peer_);
  }

  void Intercept(exp::InterceptorBatchMethods* methods) override {
    if (!acquired_ && !cancelled_ &&
        methods->QueryInterceptionHookPoint(
            exp::InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      cancelled_ = true;
      info_->server_context()->TryCancel();
    }
    methods->Proceed();
  }

 private:
  exp::ServerRpcInfo* info_;
  UnauthenticatedCalls& calls_;
  const std::string peer_;
  bool acquired_ = false;
  bool cancelled_ = false;
};

}  // namespace

exp::Interceptor* CallLimitInterceptorFactory::CreateServerInterceptor(exp::ServerRpcInfo* info) {
  auto* ctx = info->server_context();
  if (ctx == nullptr || PeerCommonName(*ctx)) return nullptr;  // an enrolled node
  return new CallLimitInterceptor(info, calls_, NodeClusterServiceImpl::PeerAddress(ctx->peer()));
}

}  // namespace edge::controller
