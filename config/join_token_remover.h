// Removes the `controller.join_token` entry from the agent's config file once enrollment has
// stored the keystore (wire.md §1): every other byte — comments, order, blank lines — stays
// as it was, and the file is replaced atomically with its original mode and owner.
#pragma once

#include <string>
#include <string_view>

#include "common/error.h"

namespace edge::config {

class JoinTokenRemover {
 public:
  // Checks, before a token is spent, that the file can be rewritten: it exists, is a regular
  // file and not a symlink (rewriting would replace the link with a copy), and its directory
  // is writable. FAILED_PRECONDITION with the reason otherwise.
  static Status CheckRewritable(const std::string& path);

  // Removes the entry (a plain or quoted value, a trailing comment, or a block scalar with its
  // continuation lines). Returns true if an entry was removed, false if there was none. With
  // `token`, a file that holds no entry this can rewrite but does hold the token (JSON, or
  // flow-style YAML) is FAILED_PRECONDITION, so the caller can say it stays on disk.
  static Result<bool> RemoveJoinToken(const std::string& path, std::string_view token = {});

  // The pure text transformation behind RemoveJoinToken (exposed for tests and fuzzing).
  static Result<std::string> RemoveFromText(const std::string& text, bool* removed);
};

}  // namespace edge::config
