#include "agent/identity/keystore_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include "agent/identity/pkcs12.h"
#include "common/atomic_file.h"
#include "common/random.h"

namespace edge::identity {

bool KeystoreFiles::Exists(const std::string& data_dir) {
  struct stat st {};
  return ::stat((CertsDir(data_dir) + "/node.p12").c_str(), &st) == 0 &&
         ::stat((CertsDir(data_dir) + "/node.p12.pass").c_str(), &st) == 0 &&
         ::stat((CertsDir(data_dir) + "/ca.pem").c_str(), &st) == 0;
}

Status KeystoreFiles::CheckWritable(const std::string& data_dir) {
  const std::string dir = CertsDir(data_dir);
  if (auto st = MakeDirs(dir, 0700); !st) {
    return MakeError(st.error().code, "cannot create " + dir + ": " + st.error().message);
  }
  const std::string probe = dir + "/.write-probe-" + NewUuidV4().substr(0, 8);
  auto st = WriteFileAtomic(probe, std::string(kWriteProbeBytes, 'x'), {.mode = 0600});
  ::unlink(probe.c_str());
  if (!st) return MakeError(st.error().code, "cannot write to " + dir + ": " + st.error().message);
  return OkStatus();
}

Status KeystoreFiles::Write(const std::string& data_dir, const std::string& pkcs12_der,
                            const std::string& password, const std::string& ca_pem) {
  const std::string dir = CertsDir(data_dir);
  if (auto st = MakeDirs(dir, 0700); !st) return st;
  ::chmod(dir.c_str(), 0700);
  const std::string p12 = dir + "/node.p12", pass = dir + "/node.p12.pass", ca = dir + "/ca.pem";
  std::vector<std::string> written;
  auto undo = [&](Error e) -> Status {
    for (const auto& f : written)
      ::unlink(f.c_str());
    return std::unexpected(std::move(e));
  };
  if (auto st = WriteFileAtomic(pass, password, {.mode = 0600}); !st) return undo(st.error());
  written.push_back(pass);
  if (auto st = WriteFileAtomic(p12, pkcs12_der, {.mode = 0600}); !st) return undo(st.error());
  written.push_back(p12);
  if (auto st = WriteFileAtomic(ca, ca_pem, {.mode = 0644}); !st) return undo(st.error());
  return OkStatus();
}

Result<TlsIdentity> KeystoreFiles::Load(const std::string& data_dir) {
  const std::string dir = CertsDir(data_dir);
  auto der = ReadFile(dir + "/node.p12", 1 << 20);
  if (!der) return std::unexpected(der.error());
  auto password = ReadFile(dir + "/node.p12.pass", 4096);
  if (!password) return std::unexpected(password.error());
  auto ca = ReadFile(dir + "/ca.pem", 1 << 20);
  if (!ca) return std::unexpected(ca.error());
  // The password is [A-Za-z0-9]; a trailing newline added by an editor is not part of it.
  while (!password->empty() && (password->back() == '\n' || password->back() == '\r'))
    password->pop_back();
  auto contents = ParsePkcs12(*der, *password);
  if (!contents) {
    return MakeError(contents.error().code, dir + "/node.p12: " + contents.error().message);
  }
  return TlsIdentity{contents->key_pem, contents->cert_pem + contents->chain_pem, *ca};
}

}  // namespace edge::identity
