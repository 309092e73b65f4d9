// Fuzz target: the byte encodings and PEM bundles edge_identity reads from the wire or disk —
// base64 (strict, must round-trip), base64url (strict, must round-trip), hex, PEM certificates.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/identity/encoding.h"
#include "agent/identity/join_token_claims.h"
#include "agent/identity/openssl_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  if (auto b = edge::identity::Base64Decode(s)) {
    if (edge::identity::Base64Encode(*b) != s) __builtin_trap();  // strict decoding round-trips
  }
  if (auto b = edge::identity::Base64UrlDecode(s)) {
    if (edge::identity::Base64UrlEncode(*b) != s) __builtin_trap();
  }
  if (auto b = edge::identity::HexDecode(s)) {
    if (b->size() * 2 != s.size()) __builtin_trap();
  }
  (void)edge::identity::CertsFromPem(s);
  (void)edge::identity::ValidateCaPin(s);
  return 0;
}
