#include "tests/integration/worker_tokens.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "tests/integration/harness.h"

namespace edge::testing {

std::string B64Url(std::string_view in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {a[v >> 18], a[(v >> 12) & 63], a[(v >> 6) & 63], a[v & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += {a[v >> 18], a[(v >> 12) & 63]};
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {a[v >> 18], a[(v >> 12) & 63], a[(v >> 6) & 63]};
  }
  return out;
}

std::string OpensslWorkerToken(const nlohmann::json& claims, const std::string& key) {
  const std::string input = "stacyvm-worker-v1." + B64Url(claims.dump());
  auto r = RunCommand({"/usr/bin/openssl", "dgst", "-sha256", "-hmac", key, "-binary"}, {},
                      std::chrono::seconds(30), input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.size(), 32u);
  return input + "." + B64Url(r.out);
}

int64_t NowSecs() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

nlohmann::json WorkerClaims(const std::string& worker, const std::string& aud) {
  static std::atomic<int> n{0};
  return {{"worker_id", worker},
          {"jti", "jti-" + std::to_string(NowSecs()) + "-" + std::to_string(++n)},
          {"aud", aud},
          {"iat", NowSecs()},
          {"exp", NowSecs() + 300}};
}

}  // namespace edge::testing
