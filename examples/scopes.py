"""A first profile: annotated scopes, a CPU-timed scope and user metrics.

    python examples/scopes.py [output-name]

Runs anywhere: without a GPU, Proton records the scopes, their CPU time and the metrics.
Then look at the profile with any Hatchet reader, or `proton.data.get()` in Python.
"""

import sys
import warnings

import proton


def tokenize(text):
    with proton.scope("tokenize", {"chars": len(text)}):
        return text.split()


def count_words(words):
    with proton.cpu_timed_scope("count"):
        counts = {}
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        return counts


@proton.scope("pipeline")
def pipeline(text):
    return count_words(tokenize(text))


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "scopes"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        proton.start(name)
    for w in caught:  # e.g. "no GPU runtime was found ...; recording CPU scopes and metrics only"
        print(w.message)
    text = "the quick brown fox jumps over the lazy dog " * 1000
    for step in range(10):
        with proton.scope(f"step_{step % 2}", {"step_items (pty)": step}):
            pipeline(text)
    proton.finalize()
    print(f"Profile written to {name}.hatchet")


if __name__ == "__main__":
    main()
