#include "agent/identity/jwt.h"

#include <openssl/ecdsa.h>

#include "agent/identity/encoding.h"
#include "common/json_parse.h"

namespace edge::identity {
namespace {

struct EcdsaSigFree {
  void operator()(ECDSA_SIG* s) const { ECDSA_SIG_free(s); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

Result<std::string> DerToRaw(const std::string& der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<ECDSA_SIG, EcdsaSigFree> sig(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())));
  if (!sig) return MakeError(ErrorCode::kInternal, "bad ECDSA signature: " + OpenSslErrors());
  const BIGNUM *r = nullptr, *s = nullptr;
  ECDSA_SIG_get0(sig.get(), &r, &s);
  std::string raw(64, '\0');
  if (BN_bn2binpad(r, reinterpret_cast<unsigned char*>(raw.data()), 32) != 32 ||
      BN_bn2binpad(s, reinterpret_cast<unsigned char*>(raw.data()) + 32, 32) != 32) {
    return MakeError(ErrorCode::kInternal, "ECDSA signature does not fit P-256");
  }
  return raw;
}

std::optional<std::string> RawToDer(std::string_view raw) {
  if (raw.size() != 64) return std::nullopt;
  std::unique_ptr<ECDSA_SIG, EcdsaSigFree> sig(ECDSA_SIG_new());
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 32, 32, nullptr);
  if (!r || !s || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return std::nullopt;
  }
  unsigned char* der = nullptr;
  int n = i2d_ECDSA_SIG(sig.get(), &der);
  if (n <= 0) return std::nullopt;
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  return out;
}

bool IsP256(EVP_PKEY* key) {
  if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) return false;
  char name[64] = {};
  size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(key, "group", name, sizeof name, &len) != 1) return false;
  return std::string_view(name) == "prime256v1";
}

}  // namespace

Result<EcSigningKey> EcSigningKey::Generate() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return MakeError(ErrorCode::kInternal, "generate P-256 key: " + OpenSslErrors());
  return EcSigningKey(std::move(key));
}

Result<EcSigningKey> EcSigningKey::FromPem(std::string_view pem) {
  auto key = PrivateKeyFromPem(pem);
  if (!key) return std::unexpected(key.error());
  if (!IsP256(key->get()))
    return MakeError(ErrorCode::kInvalidArgument, "signing key is not an EC P-256 key");
  return EcSigningKey(std::move(*key));
}

Result<std::string> EcSigningKey::PrivatePem() const {
  return PrivateKeyToPem(key_.get());
}
Result<std::string> EcSigningKey::PublicPem() const {
  return PublicKeyToPem(key_.get());
}

Result<std::string> SignJwtEs256(const nlohmann::json& claims, const EcSigningKey& key) {
  const std::string header = R"({"alg":"ES256","typ":"JWT"})";
  const std::string signing_input = Base64UrlEncode(header) + "." + Base64UrlEncode(claims.dump());
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  size_t len = 0;
  if (EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len,
                     reinterpret_cast<const unsigned char*>(signing_input.data()),
                     signing_input.size()) != 1) {
    return MakeError(ErrorCode::kInternal, "ES256 sign: " + OpenSslErrors());
  }
  std::string der(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(der.data()), &len,
                     reinterpret_cast<const unsigned char*>(signing_input.data()),
                     signing_input.size()) != 1) {
    return MakeError(ErrorCode::kInternal, "ES256 sign: " + OpenSslErrors());
  }
  der.resize(len);
  auto raw = DerToRaw(der);
  if (!raw) return std::unexpected(raw.error());
  return signing_input + "." + Base64UrlEncode(*raw);
}

Result<JwtParts> DecodeJwtUnverified(std::string_view token) {
  size_t d1 = token.find('.');
  size_t d2 = d1 == std::string_view::npos ? d1 : token.find('.', d1 + 1);
  if (d1 == std::string_view::npos || d2 == std::string_view::npos ||
      token.find('.', d2 + 1) != std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "token is not a JWT: expected three dot-separated parts");
  }
  auto header = Base64UrlDecode(token.substr(0, d1));
  if (!header) return MakeError(ErrorCode::kInvalidArgument, "JWT header is not base64url");
  auto claims = Base64UrlDecode(token.substr(d1 + 1, d2 - d1 - 1));
  if (!claims) return MakeError(ErrorCode::kInvalidArgument, "JWT claims are not base64url");
  // Bounded before nlohmann sees it: a token is read before anything about it is trusted.
  if (auto st = CheckJsonDepth(*header, "JWT header", kMaxTokenJsonDepth); !st)
    return std::unexpected(st.error());
  if (auto st = CheckJsonDepth(*claims, "JWT claims", kMaxTokenJsonDepth); !st)
    return std::unexpected(st.error());
  JwtParts parts;
  parts.header = nlohmann::json::parse(*header, nullptr, false);
  parts.claims = nlohmann::json::parse(*claims, nullptr, false);
  if (!parts.header.is_object())
    return MakeError(ErrorCode::kInvalidArgument, "JWT header is not a JSON object");
  if (!parts.claims.is_object())
    return MakeError(ErrorCode::kInvalidArgument, "JWT claims are not a JSON object");
  return parts;
}

Result<JwtParts> VerifyJwtEs256(std::string_view token, EVP_PKEY* public_key, Clock::WallTime now,
                                const JwtVerifyOptions& options) {
  auto parts = DecodeJwtUnverified(token);
  if (!parts) return MakeError(ErrorCode::kUnauthenticated, parts.error().message);
  // Only ES256: "none", HMAC and anything else (or a non-string alg) are refused, so a
  // token cannot choose how it is checked (algorithm confusion).
  const auto alg_it = parts->header.find("alg");
  const std::string alg =
      alg_it != parts->header.end() && alg_it->is_string() ? alg_it->get<std::string>() : "";
  if (alg != "ES256") {
    return MakeError(ErrorCode::kUnauthenticated,
                     "JWT alg \"" + alg.substr(0, 32) + "\" is not accepted (only ES256)");
  }
  size_t d2 = token.rfind('.');
  auto raw = Base64UrlDecode(token.substr(d2 + 1));
  std::optional<std::string> der = raw ? RawToDer(*raw) : std::nullopt;
  if (!der)
    return MakeError(ErrorCode::kUnauthenticated, "JWT signature is not a 64-byte ES256 signature");
  std::string_view input = token.substr(0, d2);
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, public_key) != 1 ||
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(der->data()), der->size(),
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kUnauthenticated, "JWT signature does not verify");
  }
  const auto& c = parts->claims;
  const int64_t t =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const int64_t leeway = options.leeway.count();
  auto num = [&](const char* k) -> std::optional<int64_t> {
    if (!c.contains(k)) return std::nullopt;
    if (!c[k].is_number_integer()) return INT64_MIN;
    return c[k].get<int64_t>();
  };
  auto exp = num("exp");
  if (!exp || *exp == INT64_MIN)
    return MakeError(ErrorCode::kUnauthenticated, "JWT has no integer exp claim");
  // t and leeway are small: t - leeway cannot overflow, whatever exp says.
  if (t - leeway >= *exp)
    return MakeError(ErrorCode::kUnauthenticated, "JWT expired at " + std::to_string(*exp));
  if (auto nbf = num("nbf"); nbf && (*nbf == INT64_MIN || t + leeway < *nbf)) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "JWT is not valid before " + std::to_string(*nbf));
  }
  if (auto iat = num("iat"); iat && (*iat == INT64_MIN || t + leeway < *iat)) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "JWT was issued in the future (iat " + std::to_string(*iat) + ")");
  }
  if (!options.audience.empty()) {
    bool ok = false;
    if (c.contains("aud") && c["aud"].is_string()) ok = c["aud"] == options.audience;
    if (c.contains("aud") && c["aud"].is_array()) {
      for (const auto& a : c["aud"])
        ok = ok || (a.is_string() && a == options.audience);
    }
    if (!ok)
      return MakeError(ErrorCode::kUnauthenticated,
                       "JWT audience is not \"" + options.audience + "\"");
  }
  if (!options.issuer.empty() && !(c.contains("iss") && c["iss"] == options.issuer)) {
    return MakeError(ErrorCode::kUnauthenticated, "JWT issuer is not \"" + options.issuer + "\"");
  }
  return parts;
}

}  // namespace edge::identity
