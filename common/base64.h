// RFC 4648 §4 base64 (the standard alphabet, with padding): the codec of every byte string
// the contracts carry as text — a file's `content` (file_write, file_read), a command's output
// that is not UTF-8 (`stdout_base64`).
//
// Those strings are whole files, hundreds of MB (issue 14, target 5), so both directions run
// 24 bytes / 32 characters per step with AVX2 where the CPU has it (checked once at run time,
// so one binary runs everywhere), and a group of 3 bytes / 4 characters per step otherwise
// and for the tails. Both paths give the same answer, errors included; with EDGE_SCALAR_SCAN
// defined only the scalar one is compiled (common_scalar_scan_test runs the tests on it).
// The vector algorithms are Wojciech Muła and Daniel Lemire's ("Faster Base64 Encoding and
// Decoding Using AVX2 Instructions", ACM TOIT 2018), as aklomp/base64 writes them.
// Stateless free functions; each answer is a fresh string (huge pages from 8 MiB on,
// common/string_fill.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"

namespace edge {

// The length of the base64 text of `n` bytes: 4 characters per started group of 3.
constexpr size_t Base64EncodedSize(size_t n) {
  return (n + 2) / 3 * 4;
}

// RFC 4648 standard base64 of `bytes`, with padding.
std::string Base64Encode(std::string_view bytes);

// Appends the base64 of `bytes` to `out`. Pieces of a whole encode one after another to the
// whole's text when every piece but the last is a multiple of 3 bytes long (file_read encodes
// a file as it reads it, sandbox/file_service.h); reserve `out` first for the whole.
void Base64EncodeAppend(std::string_view bytes, std::string& out);

// The bytes of base64 `text`. INVALID_ARGUMENT naming `field` and the offset for a length that
// is not a multiple of 4, a character outside the alphabet, or '=' anywhere but the last one
// or two places.
Result<std::string> Base64Decode(std::string_view text, std::string_view field);

// Checks `text` as Base64Decode does, keeping none of its bytes (it decodes 64 KiB at a time
// into a scratch buffer): their count, or exactly Base64Decode's error.
Result<size_t> Base64Validate(std::string_view text, std::string_view field);

// The bytes of a text that Base64Validate accepted, a piece at a time, into one buffer of
// about `piece_bytes` that it allocates once and reuses: for writing a file of hundreds of MB
// without holding it decoded whole (file_write, sandbox/file_service.h). Owns its buffer; the
// text must outlive it. A text Base64Validate refused gives unspecified bytes (a last group
// cut short is dropped), never a read or write outside the text or the buffer.
class Base64PieceDecoder {
 public:
  Base64PieceDecoder(std::string_view valid_text, size_t piece_bytes);

  // The next piece of the bytes (valid until the next call); empty once all are out.
  std::string_view Next();

 private:
  std::string_view text_;
  size_t pad_;          // the '='s that end text_
  size_t piece_chars_;  // characters decoded per piece, a multiple of 4
  size_t pos_ = 0;      // characters decoded so far
  std::unique_ptr<char[]> buffer_;
};

namespace base64_internal {

// Whether this process's CPU runs the AVX2 path (false with EDGE_SCALAR_SCAN or off x86-64).
bool HasVectorPath();

// The same functions with the vector path on (when HasVectorPath()) or off, so that tests
// compare the two on one machine.
std::string Encode(std::string_view bytes, bool vector);
void EncodeAppend(std::string_view bytes, std::string& out, bool vector);
Result<std::string> Decode(std::string_view text, std::string_view field, bool vector);
Result<size_t> Validate(std::string_view text, std::string_view field, bool vector);

}  // namespace base64_internal
}  // namespace edge
