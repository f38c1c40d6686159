"""Regenerate hlo_pb2.py, xplane_pb2.py and profile_pb2.py from the .proto files beside them.

    pip install --no-deps --target /tmp/protoc "grpcio-tools==1.49.1" "setuptools<81"
    PYTHONPATH=/tmp/protoc python -m bufferhouse.parse.proto.regen [OUT_DIR]

Uses the protoc bundled in grpcio-tools 1.49.1 (libprotoc 3.21.6), an old one on
purpose: its code has no runtime version check and runs on protobuf 4.21.6 and
every newer runtime (tests/parse/proto/test_protobuf_versions.py), while the code of protoc
27+ (grpcio-tools 1.66+) refuses any runtime older than itself. 1.49.1 is the
oldest release with a wheel for Python 3.11. It caps protobuf below 5, so it is
not a dependency of the project (installing it would pull protobuf back to 4.x):
it is installed apart, without its dependencies, with a setuptools that still
has pkg_resources (its protoc.py imports it). tests/parse/proto/test_proto.py does the same
into its cache, regenerates into a temporary directory and compares byte for
byte with the committed modules.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]  # the files register as bufferhouse/parse/proto/*.proto: no clash
PROTOS = ("hlo.proto", "xplane.proto", "profile.proto")
#: The protoc that wrote the committed modules, and what its grpc_tools needs to import.
PROTOC = ("grpcio-tools==1.49.1", "setuptools<81")


def regenerate(out_root: Path = ROOT) -> list[Path]:
    """Run protoc on the .proto files, writing under `out_root` (the repository root by
    default: the modules land beside the .proto files); return the generated paths."""
    want = PROTOC[0].split("==")[1]
    try:
        found = metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        found = None
    if found != want:
        raise RuntimeError(
            f"regen needs grpcio-tools {want} (found {found}): "
            f"pip install --no-deps --target DIR {' '.join(repr(s) for s in PROTOC)}"
            " and put DIR first on PYTHONPATH"
        )
    from grpc_tools import protoc  # installed apart, see the module docstring

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
