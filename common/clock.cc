#include "common/clock.h"

namespace edge {

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace edge
