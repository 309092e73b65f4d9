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

// DER bytes of the keystore.
Result<std::string> CreatePkcs12(std::string_view key_pem, std::string_view cert_pem,
                                 std::string_view ca_pem, const std::string& password);
// INVALID_ARGUMENT for garbage, UNAUTHENTICATED for a wrong password.
Result<KeystoreContents> ParsePkcs12(std::string_view der, const std::string& password);
// 32 characters from [A-Za-z0-9], from the CSPRNG without modulo bias.
std::string GeneratePkcs12Password();

}  // namespace edge::identity
