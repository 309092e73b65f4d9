// LocalProvider: the `local` sandbox provider — the command runs as a plain child of the
// agent with the workspace as its working directory (process-group isolation only).
#pragma once

#include "sandbox/providers/provider.h"

namespace edge::sandbox {

class LocalProvider final : public Provider {
 public:
  std::string_view name() const override { return "local"; }
  Status Wrap(ProcessSpec& spec, const WrapOptions& options) const override;
};

}  // namespace edge::sandbox
