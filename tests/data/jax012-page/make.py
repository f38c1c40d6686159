"""Make the jax 0.12 CPU dump of tests/test_today_xla.py: every allocation line says `page 0`.

Run with the jax it pins (Python >= 3.12): `pip install jax==0.12.0.1`, then
`python make.py` from this folder. Writes dump/ (the program's text and proto
dump, jax's helper programs left out) and memory_analysis.json.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAM = """
import json, jax, jax.numpy as jnp
jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")
def step(w, x):
    h = jnp.tanh(x @ w)
    return h.sum(), x * 2
c = jax.jit(step, donate_argnums=0).lower(jnp.ones((256, 512)), jnp.ones((64, 256))).compile()
m = c.memory_analysis()
fields = [f for f in dir(m) if f.endswith("_in_bytes")]
print(json.dumps({"jax": jax.__version__, **{f: getattr(m, f) for f in fields}}))
"""


def main() -> None:
    dump = HERE / "dump"
    shutil.rmtree(dump, ignore_errors=True)
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
        " --xla_dump_hlo_module_re=jit_step",
    }
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, check=True, capture_output=True, text=True
    ).stdout
    (HERE / "memory_analysis.json").write_text(json.dumps(json.loads(out), indent=1) + "\n")
    for f in dump.iterdir():  # the memory files only
        keep = "after_optimizations" in f.name and (
            f.name.endswith(
                (
                    ".hlo.pb",
                    "-buffer-assignment.txt",
                    "-values.txt",
                    "-live-range.txt",
                    "-memory-usage-report.txt",
                )
            )
        )
        if not keep:
            shutil.rmtree(f) if f.is_dir() else f.unlink()


if __name__ == "__main__":
    main()
