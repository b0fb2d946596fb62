"""Readable kernel names: a demangled C++ signature shown without its template and parameter
lists, as Nsight Systems shortens them. The profile keeps the full name; only the tree and
the sorted list show the short one (`proton-viewer --full-names` shows names whole), and
-i/-e, --lines and exports match and write the full name.

    short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::"
                      "FillFunctor<float>, std::array<char*, 1ul> >(int, ...)")
    -> "at::native::vectorized_elementwise_kernel<...>(...)"

The rule, which csrc/viewer/kernel_name.cc implements identically (tests/golden/
kernel_names.tsv holds the cases both are checked against):
- only a name ending in ')' whose final parenthesised group is balanced is a candidate;
  that group is the parameter list, written "()" when empty (blank) and "(...)" otherwise;
- in what precedes it, every outermost <...> becomes "<...>"; parentheses outside template
  lists, such as "(anonymous namespace)", stay;
- the return type goes: the name starts after the last space outside <> and ();
- a name with "operator" outside its template lists (an operator's own signature, whose
  brackets are part of the name), with unbalanced brackets, with no "::" and no template list
  (a plain scope such as "step(3)"), or that would not get shorter (in characters) is kept;
  "operator" inside a template list (a lambda's "::operator()() const") is elided with it.
"""

ELLIPSIS_TEMPLATE = "<...>"
ELLIPSIS_PARAMS = "(...)"


def short_kernel_name(name: str) -> str:
    """The name to display for `name` (itself when it is not a shortenable signature)."""
    if not name.endswith(")"):
        return name
    depth = 0
    start = -1
    for i in range(len(name) - 1, -1, -1):
        c = name[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                start = i
                break
    if start <= 0:
        return name
    head = name[:start]
    out = []
    angle = paren = 0
    name_start = 0  # where the name begins in `out` (after the return type)
    templated = False
    for i, c in enumerate(head):
        if angle > 0:
            if c == "<":
                angle += 1
            elif c == ">":
                angle -= 1
            continue
        if c == "<":
            angle = 1
            templated = True
            out.append(ELLIPSIS_TEMPLATE)
            continue
        if c == ">" or head.startswith("operator", i):
            return name
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
            if paren < 0:
                return name
        out.append(c)
        if c == " " and paren == 0:
            name_start = len(out)
    if angle != 0 or paren != 0:
        return name
    base = "".join(out[name_start:])
    if not base or (not templated and "::" not in base):
        return name
    params = name[start + 1 : -1]
    short = base + ("()" if params.strip(" ") == "" else ELLIPSIS_PARAMS)
    return short if len(short) < len(name) else name


def display_names(names, full_names: bool):
    """`names` as the tree shows them."""
    if full_names:
        return list(names)
    return [short_kernel_name(n) for n in names]
