#include "common/json_parse.h"

#include <array>
#include <bit>
#include <charconv>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/byte_scan.h"
#include "common/huge_pages.h"
#include "common/string_fill.h"
#include "common/utf8.h"

namespace edge {

namespace {

// The refusal of a document nested `depth` levels deep at `byte` (counted from 0).
std::unexpected<Error> TooDeep(std::string_view what, size_t depth, size_t byte, size_t max_depth) {
  return MakeError(ErrorCode::kInvalidArgument,
                   std::string(what) + " is nested " + std::to_string(depth) +
                       " levels deep at byte " + std::to_string(byte) +
                       ", deeper than the limit of " + std::to_string(max_depth) +
                       " nested arrays/objects");
}

}  // namespace

Status CheckJsonDepth(std::string_view text, std::string_view what, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return TooDeep(what, depth, i, max_depth);
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return OkStatus();
}

namespace {

using nlohmann::json;

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighBits = 0x8080808080808080ull;

// True when some byte of `w` is zero (exact as a yes/no answer).
constexpr bool HasZeroByte(uint64_t w) {
  return ((w - kOnes) & ~w & kHighBits) != 0;
}

// True when some byte of `w` must be looked at one by one inside a JSON string being read: a
// quote, a backslash, a control character (< 0x20) or a byte >= 0x80.
constexpr bool NeedsCare(uint64_t w) {
  const bool control = ((w - kOnes * 0x20) & ~w & kHighBits) != 0;
  return control || HasZeroByte(w ^ (kOnes * '"')) || HasZeroByte(w ^ (kOnes * '\\')) ||
         (w & kHighBits) != 0;
}

uint64_t Load8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// The C locale, for strtod_l (the process's locale could make ',' the decimal point).
locale_t CLocale() {
  static const locale_t c = ::newlocale(LC_ALL_MASK, "C", nullptr);
  return c;
}

std::string ShowByte(unsigned char c) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
}

// One document, read once from the start. Builds the value iteratively: its stack holds the
// open containers, so nesting costs heap, not C++ stack, and stops at max_depth.
class JsonReader {
 public:
  JsonReader(std::string_view text, std::string_view what, size_t max_depth)
      : s_(text), what_(what), max_depth_(max_depth) {}
  // The same over `owned`, whose buffer becomes the value of the first object member string
  // of at least `take_min` bytes without escapes, once the whole text has been read: that
  // string's bytes are moved to the front of the buffer (memory already touched) instead of
  // copied into a new one. Until the read succeeds `owned` is left as it is.
  JsonReader(std::string& owned, std::string_view what, size_t max_depth, size_t take_min)
      : s_(owned), what_(what), max_depth_(max_depth), owned_(&owned), take_min_(take_min) {}

  Result<json> Read() {
    if (s_.starts_with("\xEF\xBB\xBF")) i_ = 3;
    json root;
    json* slot = &root;  // where the next value goes
    for (;;) {
      SkipSpace();
      if (i_ >= s_.size())
        return Fail(i_, "syntax error: unexpected end of input; expected a value");
      const char c = s_[i_];
      if (c == '{' || c == '[') {
        if (open_.size() + 1 > max_depth_) return TooDeep(what_, open_.size() + 1, i_, max_depth_);
        const bool object = c == '{';
        *slot = object ? json::object() : json::array();
        open_.push_back({slot, object});
        ++i_;
        SkipSpace();
        if (i_ < s_.size() && s_[i_] == (object ? '}' : ']')) {
          ++i_;
          open_.pop_back();
        } else {
          auto next = NextSlot();
          if (!next) return std::unexpected(next.error());
          slot = *next;
          continue;
        }
      } else if (c == '"') {
        const bool member = !open_.empty() && open_.back().object;
        auto str = ReadString(member && owned_ != nullptr && taken_.slot == nullptr);
        if (!str) return std::unexpected(str.error());
        *slot = std::move(*str);
        if (candidate_) {
          taken_ = {slot, candidate_->first, candidate_->second};  // filled in at the end
          candidate_.reset();
        }
      } else if (c == 't' || c == 'f' || c == 'n') {
        const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
        for (size_t k = 0; k < word.size(); ++k) {
          if (i_ + k >= s_.size() || s_[i_ + k] != word[k]) {
            return Fail(i_ + k,
                        "syntax error: invalid literal; expected '" + std::string(word) + "'");
          }
        }
        i_ += word.size();
        if (c == 'n') {
          *slot = nullptr;
        } else {
          *slot = c == 't';
        }
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        auto num = ReadNumber();
        if (!num) return std::unexpected(num.error());
        *slot = std::move(*num);
      } else {
        return Fail(i_, "syntax error: unexpected " + ShowByte(static_cast<unsigned char>(c)) +
                            "; expected a value");
      }
      // A value is complete: close the containers it completes, then find the next slot.
      for (;;) {
        SkipSpace();
        if (open_.empty()) {
          if (i_ < s_.size()) {
            return Fail(i_, "syntax error: unexpected " +
                                ShowByte(static_cast<unsigned char>(s_[i_])) +
                                " after the value; expected end of input");
          }
          if (taken_.slot != nullptr) Take();
          return root;
        }
        const bool object = open_.back().object;
        const char close = object ? '}' : ']';
        if (i_ >= s_.size()) {
          return Fail(i_, std::string("syntax error: unexpected end of input; expected ',' or '") +
                              close + "'");
        }
        if (s_[i_] == close) {
          ++i_;
          open_.pop_back();
          continue;
        }
        if (s_[i_] != ',') {
          return Fail(i_, "syntax error: unexpected " +
                              ShowByte(static_cast<unsigned char>(s_[i_])) + "; expected ',' or '" +
                              close + "'");
        }
        ++i_;
        SkipSpace();
        auto next = NextSlot();
        if (!next) return std::unexpected(next.error());
        slot = *next;
        break;
      }
    }
  }

 private:
  struct Open {
    json* node;  // stays valid: only the innermost open container grows
    bool object;
  };

  std::unexpected<Error> Fail(size_t at, const std::string& why) const {
    return MakeError(
        ErrorCode::kInvalidArgument,
        std::string(what_) + " is not valid JSON: at byte " + std::to_string(at + 1) + ": " + why);
  }

  void SkipSpace() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) {
      ++i_;
    }
  }

  // The slot of the innermost open container's next element: for an object, after reading
  // its key and ':' (a repeated key's slot is the old one: the last value wins).
  Result<json*> NextSlot() {
    Open& top = open_.back();
    if (!top.object) return &top.node->get_ref<json::array_t&>().emplace_back();
    if (i_ >= s_.size()) {
      return Fail(i_, "syntax error: unexpected end of input; expected an object key");
    }
    if (s_[i_] != '"') {
      return Fail(i_, "syntax error: unexpected " + ShowByte(static_cast<unsigned char>(s_[i_])) +
                          "; expected an object key (a string)");
    }
    auto key = ReadString(false);
    if (!key) return std::unexpected(key.error());
    SkipSpace();
    if (i_ >= s_.size() || s_[i_] != ':') {
      return Fail(i_, "syntax error: expected ':' after the object key");
    }
    ++i_;
    auto [it, inserted] = top.node->get_ref<json::object_t&>().try_emplace(std::move(*key));
    // A repeated key replaces its value, which may hold the string to take: it is copied
    // now, while its slot still exists, and nothing is taken.
    if (!inserted && taken_.slot != nullptr) {
      *taken_.slot = std::string(s_.substr(taken_.begin, taken_.size));
      taken_ = {};
    }
    return &it->second;
  }

  // The whole text was read: the string to take goes to the front of the owned buffer, and
  // the buffer into its slot.
  void Take() {
    std::string& buffer = *owned_;
    std::memmove(buffer.data(), buffer.data() + taken_.begin, taken_.size);
    buffer.resize(taken_.size);
    *taken_.slot = std::move(buffer);
    taken_ = {};
    s_ = {};  // it was the buffer
  }

  // At the opening quote. Plain runs are copied whole; escapes are decoded. When `may_take`
  // and the string has no escapes and at least take_min_ bytes, nothing is copied: an empty
  // string comes back and candidate_ holds where the bytes are.
  Result<std::string> ReadString(bool may_take) {
    const size_t opened = i_++;
    std::string out;
    size_t run = i_;  // start of the plain bytes not yet copied
    for (;;) {
      while (i_ + kScanBlock <= s_.size()) {
        const uint32_t m = JsonCareMask16(s_.data() + i_, true);
        if (m != 0) {
          i_ += static_cast<size_t>(std::countr_zero(m));
          break;
        }
        i_ += kScanBlock;
      }
      while (i_ + 8 <= s_.size() && !NeedsCare(Load8(s_.data() + i_)))
        i_ += 8;
      if (i_ >= s_.size()) {
        return Fail(i_, "syntax error: the string opened at byte " + std::to_string(opened + 1) +
                            " has no closing quote");
      }
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        if (may_take && out.empty() && i_ - run >= take_min_) {
          candidate_.emplace(run, i_ - run);
          ++i_;
          return out;
        }
        // A file's base64 (file_write) is hundreds of MB: huge pages (common/huge_pages.h).
        if (out.empty() && i_ - run >= kHugePageAdviceMinBytes) ReserveLarge(out, i_ - run);
        out.append(s_.data() + run, i_ - run);
        ++i_;
        return out;
      }
      if (c == '\\') {
        out.append(s_.data() + run, i_ - run);
        if (auto st = ReadEscape(out); !st) return std::unexpected(st.error());
        run = i_;
      } else if (c < 0x20) {
        return Fail(
            i_, "syntax error: control character " + ShowByte(c) + " in a string must be escaped");
      } else if (c >= 0x80) {
        const size_t n = Utf8SequenceLength(s_, i_);
        if (n == 0) return Fail(i_, "syntax error: invalid UTF-8 " + ShowByte(c) + " in a string");
        i_ += n;
      } else {
        ++i_;
      }
    }
  }

  Result<uint32_t> ReadHex4() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      if (i_ >= s_.size()) return Fail(i_, "syntax error: \\u must be followed by 4 hex digits");
      const char h = s_[i_];
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) return Fail(i_, "syntax error: \\u must be followed by 4 hex digits");
      v = v << 4 | static_cast<uint32_t>(d);
    }
    return v;
  }

  // At the backslash; appends what the escape stands for.
  Status ReadEscape(std::string& out) {
    const size_t at = i_++;
    if (i_ >= s_.size()) return Fail(i_, "syntax error: unexpected end of input in an escape");
    const char e = s_[i_++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out.push_back(e);
        return OkStatus();
      case 'b':
        out.push_back('\b');
        return OkStatus();
      case 'f':
        out.push_back('\f');
        return OkStatus();
      case 'n':
        out.push_back('\n');
        return OkStatus();
      case 'r':
        out.push_back('\r');
        return OkStatus();
      case 't':
        out.push_back('\t');
        return OkStatus();
      case 'u':
        break;
      default:
        return Fail(at + 1, "syntax error: invalid escape: a backslash then " +
                                ShowByte(static_cast<unsigned char>(e)));
    }
    auto hi = ReadHex4();
    if (!hi) return std::unexpected(hi.error());
    uint32_t cp = *hi;
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return Fail(at, "syntax error: \\u escape of a low surrogate without a high one before it");
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (i_ + 1 >= s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') {
        return Fail(at, "syntax error: \\u escape of a high surrogate not followed by a low one");
      }
      i_ += 2;
      auto lo = ReadHex4();
      if (!lo) return std::unexpected(lo.error());
      if (*lo < 0xDC00 || *lo > 0xDFFF) {
        return Fail(at, "syntax error: \\u escape of a high surrogate not followed by a low one");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (*lo - 0xDC00);
    }
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | cp >> 6));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | cp >> 12));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | cp >> 18));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    return OkStatus();
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  Result<json> ReadNumber() {
    const size_t start = i_;
    auto digit = [&] { return i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9'; };
    auto digits = [&] {
      while (digit())
        ++i_;
    };
    const bool negative = s_[i_] == '-';
    if (negative) ++i_;
    if (!digit()) return Fail(i_, "syntax error: invalid number; expected a digit after '-'");
    if (s_[i_] == '0') {
      ++i_;
    } else {
      digits();
    }
    bool integer = true;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digit()) return Fail(i_, "syntax error: invalid number; expected a digit after '.'");
      digits();
      integer = false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digit()) {
        return Fail(i_, "syntax error: invalid number; expected a digit in the exponent");
      }
      digits();
      integer = false;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + i_;
    if (integer) {
      if (negative) {
        int64_t v = 0;
        if (auto r = std::from_chars(first, last, v); r.ec == std::errc() && r.ptr == last) {
          return json(v);
        }
      } else {
        uint64_t v = 0;
        if (auto r = std::from_chars(first, last, v); r.ec == std::errc() && r.ptr == last) {
          return json(v);
        }
      }
      // Too big for 64 bits: a float, as nlohmann makes it.
    }
    double d = 0;
    auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow is refused below; underflow is the nearest double (zero or subnormal).
      const std::string copy(first, last);
      const locale_t c = CLocale();
      d = c != locale_t{} ? ::strtod_l(copy.c_str(), nullptr, c)
                          : std::strtod(copy.c_str(), nullptr);
    } else if (r.ec != std::errc() || r.ptr != last) {
      return Fail(start, "syntax error: invalid number");
    }
    if (!std::isfinite(d)) {
      return Fail(start, "number overflow: " + std::string(first, last) +
                             " is beyond the range of a double");
    }
    return json(d);
  }

  std::string_view s_;
  std::string_view what_;
  size_t max_depth_;
  size_t i_ = 0;
  std::vector<Open> open_;
  std::string* owned_ = nullptr;  // the text's own buffer, when it may be taken
  size_t take_min_ = 0;
  std::optional<std::pair<size_t, size_t>> candidate_;  // the string ReadString just left
  struct Taken {
    json* slot = nullptr;  // an object member's value: stays valid (map nodes do not move)
    size_t begin = 0, size = 0;
  } taken_;
};

// A string as nlohmann dumps it with error_handler_t::replace.
void AppendText(std::string& out, const std::string& s) {
  if (IsValidUtf8(s)) {
    AppendJsonString(out, s);
  } else {
    out += json(s).dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

void AppendJson(std::string& out, const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out.push_back(',');
        first = false;
        AppendText(out, it.key());
        out.push_back(':');
        AppendJson(out, it.value());
      }
      out.push_back('}');
      return;
    }
    case json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& e : j) {
        if (!first) out.push_back(',');
        first = false;
        AppendJson(out, e);
      }
      out.push_back(']');
      return;
    }
    case json::value_t::string:
      AppendText(out, j.get_ref<const std::string&>());
      return;
    default:  // numbers, booleans, null, binary: short, and nlohmann's own format
      out += j.dump(-1, ' ', false, json::error_handler_t::replace);
      return;
  }
}

// About as many bytes as `j` takes as text (exact when nothing needs escaping and numbers
// take 24 bytes or less), counting strings of `skip_from` bytes or more as their quotes only.
size_t SizeHint(const json& j, size_t skip_from = std::numeric_limits<size_t>::max()) {
  switch (j.type()) {
    case json::value_t::object: {
      size_t n = 2;
      for (auto it = j.begin(); it != j.end(); ++it)
        n += it.key().size() + 4 + SizeHint(it.value(), skip_from);
      return n;
    }
    case json::value_t::array: {
      size_t n = 2;
      for (const auto& e : j)
        n += 1 + SizeHint(e, skip_from);
      return n;
    }
    case json::value_t::string: {
      const size_t size = j.get_ref<const std::string&>().size();
      return (size >= skip_from ? 0 : size) + 2;
    }
    default:
      return 24;
  }
}

// AppendJson into the last of `pieces`, moving out the strings DumpJsonPieces takes.
void AppendJsonPieces(std::vector<std::string>& pieces, json& j, size_t take_min) {
  switch (j.type()) {
    case json::value_t::object: {
      pieces.back().push_back('{');
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) pieces.back().push_back(',');
        first = false;
        AppendText(pieces.back(), it.key());
        pieces.back().push_back(':');
        AppendJsonPieces(pieces, it.value(), take_min);
      }
      pieces.back().push_back('}');
      return;
    }
    case json::value_t::array: {
      pieces.back().push_back('[');
      bool first = true;
      for (auto& e : j) {
        if (!first) pieces.back().push_back(',');
        first = false;
        AppendJsonPieces(pieces, e, take_min);
      }
      pieces.back().push_back(']');
      return;
    }
    case json::value_t::string: {
      auto& s = j.get_ref<std::string&>();
      if (s.size() >= take_min) {
        // Written as it is when its text is its bytes and the two quotes.
        if (const auto sized = JsonStringSize(s); sized && sized->bytes() == s.size() + 2) {
          pieces.back().push_back('"');
          pieces.push_back(std::move(s));
          s.clear();
          pieces.emplace_back(1, '"');
          return;
        }
      }
      AppendText(pieces.back(), s);
      return;
    }
    default:
      AppendJson(pieces.back(), j);
      return;
  }
}

}  // namespace

Result<nlohmann::json> ParseJsonBoundedInPlace(std::string& text, std::string_view what,
                                               size_t max_depth, size_t take_min_bytes) {
  auto read = JsonReader(text, what, max_depth, take_min_bytes).Read();
  // A refusal left the text as it was.
  if (!read) {
    if (auto st = CheckJsonDepth(text, what, max_depth); !st) return std::unexpected(st.error());
  }
  return read;
}

Result<nlohmann::json> ParseJsonBounded(std::string_view text, std::string_view what,
                                        size_t max_depth) {
  auto read = JsonReader(text, what, max_depth).Read();
  // A text that is both malformed and too deep is refused as too deep, wherever the two
  // are: the reason an operator can act on first (and what the depth scan alone said).
  if (!read) {
    if (auto st = CheckJsonDepth(text, what, max_depth); !st) return std::unexpected(st.error());
  }
  return read;
}

std::string DumpJson(const nlohmann::json& j) {
  std::string out;
  // Reserved once: a megabyte string must not be copied again by the bytes written after it.
  ReserveLarge(out, SizeHint(j));  // huge pages for a file read whole (common/huge_pages.h)
  AppendJson(out, j);
  return out;
}

std::vector<std::string> DumpJsonPieces(nlohmann::json&& j, size_t take_min_bytes) {
  std::vector<std::string> pieces(1);
  pieces[0].reserve(SizeHint(j, take_min_bytes));
  AppendJsonPieces(pieces, j, take_min_bytes);
  return pieces;
}

namespace {

// For each byte JsonCareMask16 marks when writing (a quote, a backslash, a control
// character): the letter after its backslash, 'u' for the six-byte \u00XX form; 0 for the
// bytes written as they are.
constexpr std::array<char, 256> kEscapeLetter = [] {
  std::array<char, 256> t{};
  for (int c = 0; c < 0x20; ++c)
    t[c] = 'u';
  t['"'] = '"';
  t['\\'] = '\\';
  t['\b'] = 'b';
  t['\f'] = 'f';
  t['\n'] = 'n';
  t['\r'] = 'r';
  t['\t'] = 't';
  return t;
}();

// The bytes the escape of `c` (a byte that needs one) takes: two, or six for \u00XX.
size_t EscapedSize(unsigned char c) {
  return kEscapeLetter[c] == 'u' ? 6 : 2;
}

// Writes the escape of `c` (a byte that needs one) at `d`; returns the byte after it.
char* WriteEscape(char* d, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  const char letter = kEscapeLetter[c];
  d[0] = '\\';
  d[1] = letter;
  if (letter != 'u') return d + 2;
  d[2] = '0';
  d[3] = '0';
  d[4] = kHex[c >> 4];
  d[5] = kHex[c & 15];
  return d + 6;
}

// The bytes `s` takes as a quoted JSON string; with `check_utf8`, nullopt when `s` is not
// valid UTF-8, found in the same scan: a block's bytes >= 0x80 are marked too, and each marks
// a sequence (Utf8SequenceLength, as ValidUtf8Prefix checks them) whose bytes are skipped,
// into the next block when it crosses one.
std::optional<size_t> JsonStringSizeOf(std::string_view s, bool check_utf8) {
  const char* const src = s.data();
  const size_t n = s.size();
  size_t size = n + 2, i = 0;
  while (i + kScanBlock <= n) {
    size_t next = i + kScanBlock;
    for (uint32_t m = JsonCareMask16(src + i, check_utf8); m != 0;) {
      const size_t p = i + static_cast<size_t>(std::countr_zero(m));
      const auto c = static_cast<unsigned char>(src[p]);
      if (c < 0x80) {
        size += EscapedSize(c) - 1;
        m &= m - 1;
        continue;
      }
      const size_t len = Utf8SequenceLength(s, p);
      if (len == 0) return std::nullopt;
      if (p + len >= next) {
        next = p + len;
        break;
      }
      m &= ~((1u << (p + len - i)) - 1);  // this sequence's bytes, and the ones before it
    }
    i = next;
  }
  while (i < n) {
    const auto c = static_cast<unsigned char>(src[i]);
    if (check_utf8 && c >= 0x80) {
      const size_t len = Utf8SequenceLength(s, i);
      if (len == 0) return std::nullopt;
      i += len;
      continue;
    }
    if (kEscapeLetter[c] != 0) size += EscapedSize(c) - 1;
    ++i;
  }
  return size;
}

}  // namespace

std::optional<JsonSizedString> JsonStringSize(std::string_view s) {
  const auto size = JsonStringSizeOf(s, true);
  if (!size) return std::nullopt;
  return JsonSizedString(s, *size);
}

void AppendJsonString(std::string& out, std::string_view s) {
  AppendJsonString(out, JsonSizedString(s, *JsonStringSizeOf(s, false)));
}

// Two passes: the first (JsonStringSize) finds the exact size, so this one writes into room
// made once, a block of 16 bytes at a time. A block is stored whole, then the write goes on
// from its first byte that needs an escape: while j + 16 <= n, what is left to write
// (src[j..n) escaped and the closing quote) is at least n - j + 1 >= 17 bytes, so the 16
// stored fit.
void AppendJsonString(std::string& out, const JsonSizedString& sized) {
  const char* const src = sized.s_.data();
  const size_t n = sized.s_.size();
  const size_t size = sized.bytes_;
  const size_t base = out.size();
  ResizeAndOverwrite(out, base + size, [&](char* p) {
    char* d = p + base;
    *d++ = '"';
    size_t j = 0;
    while (j + kScanBlock <= n) {
      std::memcpy(d, src + j, kScanBlock);
      const uint32_t m = JsonCareMask16(src + j, false);
      if (m == 0) {
        d += kScanBlock;
        j += kScanBlock;
        continue;
      }
      const int k = std::countr_zero(m);
      d = WriteEscape(d + k, static_cast<unsigned char>(src[j + k]));
      j += k + 1;
    }
    for (; j < n; ++j) {
      const auto c = static_cast<unsigned char>(src[j]);
      if (kEscapeLetter[c] != 0) {
        d = WriteEscape(d, c);
      } else {
        *d++ = static_cast<char>(c);
      }
    }
    *d++ = '"';
    return base + size;
  });
}

}  // namespace edge
