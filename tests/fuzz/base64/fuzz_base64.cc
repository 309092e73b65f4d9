// Fuzz target: common/base64.h, differential between its AVX2 path and its scalar one (on a
// CPU without AVX2 both are scalar, and the other checks still hold).
//   - The input as base64 text: Decode gives the same bytes, or the same error message, on
//     both paths; Validate answers the size or that same error; Base64PieceDecoder (pieces
//     sized by the first byte) gives the same bytes when the text is valid.
//   - The input as bytes: Encode is the same on both paths, Base64EncodedSize long, and
//     decodes back to the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base64.h"

using edge::base64_internal::Decode;
using edge::base64_internal::Encode;
using edge::base64_internal::Validate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  auto scalar = Decode(input, "f", false);
  auto vector = Decode(input, "f", true);
  if (scalar.has_value() != vector.has_value()) __builtin_trap();
  if (scalar) {
    if (*scalar != *vector) __builtin_trap();
    const size_t pad = input.size() - (input.find_last_not_of('=') + 1);  // npos + 1 == 0
    if (pad > 2 || scalar->size() != input.size() / 4 * 3 - pad) __builtin_trap();
  } else if (scalar.error().message != vector.error().message) {
    __builtin_trap();
  }
  for (bool v : {false, true}) {
    auto size = Validate(input, "f", v);
    if (size.has_value() != scalar.has_value()) __builtin_trap();
    if (size && *size != scalar->size()) __builtin_trap();
    if (!size && size.error().message != scalar.error().message) __builtin_trap();
  }
  if (scalar) {
    edge::Base64PieceDecoder pieces(input, size == 0 ? 1 : data[0] % 64 + 1);
    std::string joined;
    for (std::string_view p = pieces.Next(); !p.empty(); p = pieces.Next())
      joined.append(p);
    if (joined != *scalar) __builtin_trap();
  }

  const std::string text = Encode(input, false);
  if (text != Encode(input, true) || text.size() != edge::Base64EncodedSize(size)) {
    __builtin_trap();
  }
  auto back = Decode(text, "f", true);
  if (!back || *back != input) __builtin_trap();
  return 0;
}
