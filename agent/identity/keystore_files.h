// The node's enrolled identity on disk (design.md §5): data_dir/certs/node.p12 and
// node.p12.pass (0600) and ca.pem (0644), in certs/ (0700). Written all-or-nothing: if any
// file cannot be written, the ones this call wrote are removed again.
#pragma once

#include <string>

#include "common/error.h"

namespace edge::identity {

// What TLS needs: our key and certificate chain, and the only trust anchor.
struct TlsIdentity {
  std::string key_pem;
  std::string cert_chain_pem;  // leaf first
  std::string ca_pem;
};

class KeystoreFiles {
 public:
  static std::string CertsDir(const std::string& data_dir) { return data_dir + "/certs"; }
  static bool Exists(const std::string& data_dir);
  // How much the write check writes (and removes): more than a keystore, its password, the
  // CA and the node key together (a few KiB), so a disk with room for the check has room
  // for the enrollment.
  static constexpr size_t kWriteProbeBytes = 64 * 1024;
  // Checks before a join token is spent that certs/ can be created and written (a full disk
  // or a read-only one fails here, not after the token is spent).
  static Status CheckWritable(const std::string& data_dir);
  static Status Write(const std::string& data_dir, const std::string& pkcs12_der,
                      const std::string& password, const std::string& ca_pem);
  static Result<TlsIdentity> Load(const std::string& data_dir);
};

}  // namespace edge::identity
