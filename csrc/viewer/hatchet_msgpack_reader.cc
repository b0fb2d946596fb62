// The MessagePack half of hatchet_reader.h, plus reading a file. Same contract as the
// JSON reader: what the Python decoder would read differently is an error status.
#include <cstring>
#include <string>

#include "viewer/hatchet_reader.h"
#include "viewer/mapped_file.h"
#include "viewer/tree_builder.h"
#include "viewer/utf8.h"

namespace proton::viewer {
namespace {

constexpr int kMaxDepth = 2000;

class MsgpackParser {
 public:
  MsgpackParser(std::string_view data, TreeColumns *out)
      : begin_(reinterpret_cast<const uint8_t *>(data.data())),
        p_(begin_),
        end_(begin_ + data.size()),
        tree_(out, estimateNodes(data,
                                 "\xA5"
                                 "frame")),
        out_(out) {}

  Status parse() {
    if (!parseDocument()) return invalidArgument(error_);
    tree_.finish();
    return Status::ok();
  }

 private:
  bool fail(const char *what) {
    if (error_.empty()) {
      error_ = std::string("MessagePack: ") + what + " at byte " + std::to_string(p_ - begin_);
    }
    return false;
  }
  bool need(size_t n) { return static_cast<size_t>(end_ - p_) >= n || fail("truncated"); }
  uint64_t be(int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v = (v << 8) | p_[k];
    p_ += n;
    return v;
  }
  // Reads a length of n bytes after the tag.
  bool length(int n, uint64_t *out) {
    if (!need(n)) return false;
    *out = be(n);
    return true;
  }
  bool arrayHeader(uint64_t *n) {
    if (!need(1)) return false;
    uint8_t t = *p_++;
    if (t >= 0x90 && t <= 0x9F) return *n = t & 0x0F, true;
    if (t == 0xDC) return length(2, n);
    if (t == 0xDD) return length(4, n);
    --p_;
    return fail("expected an array");
  }
  bool mapHeader(uint64_t *n) {
    if (!need(1)) return false;
    uint8_t t = *p_++;
    if (t >= 0x80 && t <= 0x8F) return *n = t & 0x0F, true;
    if (t == 0xDE) return length(2, n);
    if (t == 0xDF) return length(4, n);
    --p_;
    return fail("expected a map");
  }
  bool isString() const {
    return p_ < end_ && ((*p_ >= 0xA0 && *p_ <= 0xBF) || (*p_ >= 0xD9 && *p_ <= 0xDB));
  }
  bool isNil() const { return p_ < end_ && *p_ == 0xC0; }
  bool parseString(std::string_view *out) {
    if (!need(1)) return false;
    uint8_t t = *p_++;
    uint64_t n = 0;
    if (t >= 0xA0 && t <= 0xBF) {
      n = t & 0x1F;
    } else if (t >= 0xD9 && t <= 0xDB) {
      if (!length(1 << (t - 0xD9), &n)) return false;
    } else {
      --p_;
      return fail("expected a string");
    }
    if (!need(n)) return false;
    auto s = reinterpret_cast<const char *>(p_);
    if (!validUtf8(s, s + n)) return fail("invalid UTF-8");
    *out = std::string_view(s, n);
    p_ += n;
    return true;
  }

  bool parseDocument() {
    uint64_t n = 0;
    if (!arrayHeader(&n)) return false;
    if (n == 0) return fail("empty top-level array");
    if (!parseNode(-1, 0)) return false;
    if (n > 1) {
      const uint8_t *start = p_;
      if (p_ >= end_ || !((*p_ >= 0x80 && *p_ <= 0x8F) || *p_ == 0xDE || *p_ == 0xDF)) {
        return fail("the device table is not a map");
      }
      if (!skipValue(1)) return false;
      out_->devices.assign(reinterpret_cast<const char *>(start), p_ - start);
    }
    for (uint64_t k = 2; k < n; ++k) {
      if (!skipValue(1)) return false;
    }
    if (p_ != end_) return fail("extra bytes after the document");
    return true;
  }

  bool parseNode(int32_t parent, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    uint64_t n = 0;
    if (!mapHeader(&n)) return false;
    int32_t node = tree_.beginNode(parent);
    bool frame = false, metrics = false, children = false;
    std::string_view key;
    for (uint64_t k = 0; k < n; ++k) {
      if (!parseString(&key)) return false;
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
        const uint8_t *start = p_;
        if (!skipValue(depth + 1)) return false;
        out_->metadata.assign(reinterpret_cast<const char *>(start), p_ - start);
      } else if (!skipValue(depth + 1)) {
        return false;
      }
    }
    if (!frame || !tree_.hasName(node)) return fail("a node without a frame name");
    return true;
  }

  bool parseFrame(int32_t node) {
    uint64_t n = 0;
    if (!mapHeader(&n)) return false;
    std::string_view key, name;
    for (uint64_t k = 0; k < n; ++k) {
      if (!parseString(&key)) return false;
      if (key == "name") {
        if (!parseString(&name)) return false;
        tree_.setName(node, name);
      } else if (!skipValue(1)) {
        return false;
      }
    }
    return true;
  }

  bool parseMetrics(int32_t node) {
    if (isNil()) return ++p_, true;
    uint64_t n = 0;
    if (!mapHeader(&n)) return false;
    tree_.beginMetrics();
    std::string_view key, text;
    for (uint64_t k = 0; k < n; ++k) {
      if (!parseString(&key)) return false;
      ValueKind kind = ValueKind::kAbsent;
      uint64_t bits = 0;
      if (isString()) {
        if (!parseString(&text)) return false;
        kind = ValueKind::kString;
        bits = tree_.internValue(text);
      } else if (!parseNumber(&kind, &bits)) {
        return false;
      }
      if (!tree_.setMetric(node, key, kind, bits)) return fail("metrics out of order");
    }
    return true;
  }

  bool parseChildren(int32_t node, int depth) {
    if (isNil()) return ++p_, true;
    uint64_t n = 0;
    if (!arrayHeader(&n)) return false;
    for (uint64_t k = 0; k < n; ++k) {
      if (!parseNode(node, depth + 1)) return false;
    }
    return true;
  }

  bool parseNumber(ValueKind *kind, uint64_t *bits) {
    if (!need(1)) return false;
    uint8_t t = *p_++;
    int64_t i;
    if (t <= 0x7F) {
      i = t;
    } else if (t >= 0xE0) {
      i = static_cast<int64_t>(t) - 0x100;
    } else if (t >= 0xCC && t <= 0xCF) {  // uint 8..64
      int n = 1 << (t - 0xCC);
      if (!need(n)) return false;
      uint64_t u = be(n);
      if (u > static_cast<uint64_t>(INT64_MAX)) return fail("integer out of range");
      i = static_cast<int64_t>(u);
    } else if (t >= 0xD0 && t <= 0xD3) {  // int 8..64
      int n = 1 << (t - 0xD0);
      if (!need(n)) return false;
      uint64_t u = be(n);
      int shift = 64 - 8 * n;
      i = static_cast<int64_t>(u << shift) >> shift;
    } else if (t == 0xCA) {
      if (!need(4)) return false;
      auto u = static_cast<uint32_t>(be(4));
      float f;
      std::memcpy(&f, &u, 4);
      double d = f;
      std::memcpy(bits, &d, 8);
      *kind = ValueKind::kDouble;
      return true;
    } else if (t == 0xCB) {
      if (!need(8)) return false;
      *bits = be(8);
      *kind = ValueKind::kDouble;
      return true;
    } else {
      --p_;
      return fail("a metric value that is not a number or a string");
    }
    std::memcpy(bits, &i, 8);
    *kind = ValueKind::kInt;
    return true;
  }

  // Validates and skips any value the Python decoder accepts (no ext types).
  bool skipValue(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    if (!need(1)) return false;
    uint8_t t = *p_;
    uint64_t n = 0;
    if (t <= 0x7F || t >= 0xE0 || t == 0xC0 || t == 0xC2 || t == 0xC3) return ++p_, true;
    if (isString()) {
      std::string_view ignored;
      return parseString(&ignored);
    }
    if ((t >= 0x90 && t <= 0x9F) || t == 0xDC || t == 0xDD) {
      if (!arrayHeader(&n)) return false;
      for (uint64_t k = 0; k < n; ++k) {
        if (!skipValue(depth + 1)) return false;
      }
      return true;
    }
    if ((t >= 0x80 && t <= 0x8F) || t == 0xDE || t == 0xDF) {
      if (!mapHeader(&n)) return false;
      for (uint64_t k = 0; k < n; ++k) {
        // Keys must be hashable: no arrays or maps.
        if (p_ < end_ && ((*p_ >= 0x80 && *p_ <= 0x9F) || (*p_ >= 0xDC && *p_ <= 0xDF))) {
          return fail("unhashable map key");
        }
        if (!skipValue(depth + 1) || !skipValue(depth + 1)) return false;
      }
      return true;
    }
    if (t >= 0xC4 && t <= 0xC6) {  // bin
      ++p_;
      if (!length(1 << (t - 0xC4), &n) || !need(n)) return false;
      p_ += n;
      return true;
    }
    ValueKind kind = ValueKind::kAbsent;
    uint64_t bits = 0;
    return parseNumber(&kind, &bits);
  }

  const uint8_t *begin_;
  const uint8_t *p_;
  const uint8_t *end_;
  TreeBuilder tree_;
  TreeColumns *out_;
  std::string error_;
};

}  // namespace

Status readHatchetMsgpack(std::string_view data, TreeColumns *out) {
  return MsgpackParser(data, out).parse();
}

Status readHatchetFile(const std::string &path, bool msgpack, TreeColumns *out) {
  MappedFile file;
  Status status = file.open(path);
  if (!status.isOk()) return status;
  return msgpack ? readHatchetMsgpack(file.bytes(), out) : readHatchetJson(file.bytes(), out);
}

}  // namespace proton::viewer
