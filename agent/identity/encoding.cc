#include "agent/identity/encoding.h"

#include <openssl/evp.h>

#include <array>
#include <cstdlib>

namespace edge::identity {
namespace {

constexpr char kStd[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kUrl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Encode(std::string_view in, const char* alphabet, bool pad) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) |
                 static_cast<uint8_t>(in[i + 2]);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  size_t rest = in.size() - i;
  if (rest == 1) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    if (pad) out += "==";
  } else if (rest == 2) {
    uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    if (pad) out += "=";
  }
  return out;
}

std::optional<std::string> Decode(std::string_view in, const char* alphabet, bool pad) {
  std::array<int, 256> rev;
  rev.fill(-1);
  for (int i = 0; i < 64; ++i)
    rev[static_cast<uint8_t>(alphabet[i])] = i;
  size_t len = in.size();
  if (pad) {
    if (len % 4 != 0) return std::nullopt;
    size_t n = 0;
    while (n < 2 && len > 0 && in[len - 1] == '=') {
      --len;
      ++n;
    }
  } else if (len % 4 == 1) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(len * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < len; ++i) {
    int v = rev[static_cast<uint8_t>(in[i])];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  // Non-canonical encodings (stray low bits) are rejected.
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace

std::string Base64Encode(std::string_view b) {
  return Encode(b, kStd, true);
}
std::optional<std::string> Base64Decode(std::string_view t) {
  return Decode(t, kStd, true);
}
std::string Base64UrlEncode(std::string_view b) {
  return Encode(b, kUrl, false);
}
std::optional<std::string> Base64UrlDecode(std::string_view t) {
  return Decode(t, kUrl, false);
}

std::string Sha256(std::string_view bytes) {
  return Sha256Concat({bytes});
}

std::string Sha256Concat(std::initializer_list<std::string_view> parts) {
  std::string out(32, '\0');
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1;
  for (auto part : parts) {
    ok = ok && EVP_DigestUpdate(ctx, part.data(), part.size()) == 1;
  }
  ok = ok && EVP_DigestFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()), &len) == 1;
  EVP_MD_CTX_free(ctx);
  // As Sha256: only an allocation failure gets here, and a wrong digest must never be returned.
  if (!ok || len != 32) std::abort();
  return out;
}

std::string HmacSha256(std::string_view key, std::string_view message) {
  std::string out(32, '\0');
  size_t len = 0;
  // EVP_Q_mac refuses a null key pointer even for an empty key (RFC 2104 allows one).
  static const unsigned char kEmpty = 0;
  const void* k = key.empty() ? static_cast<const void*>(&kEmpty) : key.data();
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, k, key.size(),
                reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                reinterpret_cast<unsigned char*>(out.data()), out.size(), &len) == nullptr ||
      len != 32) {
    std::abort();
  }
  return out;
}

}  // namespace edge::identity
