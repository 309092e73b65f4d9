#include "agent/bootstrap/join_token_redeemer.h"

#include "agent/edge/enrollment_files.h"

#include <unistd.h>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/join_token_claims.h"
#include "agent/identity/keystore_files.h"
#include "agent/identity/pkcs12.h"
#include "bootstrap.grpc.pb.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/secure_compare.h"
#include "config/join_token_remover.h"
#include "config/validate.h"

namespace edge::bootstrap {
namespace {

namespace pb = me::prexorjustin::prexorcloud::protocol;

// One line per failure status: the cause and what the operator should do next.
Error Explain(const grpc::Status& st, const std::string& address) {
  const std::string server = st.error_message();
  switch (st.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
      return {ErrorCode::kNotFound, "the controller does not know this join token (" + server +
                                        "): check that the whole token was copied, or ask the "
                                        "operator for a new one"};
    case grpc::StatusCode::FAILED_PRECONDITION:
      return {ErrorCode::kFailedPrecondition,
              "join token already used, expired or revoked (" + server +
                  "): ask the operator for a new one (edge-controller token create)"};
    case grpc::StatusCode::PERMISSION_DENIED:
      return {
          ErrorCode::kPermissionDenied,
          "join token is bound to another node (" + server +
              "): enroll with the node id it was created for, or ask for a token for this node"};
    case grpc::StatusCode::INVALID_ARGUMENT:
      return {ErrorCode::kInvalidArgument, "the controller rejected the request: " + server};
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {ErrorCode::kUnavailable, "controller at " + address + " unreachable (" + server +
                                           "): check controller.address and the network"};
    default:
      return {ErrorCode::kInternal,
              "enrollment failed with " + std::to_string(st.error_code()) + ": " + server};
  }
}

}  // namespace

// Checks the request and reads the token's claims (unverified: there is no key to verify
// them yet): where the controller is and which CA to expect.
Result<EnrollResult> JoinTokenRedeemer::Target(const EnrollRequest& req) const {
  auto log = log::Get("enroll");
  if (req.join_token.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "no join token: pass --token or set controller.join_token in the config");
  }
  log::RegisterSecret(req.join_token);
  if (!config::IsValidNodeId(req.node_id)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "node id \"" + req.node_id + "\" must match [A-Za-z0-9._-]{1,64}");
  }
  // The token's claims are read without verification: there is no key to verify them yet.
  auto claims = identity::JoinTokenClaims::FromTokenUnverified(req.join_token);
  if (!claims) {
    return MakeError(ErrorCode::kInvalidArgument, "the join token is malformed (" +
                                                      claims.error().message +
                                                      "): check that the whole token was copied");
  }
  EnrollResult result;
  result.controller_address =
      !req.controller_address.empty() ? req.controller_address : claims->cep;
  result.ca_pin = !req.ca_pin.empty() ? req.ca_pin : claims->cah;
  if (result.controller_address.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "no controller address: the token has no cep claim; set controller.address");
  }
  if (!config::IsHostPort(result.controller_address, false)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "controller address \"" + result.controller_address + "\" is not host:port");
  }
  if (!result.ca_pin.empty() && !config::IsCaPin(result.ca_pin)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "CA pin \"" + result.ca_pin + "\" is not sha256: followed by 64 hex digits");
  }
  if (result.ca_pin.empty()) {
    log->warn(
        "no CA pin (token cah claim or controller.ca_pin): the controller's certificate "
        "cannot be checked at first contact");
  }

  return result;
}

std::string JoinTokenRedeemer::SavedExchangePath(const std::string& data_dir) {
  return identity::KeystoreFiles::CertsDir(data_dir) + "/exchange.pending";
}

// The answer an interrupted enrollment stored; an error when there is none (or it does not
// parse, when it is removed).
Result<JoinTokenRedeemer::ExchangeResponse> JoinTokenRedeemer::LoadSavedExchange(
    const std::string& path) {
  auto bytes = ReadFile(path, 1 << 20);
  if (!bytes) return std::unexpected(bytes.error());
  ExchangeResponse resp;
  if (!resp.ParseFromString(*bytes)) {
    ::unlink(path.c_str());
    return MakeError(ErrorCode::kInternal, path + " does not parse; removed");
  }
  return resp;
}

// Everything that can fail locally fails now, before the single-use token is spent.
Status JoinTokenRedeemer::CheckLocal(const EnrollRequest& req) const {
  if (identity::KeystoreFiles::Exists(req.data_dir)) {
    return MakeError(ErrorCode::kAlreadyExists,
                     "already enrolled: " + identity::KeystoreFiles::CertsDir(req.data_dir) +
                         " holds a keystore; remove it to enroll again");
  }
  if (auto st = identity::KeystoreFiles::CheckWritable(req.data_dir); !st) {
    return MakeError(st.error().code, "data_dir is not writable: " + st.error().message);
  }
  if (!req.config_path.empty()) {
    if (auto st = config::JoinTokenRemover::CheckRewritable(req.config_path); !st) {
      return std::unexpected(st.error());
    }
  }

  return OkStatus();
}

// ExchangeJoinToken, retrying transient failures with backoff (interruptible waits).
Result<JoinTokenRedeemer::ExchangeResponse> JoinTokenRedeemer::Exchange(
    const EnrollRequest& req, const EnrollResult& target) {
  auto log = log::Get("enroll");
  pb::ExchangeJoinTokenRequest rpc_req;
  rpc_req.set_join_token(req.join_token);
  rpc_req.set_node_id(req.node_id);
  pb::ExchangeJoinTokenResponse resp;
  backoff_.Reset();
  for (int attempt = 1;; ++attempt) {
    auto pin_failure = std::make_shared<identity::PinFailure>();
    auto channel =
        identity::ChannelFactory::Bootstrap(target.controller_address, target.ca_pin, pin_failure);
    auto stub = pb::BootstrapService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + rpc_timeout_);
    auto st = stub->ExchangeJoinToken(&ctx, rpc_req, &resp);
    if (st.ok()) return resp;
    if (auto why = pin_failure->Get(); !why.empty()) {
      return MakeError(ErrorCode::kUnauthenticated, why);
    }
    Error e = Explain(st, target.controller_address);
    const bool transient = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!transient) return std::unexpected(e);
    if (attempt >= max_attempts_) {
      e.message += " (gave up after " + std::to_string(attempt) + " attempts)";
      return std::unexpected(e);
    }
    auto delay = backoff_.Next();
    log->warn("attempt {}/{}: {}; retrying in {} ms", attempt, max_attempts_, e.message,
              delay.count());
    if (!sleep_(delay)) {
      return MakeError(ErrorCode::kCancelled,
                       "interrupted (" + (stop_reason_ ? stop_reason_() : std::string("stopped")) +
                           ") while waiting to retry after attempt " + std::to_string(attempt) +
                           "/" + std::to_string(max_attempts_) + " (" + e.message +
                           "); nothing was stored");
    }
  }
}

// The response must be what was asked for before anything is written: the returned CA
// matches the pin, the keystore opens, its certificate is the node's and issued by that CA.
// Returns the returned CA's pin.
Result<std::string> JoinTokenRedeemer::CheckResponse(const EnrollRequest& req,
                                                     const EnrollResult& target,
                                                     const pb::ExchangeJoinTokenResponse& resp) {
  log::RegisterSecret(resp.pkcs12_password());

  const std::string ca_pem = resp.ca_certificate_pem();
  auto returned_pin = identity::CaPinOfPem(ca_pem);
  if (!returned_pin) {
    return MakeError(
        ErrorCode::kInternal,
        "the controller returned an unreadable CA certificate: " + returned_pin.error().message);
  }
  if (!target.ca_pin.empty() && !ConstantTimeEquals(*returned_pin, target.ca_pin)) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "the CA the controller returned (" + *returned_pin +
                         ") does not match the pin in the join token (" + target.ca_pin + ")");
  }
  auto contents = identity::ParsePkcs12(resp.pkcs12(), resp.pkcs12_password());
  if (!contents) {
    return MakeError(ErrorCode::kInternal,
                     "the controller returned an unreadable keystore: " + contents.error().message);
  }
  {
    auto leaf = identity::CertFromPem(contents->cert_pem);
    auto ca = identity::CertFromPem(ca_pem);
    if (!leaf || !ca || !identity::IsIssuedBy(leaf->get(), ca->get())) {
      return MakeError(ErrorCode::kInternal,
                       "the keystore's certificate is not issued by the returned CA");
    }
    char cn[128] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(leaf->get()), NID_commonName, cn, sizeof cn);
    if (req.node_id != cn) {
      return MakeError(ErrorCode::kInternal, "the keystore's certificate is for \"" +
                                                 std::string(cn) + "\", not \"" + req.node_id +
                                                 "\"");
    }
  }
  return *returned_pin;
}

Result<EnrollResult> JoinTokenRedeemer::Enroll(const EnrollRequest& req) {
  auto log = log::Get("enroll");
  auto target = Target(req);
  if (!target) return target;
  if (auto st = CheckLocal(req); !st) return std::unexpected(st.error());
  // The token is spent the moment the controller answers; its answer is stored before
  // anything else (checking it takes a while), so an agent killed after that resumes from
  // the stored answer instead of finding its token spent and nothing in hand.
  const std::string saved_path = SavedExchangePath(req.data_dir);
  Result<ExchangeResponse> resp = LoadSavedExchange(saved_path);
  if (resp) {
    log->info("resuming an interrupted enrollment from the controller's stored answer");
  } else {
    resp = Exchange(req, *target);
    if (!resp) return std::unexpected(resp.error());
    if (auto st = WriteFileAtomic(saved_path, resp->SerializeAsString(), {.mode = 0600}); !st) {
      log->warn("the controller's answer could not be kept while it is checked: {}",
                st.error().message);
    }
  }
  auto returned_pin = CheckResponse(req, *target, *resp);
  if (!returned_pin) {
    ::unlink(saved_path.c_str());  // a wrong answer is not worth resuming from
    return std::unexpected(returned_pin.error());
  }
  EnrollResult result = std::move(*target);
  result.ca_pin = *returned_pin;
  // The address goes down before the keystore: the keystore is what says "enrolled", and an
  // agent killed between the two must not come back enrolled with the token (whose cep claim
  // was the address) already gone from its config and no address anywhere.
  if (auto st = agentedge::EnrollmentFiles::WriteControllerAddress(req.data_dir,
                                                                   result.controller_address);
      !st) {
    return MakeError(st.error().code,
                     "the token was redeemed but the controller address could "
                     "not be stored (" +
                         st.error().message + "): free space or fix permissions, then try again");
  }
  if (auto st = identity::KeystoreFiles::Write(req.data_dir, resp->pkcs12(),
                                               resp->pkcs12_password(), resp->ca_certificate_pem());
      !st) {
    return MakeError(st.error().code,
                     "the token was redeemed but the keystore could not be stored (" +
                         st.error().message +
                         "): free space or fix permissions, then ask the "
                         "operator for a new token");
  }
  ::unlink(saved_path.c_str());
  if (!req.config_path.empty()) {
    auto removed = config::JoinTokenRemover::RemoveJoinToken(req.config_path, req.join_token);
    if (!removed) {
      // Enrolled all the same; the token is spent, so this is a warning, not a failure.
      log->warn("enrolled, but the join token could not be removed from {}: {}", req.config_path,
                removed.error().message);
    } else {
      result.token_removed_from_config = *removed;
    }
  }
  log->info("enrolled node {} with controller {} (CA {}); keystore in {}", req.node_id,
            result.controller_address, result.ca_pin,
            identity::KeystoreFiles::CertsDir(req.data_dir));
  return result;
}

}  // namespace edge::bootstrap
