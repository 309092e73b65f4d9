#include "common/random.h"

#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>

namespace edge {

uint64_t DefaultRandom::Uniform(uint64_t bound) {
  if (bound == 0) return 0;
  std::lock_guard lock(mu_);
  return std::uniform_int_distribution<uint64_t>(0, bound - 1)(gen_);
}

std::string SecureRandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    std::fputs("fatal: OpenSSL RAND_bytes failed\n", stderr);
    std::abort();
  }
  return out;
}

std::string NewUuidV4() {
  std::string b = SecureRandomBytes(16);
  b[6] = static_cast<char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<char>((b[8] & 0x3f) | 0x80);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    auto c = static_cast<unsigned char>(b[i]);
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  return out;
}

}  // namespace edge
