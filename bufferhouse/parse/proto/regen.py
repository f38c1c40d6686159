"""Regenerate hlo_pb2.py and xplane_pb2.py from the .proto files beside them.

    python -m bufferhouse.parse.proto.regen [OUT_DIR]

Uses grpcio-tools' bundled protoc (the `test` extra pins its version, so the
output is reproducible byte for byte; tests/test_proto.py regenerates into a
temporary directory and compares).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]  # the files register as bufferhouse/parse/proto/*.proto: no clash
PROTOS = ("hlo.proto", "xplane.proto")


def regenerate(out_root: Path = ROOT) -> list[Path]:
    """Run protoc on the .proto files, writing under `out_root` (the repository root by
    default: the modules land beside the .proto files); return the generated paths."""
    from grpc_tools import protoc  # test/development dependency only

    rel = HERE.relative_to(ROOT)
    (out_root / rel).mkdir(parents=True, exist_ok=True)
    for name in PROTOS:
        code = protoc.main(["protoc", f"-I{ROOT}", f"--python_out={out_root}", str(rel / name)])
        if code != 0:
            raise RuntimeError(f"protoc failed on {name} (exit {code})")
    return [out_root / rel / (Path(name).stem + "_pb2.py") for name in PROTOS]


if __name__ == "__main__":
    for path in regenerate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT):
        print(path)
