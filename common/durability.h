// Durability: whether a write returns before or after it is on disk. A store interface can
// offer the choice without naming its storage (common/sqlite_db.h implements both).
#pragma once

namespace edge {

enum class Durability {
  kSynced,   // returns once the write is on disk (group commit)
  kRelaxed,  // returns once committed; on disk with the next synced write or checkpoint
};

}  // namespace edge
