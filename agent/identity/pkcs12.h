// PKCS#12 keystores as wire.md §1 mints them: one key entry named "cert", chain [leaf, CA],
// PBES2/PBKDF2/AES-256-CBC for key and certificates, HMAC-SHA-256 MAC (OpenSSL 3 reads it
// without -legacy), protected by a 32-character [A-Za-z0-9] password.
#pragma once

#include <string>
#include <string_view>

#include "common/error.h"

namespace edge::identity {

struct KeystoreContents {
  std::string key_pem;
  std::string cert_pem;   // the leaf
  std::string chain_pem;  // the other certificates (the CA), PEM concatenated
};

// DER bytes of the keystore: one key entry named `friendly_name` holding `key_pem` and the
// leaf `cert_pem`, with every certificate of `ca_pem` (the chain, normally just the CA).
// PBKDF2 with 2048 iterations for key and certificates, MAC iterations 2048.
Result<std::string> CreatePkcs12(std::string_view key_pem, std::string_view cert_pem,
                                 std::string_view ca_pem, const std::string& password,
                                 const std::string& friendly_name = "cert");
// INVALID_ARGUMENT for garbage or a keystore without a key entry, UNAUTHENTICATED for a
// wrong password (the MAC does not verify).
Result<KeystoreContents> ParsePkcs12(std::string_view der, const std::string& password);
// 32 characters from [A-Za-z0-9], from the CSPRNG without modulo bias.
std::string GeneratePkcs12Password();

}  // namespace edge::identity
