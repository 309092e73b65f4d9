#include "sandbox/providers/local_provider.h"

namespace edge::sandbox {

Status LocalProvider::Wrap(ProcessSpec& spec, const WrapOptions& options) const {
  return CheckCwdInWorkspace(spec, options.workspace);
}

}  // namespace edge::sandbox
