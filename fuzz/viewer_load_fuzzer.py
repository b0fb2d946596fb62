"""atheris (libFuzzer for Python) target for proton.viewer's file readers, the C++ fast path
included: each input is saved as a `.hatchet` and as a `.part_1.hatchet_msgpack` file,
loaded as proton-viewer loads it, compared with a plain json/MessagePack reading and
rendered. The properties are reader_checks.py's.

    PYTHONPATH=build/fuzz/pkg:fuzz python3 fuzz/viewer_load_fuzzer.py -runs=2000 -seed=1 \
        build/fuzz/work/viewer_load fuzz/corpus/json fuzz/corpus/msgpack
"""

import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["proton.viewer", "reader_checks"]):
    import reader_checks

_DIR = tempfile.mkdtemp(prefix="proton-viewer-fuzz-")


def test_one_input(data: bytes) -> None:
    reader_checks.check_profile_bytes(data, _DIR)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
