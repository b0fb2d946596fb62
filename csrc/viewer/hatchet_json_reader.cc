// The JSON half of hatchet_reader.h: a validating single-pass parser for Proton's layout
// (and Triton's, whose nodes list children before metrics). It accepts exactly what
// Python's json module reads the same way into the viewer's columns; everything else is an
// error status, and the Python reader takes over. Strings are scanned 8 bytes at a time.
#include <charconv>
#include <cstring>
#include <string>

#include "viewer/hatchet_reader.h"
#include "viewer/tree_builder.h"
#include "viewer/utf8.h"

namespace proton::viewer {
namespace {

constexpr int kMaxDepth = 2000;  // nodes nest two JSON levels per tree level
constexpr std::string_view kFrameOpen = R"({"frame":{"name":)";
constexpr std::string_view kFrameClose = R"(,"type":"function"})";

class JsonParser {
 public:
  JsonParser(std::string_view data, TreeColumns *out)
      : begin_(data.data()),
        p_(data.data()),
        end_(data.data() + data.size()),
        tree_(out, estimateNodes(data, "\"frame\"")),
        out_(out) {}

  Status parse() {
    if (!parseDocument()) return invalidArgument(error_);
    tree_.finish();
    return Status::ok();
  }

 private:
  bool fail(const char *what) {
    if (error_.empty()) {
      error_ = std::string("JSON: ") + what + " at byte " + std::to_string(p_ - begin_);
    }
    return false;
  }
  void ws() {
    while (p_ < end_ && static_cast<unsigned char>(*p_) <= ' ' &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }
  bool expect(char c) {
    ws();
    if (p_ >= end_) return fail("unexpected end");
    if (*p_ != c) return fail("unexpected character");
    ++p_;
    return true;
  }
  bool peekIs(char c) {
    ws();
    return p_ < end_ && *p_ == c;
  }
  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) {
      return fail("invalid literal");
    }
    p_ += n;
    return true;
  }

  bool parseDocument() {
    if (!expect('[')) return false;
    if (peekIs(']')) return fail("empty top-level list");
    if (!parseNode(-1, 0)) return false;
    if (peekIs(',')) {
      ++p_;
      ws();
      if (p_ >= end_ || *p_ != '{') return fail("the device table is not an object");
      const char *start = p_;
      if (!skipValue(1)) return false;
      out_->devices.assign(start, p_);
      while (peekIs(',')) {
        ++p_;
        if (!skipValue(1)) return false;
      }
    }
    if (!expect(']')) return false;
    ws();
    if (p_ != end_) return fail("extra data after the document");
    return true;
  }

  bool parseNode(int32_t parent, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    ws();
    int32_t node = -1;
    bool frame = false, metrics = false, children = false, more = true;
    if (startsWith(kFrameOpen)) {
      // Proton's layout, {"frame":{"name":N,"type":"function"}, ...: the frame in two
      // compares; anything else is read again below, member by member.
      const char *start = p_;
      p_ += kFrameOpen.size();
      std::string_view name;
      if (parseString(&name, &valueScratch_) && startsWith(kFrameClose)) {
        p_ += kFrameClose.size();
        node = tree_.beginNode(parent);
        tree_.setName(node, name);
        frame = true;
        more = next('}');
      } else {
        error_.clear();
        p_ = start;
      }
    }
    if (node < 0) {
      if (!expect('{')) return false;
      node = tree_.beginNode(parent);
      if (peekIs('}')) return fail("a node without a frame");
    }
    std::string_view key;
    while (more) {
      ws();
      if (!parseString(&key, &keyScratch_) || !expect(':')) return false;
      ws();
      if (key == "frame") {
        if (frame) return fail("duplicate frame");
        frame = true;
        if (!parseFrame(node)) return false;
      } else if (key == "metrics") {
        if (metrics) return fail("metrics twice");
        metrics = true;
        if (!parseMetrics(node)) return false;
      } else if (key == "children") {
        if (children) return fail("duplicate children");
        children = true;
        if (!parseChildren(node, depth)) return false;
      } else if (key == "proton_metadata" && node == 0) {
        const char *start = p_;
        if (!skipValue(depth + 1)) return false;
        out_->metadata.assign(start, p_);
      } else if (!skipValue(depth + 1)) {
        return false;
      }
      more = next('}');
    }
    if (!error_.empty()) return false;
    if (!frame || !tree_.hasName(node)) return fail("a node without a frame name");
    return true;
  }

  bool startsWith(std::string_view literal) const {
    return static_cast<size_t>(end_ - p_) >= literal.size() &&
           std::memcmp(p_, literal.data(), literal.size()) == 0;
  }

  // After a member: true on ',' (more follow), false on the closing bracket or an error.
  bool next(char close) {
    ws();
    if (p_ < end_ && *p_ == ',') {
      ++p_;
      return true;
    }
    if (p_ < end_ && *p_ == close) {
      ++p_;
      return false;
    }
    fail(p_ >= end_ ? "unexpected end" : "expected ',' or a closing bracket");
    return false;
  }

  bool parseFrame(int32_t node) {
    if (!expect('{')) return false;
    if (peekIs('}')) return fail("a frame without a name");
    std::string_view key, name;
    do {
      ws();
      if (!parseString(&key, &keyScratch_) || !expect(':')) return false;
      ws();
      if (key == "name") {
        if (p_ >= end_ || *p_ != '"') return fail("a frame name that is not a string");
        if (!parseString(&name, &valueScratch_)) return false;
        tree_.setName(node, name);
      } else if (!skipValue(1)) {
        return false;
      }
    } while (next('}'));
    return error_.empty();
  }

  bool parseMetrics(int32_t node) {
    if (p_ < end_ && *p_ == 'n') return literal("null");
    if (!expect('{')) return false;
    tree_.beginMetrics();
    if (peekIs('}')) {
      ++p_;
      return true;
    }
    std::string_view key, text;
    do {
      ws();
      if (!parseString(&key, &keyScratch_) || !expect(':')) return false;
      ws();
      if (p_ >= end_) return fail("unexpected end");
      ValueKind kind = ValueKind::kAbsent;
      uint64_t bits = 0;
      if (*p_ == '"') {
        if (!parseString(&text, &valueScratch_)) return false;
        kind = ValueKind::kString;
        bits = tree_.internValue(text);
      } else if (!parseNumber(&kind, &bits)) {
        return false;
      }
      if (!tree_.setMetric(node, key, kind, bits)) return fail("metrics out of order");
    } while (next('}'));
    return error_.empty();
  }

  bool parseChildren(int32_t node, int depth) {
    if (p_ < end_ && *p_ == 'n') return literal("null");
    if (!expect('[')) return false;
    if (peekIs(']')) {
      ++p_;
      return true;
    }
    do {
      if (!parseNode(node, depth + 1)) return false;
    } while (next(']'));
    return error_.empty();
  }

  // Python's json number grammar; integers must fit int64, floats must be finite.
  bool parseNumber(ValueKind *kind, uint64_t *bits) {
    const char *start = p_;
    bool negative = p_ < end_ && *p_ == '-';
    if (negative) ++p_;
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') return fail("invalid value");
    const char *digits = p_;
    uint64_t magnitude = 0;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') magnitude = magnitude * 10 + (*p_++ - '0');
    }
    bool isFloat = false;
    if (p_ + 1 < end_ && *p_ == '.' && p_[1] >= '0' && p_[1] <= '9') {
      isFloat = true;
      p_ += 2;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      const char *q = p_ + 1;
      if (q < end_ && (*q == '+' || *q == '-')) ++q;
      if (q < end_ && *q >= '0' && *q <= '9') {
        isFloat = true;
        while (q < end_ && *q >= '0' && *q <= '9') ++q;
        p_ = q;
      }
    }
    if (isFloat) {
      double d;
      auto r = std::from_chars(start, p_, d);
      if (r.ec != std::errc() || r.ptr != p_) return fail("float out of range");
      std::memcpy(bits, &d, sizeof d);
      *kind = ValueKind::kDouble;
      return true;
    }
    int64_t i;
    if (p_ - digits <= 18) {  // no overflow possible
      i = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    } else {
      auto r = std::from_chars(start, p_, i);
      if (r.ec != std::errc() || r.ptr != p_) return fail("integer out of range");
    }
    std::memcpy(bits, &i, sizeof i);
    *kind = ValueKind::kInt;
    return true;
  }

  // A string at p_ (which is '"'): a view of the input when it has no escapes, else
  // decoded into *scratch. Rejects what Python would read differently (lone surrogates).
  bool parseString(std::string_view *out, std::string *scratch) {
    if (p_ >= end_ || *p_ != '"') return fail("expected a string");
    const char *start = ++p_;
    bool ascii = scanPlain();
    if (p_ < end_ && *p_ == '"') {
      if (!ascii && !validUtf8(start, p_)) return fail("invalid UTF-8");
      *out = std::string_view(start, p_ - start);
      ++p_;
      return true;
    }
    scratch->assign(start, p_);
    while (true) {
      if (p_ >= end_) return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') break;
      if (c < 0x20) return fail("control character in a string");
      if (c != '\\') {
        scratch->push_back(static_cast<char>(c));
        ++p_;
        continue;
      }
      if (++p_ >= end_) return fail("unterminated string");
      char e = *p_++;
      switch (e) {
        case '"':
          scratch->push_back('"');
          break;
        case '\\':
          scratch->push_back('\\');
          break;
        case '/':
          scratch->push_back('/');
          break;
        case 'b':
          scratch->push_back('\b');
          break;
        case 'f':
          scratch->push_back('\f');
          break;
        case 'n':
          scratch->push_back('\n');
          break;
        case 'r':
          scratch->push_back('\r');
          break;
        case 't':
          scratch->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return fail("lone surrogate");
            p_ += 2;
            if (!hex4(&low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return fail("lone surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail("lone surrogate");
          }
          appendUtf8(cp, scratch);
          break;
        }
        default:
          return fail("invalid escape");
      }
    }
    ++p_;
    if (!validUtf8(scratch->data(), scratch->data() + scratch->size())) {
      return fail("invalid UTF-8");
    }
    *out = *scratch;
    return true;
  }

  // Moves p_ to the first '"', '\\' or control character (or the end); false when it
  // passed a byte >= 0x80 (then the caller validates UTF-8).
  bool scanPlain() {
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
    auto zeroByte = [](uint64_t x) { return (x - kOnes) & ~x & kHighs; };
    bool ascii = true;
    while (true) {
      while (end_ - p_ >= 8) {
        uint64_t w;
        std::memcpy(&w, p_, 8);
        uint64_t special = zeroByte(w ^ (kOnes * '"')) | zeroByte(w ^ (kOnes * '\\')) |
                           ((w - kOnes * 0x20) & ~w & kHighs) | (w & kHighs);
        if (special == 0) {
          p_ += 8;
          continue;
        }
        p_ += __builtin_ctzll(special) / 8;  // the first flagged byte is exact
        break;
      }
      while (p_ < end_ && static_cast<unsigned char>(*p_) >= 0x20 && *p_ != '"' && *p_ != '\\' &&
             static_cast<unsigned char>(*p_) < 0x80) {
        ++p_;
      }
      if (p_ >= end_ || static_cast<unsigned char>(*p_) < 0x80) return ascii;
      ascii = false;
      ++p_;
    }
  }

  bool hex4(uint32_t *cp) {
    if (end_ - p_ < 4) return fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = *p_++;
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return fail("invalid \\u escape");
    }
    *cp = v;
    return true;
  }

  // Validates any JSON value (Python's dialect: NaN and Infinity included) and skips it.
  bool skipValue(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    ws();
    if (p_ >= end_) return fail("unexpected end");
    std::string_view ignored;
    switch (*p_) {
      case '"':
        return parseString(&ignored, &valueScratch_);
      case '{':
        ++p_;
        if (peekIs('}')) {
          ++p_;
          return true;
        }
        do {
          ws();
          if (!parseString(&ignored, &keyScratch_) || !expect(':') || !skipValue(depth + 1)) {
            return false;
          }
        } while (next('}'));
        return error_.empty();
      case '[':
        ++p_;
        if (peekIs(']')) {
          ++p_;
          return true;
        }
        do {
          if (!skipValue(depth + 1)) return false;
        } while (next(']'));
        return error_.empty();
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      case 'N':
        return literal("NaN");
      case 'I':
        return literal("Infinity");
      default: {
        if (end_ - p_ >= 9 && std::memcmp(p_, "-Infinity", 9) == 0) {
          p_ += 9;
          return true;
        }
        ValueKind kind = ValueKind::kAbsent;
        uint64_t bits = 0;
        // Skipped numbers need not fit: only their syntax matters.
        const char *start = p_;
        if (parseNumber(&kind, &bits)) return true;
        if (p_ == start || (*start == '-' && p_ == start + 1)) return false;
        error_.clear();
        return true;
      }
    }
  }

  const char *begin_;
  const char *p_;
  const char *end_;
  TreeBuilder tree_;
  TreeColumns *out_;
  std::string keyScratch_, valueScratch_;
  std::string error_;
};

}  // namespace

Status readHatchetJson(std::string_view data, TreeColumns *out) {
  return JsonParser(data, out).parse();
}

}  // namespace proton::viewer
