"""atheris (libFuzzer for Python) target for proton.viewer.msgpack, the pure-Python
MessagePack decoder the viewer falls back to without the `msgpack` package: any bytes give
a value or MessagePackError, the same value as the package's (reader_checks.py).

    PYTHONPATH=build/fuzz/pkg:fuzz python3 fuzz/msgpack_fuzzer.py -runs=20000 -seed=1 \
        build/fuzz/work/msgpack fuzz/corpus/msgpack
"""

import sys

import atheris

with atheris.instrument_imports(include=["proton.viewer.msgpack", "reader_checks"]):
    import reader_checks

if __name__ == "__main__":
    atheris.Setup(sys.argv, reader_checks.check_msgpack_bytes)
    atheris.Fuzz()
