#include "agent/identity/node_key.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "agent/identity/openssl_util.h"
#include "common/atomic_file.h"

namespace edge::identity {
namespace {

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

Result<NodeKey> NodeKey::FromPkey(EVP_PKEY* owned) {
  PkeyPtr key(owned);
  if (!key) return MakeError(ErrorCode::kInternal, "Ed25519 key: " + OpenSslErrors());
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "node key is not an Ed25519 key (type " +
                         std::to_string(EVP_PKEY_get_base_id(key.get())) + ")");
  }
  std::string pub(kEd25519PublicKeySize, '\0');
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(pub.data()), &len) !=
          1 ||
      len != kEd25519PublicKeySize) {
    return MakeError(ErrorCode::kInternal, "Ed25519 public key: " + OpenSslErrors());
  }
  return NodeKey(std::shared_ptr<EVP_PKEY>(key.release(), EVP_PKEY_free), std::move(pub));
}

Result<NodeKey> NodeKey::Generate() {
  return FromPkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
}

Result<NodeKey> NodeKey::FromSecret(std::string_view secret) {
  if (secret.size() != kEd25519SecretKeySize) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "Ed25519 secret key must be 32 bytes, got " + std::to_string(secret.size()));
  }
  return FromPkey(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, Bytes(secret), secret.size()));
}

Result<NodeKey> NodeKey::FromPem(std::string_view pem) {
  auto key = PrivateKeyFromPem(pem);
  if (!key) return std::unexpected(key.error());
  return FromPkey(key->release());
}

Result<NodeKey> NodeKey::Load(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    return MakeError(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal,
                     "node key " + path + ": " + std::strerror(err));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return MakeError(ErrorCode::kPermissionDenied,
                     "node key " + path + " has mode " + mode +
                         ": it must not be readable by group or others (chmod 0600)");
  }
  auto pem = ReadFile(path, 64 << 10);
  if (!pem) return std::unexpected(pem.error());
  auto key = FromPem(*pem);
  if (!key) return MakeError(key.error().code, "node key " + path + ": " + key.error().message);
  return key;
}

Result<std::string> NodeKey::ToPem() const {
  return PrivateKeyToPem(key_.get());
}

Status NodeKey::Save(const std::string& path) const {
  auto pem = ToPem();
  if (!pem) return std::unexpected(pem.error());
  return WriteFileAtomic(path, *pem, {.mode = 0600});
}

Result<std::string> NodeKey::Sign(std::string_view message) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  std::string sig(kEd25519SignatureSize, '\0');
  size_t len = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, Bytes(message),
                     message.size()) != 1 ||
      len != kEd25519SignatureSize) {
    return MakeError(ErrorCode::kInternal, "Ed25519 sign: " + OpenSslErrors());
  }
  return sig;
}

Status NodeKey::Verify(std::string_view public_key, std::string_view message,
                       std::string_view signature) {
  if (public_key.size() != kEd25519PublicKeySize) {
    return MakeError(ErrorCode::kInvalidArgument, "Ed25519 public key must be 32 bytes, got " +
                                                      std::to_string(public_key.size()));
  }
  if (signature.size() != kEd25519SignatureSize) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "Ed25519 signature must be 64 bytes, got " + std::to_string(signature.size()));
  }
  PkeyPtr key(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, Bytes(public_key), public_key.size()));
  if (!key) {
    ERR_clear_error();
    return MakeError(ErrorCode::kInvalidArgument, "Ed25519 public key is not a valid point");
  }
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return MakeError(ErrorCode::kInternal, "Ed25519 verify: " + OpenSslErrors());
  }
  if (EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(message),
                       message.size()) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kUnauthenticated, "Ed25519 signature does not verify");
  }
  return OkStatus();
}

}  // namespace edge::identity
