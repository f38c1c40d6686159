"""Make the byte-level variants of the hand-written OOM fixtures beside this file.

Run from anywhere: python tests/data/oom/make_variants.py. Each output is a
base fixture transformed in one way, so its expected numbers are the base's:
  several.log.gz      gpu-peak-buffers.log + tpu-compile.log + one-line.txt, gzipped
  crlf.txt            tpu-compile.log with CRLF line ends
  non-utf8.log        gpu-peak-buffers.log with Latin-1 bytes in a log line and in an op_name
"""

import gzip
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    gpu = (HERE / "gpu-peak-buffers.log").read_bytes()
    tpu = (HERE / "tpu-compile.log").read_bytes()
    one = (HERE / "one-line.txt").read_bytes()
    several = gpu + b"=== job 2 ===\n" + tpu + b"=== job 3 ===\n" + one
    # mtime=0: the same bytes on every run, so the committed file does not churn
    with gzip.GzipFile(HERE / "several.log.gz", "wb", mtime=0) as f:
        f.write(several)
    (HERE / "crlf.txt").write_bytes(tpu.replace(b"\n", b"\r\n"))
    bad = gpu.replace(b"loss=2.3142", b"loss=2.3142 caf\xe9").replace(
        b"transformer/mlp/transpose", b"transformer/ml\xffp/transpose"
    )
    (HERE / "non-utf8.log").write_bytes(bad)


if __name__ == "__main__":
    main()
