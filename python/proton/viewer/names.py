"""Readable kernel names: a demangled C++ signature shown without its template and parameter
lists, as Nsight Systems shortens them. The profile keeps the full name; only the tree and
the sorted list show the short one (`proton-viewer --full-names` shows names whole), and
-i/-e, --lines and exports match and write the full name.

    short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::"
                      "FillFunctor<float>, std::array<char*, 1ul> >(int, ...)")
    -> "at::native::vectorized_elementwise_kernel<...>(...)"

The rule, implemented once in csrc/viewer/kernel_name.cc (the one-file report calls it
directly; tests/golden/kernel_names.tsv holds the cases it is checked against):
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

from .fast import short_kernel_name as _short


def short_kernel_name(name: str) -> str:
    """The name to display for `name` (itself when it is not a shortenable signature)."""
    return _short(name)


def display_names(names, full_names: bool):
    """`names` as the tree shows them."""
    if full_names:
        return list(names)
    return [_short(n) for n in names]
