#include "core/context_sources.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace proton {
namespace {

std::string trimmedLower(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool isFramework(const std::string &name) {
  for (const char *f : kFrameworkNames)
    if (name == f) return true;
  return false;
}

std::string allowedValues() {
  std::string names = "shadow, python, native";
  std::string listable = "python, native";
  for (const char *f : kFrameworkNames) {
    names += std::string(", ") + f;
    listable += std::string(", ") + f;
  }
  return names + ", or a comma-separated list of " + listable;
}

}  // namespace

std::string ContextSources::name() const {
  if (shadowOnly()) return "shadow";
  std::string out;
  auto add = [&](const std::string &s) { out += (out.empty() ? "" : ",") + s; };
  if (python) add("python");
  if (framework) add(frameworkName);
  if (native) add("native");
  return out;
}

Result<ContextSources> parseContextSources(std::string_view s) {
  ContextSources out;
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    items.push_back(trimmedLower(
        s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::string quoted = "'" + std::string(s) + "'";
  bool shadow = false;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string &item = items[i];
    if (item.empty()) {
      if (items.size() == 1) break;  // "" alone: the default, shadow
      return invalidArgument("[PROTON] context " + quoted +
                             " has an empty entry; expected a comma-separated list such as "
                             "'python,torch'");
    }
    if (std::find(items.begin(), items.begin() + i, item) != items.begin() + i)
      return invalidArgument("[PROTON] context " + quoted + " names '" + item + "' twice");
    if (item == "shadow") {
      shadow = true;
    } else if (item == "python") {
      out.python = true;
    } else if (item == "native") {
      out.native = true;
    } else if (isFramework(item)) {
      if (out.framework)
        return invalidArgument("[PROTON] context " + quoted + " combines '" + out.frameworkName +
                               "' and '" + item + "': one framework per session");
      out.framework = true;
      out.frameworkName = item;
    } else {
      return invalidArgument("[PROTON] Unknown context source: '" + item +
                             "'. Allowed values: " + allowedValues());
    }
  }
  if (shadow && !out.shadowOnly())
    return invalidArgument("[PROTON] context " + quoted +
                           " is not supported: 'shadow' (the annotated scopes alone) cannot be "
                           "combined; scopes are part of every context, so leave it out");
  return out;
}

}  // namespace proton
