// The node's Ed25519 signing key (RFC 8032; wire.md §2.3–§2.5): it signs the attestation
// challenge, every ConnectEdge envelope and the rotation proof. Raw 32-byte public keys and
// 64-byte signatures on the wire; on disk a PKCS#8 PEM file written 0600 atomically. The
// path (design.md §5: data_dir/keys/node.ed25519) is the caller's choice. A NodeKey owns a
// reference to its OpenSSL key; copies share it (signing is thread-safe).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <openssl/types.h>

#include "common/error.h"

namespace edge::identity {

inline constexpr size_t kEd25519PublicKeySize = 32;
inline constexpr size_t kEd25519SecretKeySize = 32;  // RFC 8032's 32-byte secret (seed)
inline constexpr size_t kEd25519SignatureSize = 64;

class NodeKey {
 public:
  // A fresh key from the OS CSPRNG.
  static Result<NodeKey> Generate();
  // From RFC 8032's 32-byte secret key. INVALID_ARGUMENT when it is not 32 bytes.
  static Result<NodeKey> FromSecret(std::string_view secret);
  // From a PKCS#8 PEM holding an Ed25519 private key. INVALID_ARGUMENT otherwise.
  static Result<NodeKey> FromPem(std::string_view pem);
  // Reads a key file written by Save. PERMISSION_DENIED when the file is readable by group
  // or others (a leaked key must not be used silently); NOT_FOUND when it is missing.
  static Result<NodeKey> Load(const std::string& path);

  // Writes the key as PKCS#8 PEM, mode 0600, atomically (temp file, fsync, rename).
  Status Save(const std::string& path) const;
  // PKCS#8 PEM of the private key. Never log it.
  Result<std::string> ToPem() const;

  // The raw 32-byte public key (AttestNodeRequest.public_key, RotateEdgeKeyRequest).
  const std::string& public_key() const { return public_key_; }
  // Ed25519 signature (64 bytes) over `message`.
  Result<std::string> Sign(std::string_view message) const;

  // Verifies `signature` over `message` with a raw public key. INVALID_ARGUMENT when the
  // public key is not 32 bytes; UNAUTHENTICATED when the signature is not 64 bytes or does
  // not verify.
  static Status Verify(std::string_view public_key, std::string_view message,
                       std::string_view signature);

 private:
  NodeKey(std::shared_ptr<EVP_PKEY> key, std::string public_key)
      : key_(std::move(key)), public_key_(std::move(public_key)) {}
  static Result<NodeKey> FromPkey(EVP_PKEY* owned);
  std::shared_ptr<EVP_PKEY> key_;
  std::string public_key_;
};

}  // namespace edge::identity
