"""Make the damaged device memory profiles, one per failure mode, from the good
snapshot tests/data/runtime/run/after.prof (no jax needed):

    python tests/data/runtime-bad/make_bad.py

tests/test_runtime.py lists what each must fail with (file, byte offset, what
was expected). gzip headers carry no time (mtime=0), so the bytes are stable.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from bufferhouse.parse.proto import profile_pb2

HERE = Path(__file__).resolve().parent
GOOD = HERE.parent / "runtime" / "run" / "after.prof"


def _gzip(message: bytes) -> bytes:
    return gzip.compress(message, mtime=0)


def _profile() -> profile_pb2.Profile:
    profile = profile_pb2.Profile()
    profile.ParseFromString(gzip.decompress(GOOD.read_bytes()))
    return profile


def main() -> None:
    good = GOOD.read_bytes()
    message = gzip.decompress(good)
    out = {
        # the gzip stream stops half-way
        "truncated.prof": good[: len(good) // 2],
        # text, not gzip
        "not-gzip.prof": b"allocations count space bytes\n",
        # gzip of bytes that are no protobuf message (a varint that never ends)
        "not-a-message.pb.gz": _gzip(b"\x0a\x04\x08\x01\x10\x02" + b"\xff" * 12),
        # the Profile cut inside its last field
        "cut-message.prof": _gzip(message[: len(message) - 7]),
    }
    cpu = profile_pb2.Profile(string_table=["", "samples", "count", "cpu", "nanoseconds"])
    cpu.sample_type.add(type=1, unit=2)
    cpu.sample_type.add(type=3, unit=4)
    out["cpu-profile.prof"] = _gzip(cpu.SerializeToString())

    negative = _profile()
    negative.sample[3].value[1] = -4096
    out["negative-bytes.prof"] = _gzip(negative.SerializeToString())

    past = _profile()
    past.sample[2].label[0].str = len(past.string_table) + 5
    out["string-past-table.prof"] = _gzip(past.SerializeToString())

    nowhere = _profile()
    nowhere.sample[1].location_id.append(999_999)
    out["unknown-location.prof"] = _gzip(nowhere.SerializeToString())

    for name, data in out.items():
        (HERE / name).write_bytes(data)


if __name__ == "__main__":
    main()
