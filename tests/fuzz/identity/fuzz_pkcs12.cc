// Fuzz target: PKCS#12 keystores as the agent reads certs/node.p12 (and the enrollment
// response), with the corpus password and a wrong one.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/identity/pkcs12.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  (void)edge::identity::ParsePkcs12(s, "password");
  (void)edge::identity::ParsePkcs12(s, "");
  return 0;
}
