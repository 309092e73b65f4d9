// Fuzz target: everything the agent decodes from the wire or disk in edge_identity —
// JWT decoding, base64/base64url/hex, PKCS#12 parsing, PEM certificate bundles.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/identity/encoding.h"
#include "agent/identity/jwt.h"
#include "agent/identity/openssl_util.h"
#include "agent/identity/pkcs12.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  (void)edge::identity::DecodeJwtUnverified(s);
  if (auto b = edge::identity::Base64Decode(s)) {
    if (edge::identity::Base64Encode(*b) != s) __builtin_trap();  // strict decoding round-trips
  }
  if (auto b = edge::identity::Base64UrlDecode(s)) {
    if (edge::identity::Base64UrlEncode(*b) != s) __builtin_trap();
  }
  (void)edge::identity::HexDecode(s);
  (void)edge::identity::ParsePkcs12(s, "password");
  (void)edge::identity::CertsFromPem(s);
  return 0;
}
