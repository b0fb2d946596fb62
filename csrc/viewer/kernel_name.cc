#include "viewer/kernel_name.h"

#include <cstddef>

#include "viewer/tree_render.h"

namespace proton::viewer {
namespace {

// The index of the '(' opening the final parenthesised group of a name ending in ')';
// npos when the parentheses do not balance.
size_t parameterListStart(std::string_view name) {
  int depth = 0;
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') {
      ++depth;
    } else if (name[i] == '(' && --depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

bool blank(std::string_view text) { return text.find_first_not_of(' ') == std::string_view::npos; }

}  // namespace

bool shortenKernelName(std::string_view name, std::string *out) {
  if (name.empty() || name.back() != ')') return false;
  size_t start = parameterListStart(name);
  if (start == std::string_view::npos || start == 0) return false;
  std::string_view signature = name.substr(0, start);
  std::string head;
  int angle = 0, paren = 0;
  size_t nameStart = 0;  // where the name begins in `head` (after the return type)
  bool templated = false;
  for (size_t i = 0; i < signature.size(); ++i) {
    char c = signature[i];
    if (angle > 0) {
      if (c == '<') ++angle;
      if (c == '>') --angle;
      continue;
    }
    if (c == '<') {
      angle = 1;
      templated = true;
      head += "<...>";
      continue;
    }
    // An operator's own brackets are part of its name: such a signature is kept whole.
    if (c == '>' || signature.substr(i, 8) == "operator") return false;
    if (c == '(') ++paren;
    if (c == ')' && --paren < 0) return false;
    head += c;
    if (c == ' ' && paren == 0) nameStart = head.size();
  }
  if (angle != 0 || paren != 0) return false;
  std::string_view base = std::string_view(head).substr(nameStart);
  if (base.empty() || (!templated && base.find("::") == std::string_view::npos)) return false;
  std::string shortName(base);
  shortName += blank(name.substr(start + 1, name.size() - start - 2)) ? "()" : "(...)";
  if (countCharacters(shortName) >= countCharacters(name)) return false;
  *out = std::move(shortName);
  return true;
}

}  // namespace proton::viewer
