#include "agent/edge/key_rotation.h"

#include "agent/edge/enrollment_files.h"
#include "agent/edge/node_attestor.h"
#include "agent/edge/node_key_store.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/encoding.h"
#include "agent/identity/keystore_files.h"

namespace edge::agentedge {

Result<RotatedKey> KeyRotation::Run() {
  auto identity = identity::KeystoreFiles::Load(cfg_.data_dir);
  if (!identity) {
    return MakeError(ErrorCode::kFailedPrecondition, "not enrolled (" + identity.error().message +
                                                         "): run `edge-agent enroll` first");
  }
  auto address = EnrollmentFiles::ResolveControllerAddress(cfg_);
  if (!address) return std::unexpected(address.error());
  NodeKeyStore keys(cfg_.data_dir);
  auto old_key = keys.Load();
  if (!old_key) {
    return MakeError(ErrorCode::kFailedPrecondition, "no node key to rotate at " + keys.KeyPath() +
                                                         " (" + old_key.error().message +
                                                         "): the key is created at enrollment");
  }
  NodeAttestor attestor(identity::ChannelFactory(*identity).Mtls(*address), cfg_.node_id,
                        cfg_.data_dir, clock_);
  // A token proves the old key's authority in the request's outer envelope.
  auto token = attestor.Attest(*old_key);
  if (!token) {
    return MakeError(token.error().code,
                     "attestation with the current key failed: " + token.error().message);
  }
  auto new_key = identity::NodeKey::Generate();
  if (!new_key) return std::unexpected(new_key.error());
  // Staged first: if this process dies after the controller accepted it, the key survives.
  if (auto st = keys.Stage(*new_key); !st) return std::unexpected(st.error());
  auto rotated = attestor.Rotate(*old_key, *new_key, *token);
  if (!rotated) {
    keys.DiscardStaged();
    return MakeError(rotated.error().code,
                     "the controller refused the rotation: " + rotated.error().message +
                         "; the current key stays in use");
  }
  auto archive = keys.Install(*new_key, clock_.Now());
  if (!archive) {
    return MakeError(archive.error().code,
                     "the controller accepted the new key but it could not be installed (" +
                         archive.error().message + "); it is in " + keys.StagedPath() +
                         ": move it to " + keys.KeyPath());
  }
  return RotatedKey{.public_key_hex = identity::HexEncode(new_key->public_key()),
                    .archive_path = *archive};
}

}  // namespace edge::agentedge
