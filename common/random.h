// Injected randomness (design.md §9). `Random` is for jitter and scheduling, never for
// secrets: secrets come from SecureRandomBytes (OpenSSL's CSPRNG).
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>

namespace edge {

class Random {
 public:
  virtual ~Random() = default;
  // Uniform in [0, bound); bound 0 returns 0.
  virtual uint64_t Uniform(uint64_t bound) = 0;
};

// A seeded PRNG; thread-safe. Seeded from std::random_device unless given a seed.
class DefaultRandom final : public Random {
 public:
  DefaultRandom() : gen_(std::random_device{}()) {}
  explicit DefaultRandom(uint64_t seed) : gen_(seed) {}
  uint64_t Uniform(uint64_t bound) override;

 private:
  std::mutex mu_;
  std::mt19937_64 gen_;
};

// `n` bytes from the OS CSPRNG (OpenSSL RAND_bytes). Aborts if the CSPRNG fails.
std::string SecureRandomBytes(size_t n);

// A random RFC 4122 version-4 UUID in canonical text form.
std::string NewUuidV4();

}  // namespace edge
