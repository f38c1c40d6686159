"""Write bufferhouse/queries/jax_primitives.txt: the names of jax's primitives that eager
op-by-op dispatch compiles as `jit_<name>` helper programs (the bh_is_helper rule).

Run with jax 0.12.0.1 (Python 3.12, pinned in a venv of its own): JAX_PLATFORMS=cpu python bench/make_jax_primitives.py
Higher-order and state primitives (cond, scan, while, jit, shard_map, custom_*, remat*,
refs ...) are left out: they take a function, and a user's program is often named so.
"""

import re
import sys
from pathlib import Path

import jax
import jax.lax
import jax.nn
import jax.numpy
import jax.random
import jax.scipy.linalg
from jax.extend.core import Primitive

LEFT_OUT = re.compile(
    r"cond|scan|while|jit|shard_map|custom_.*|remat2|remat_opt|run_state|eval_jaxpr|call_.*"
    r"|linear_call|composite|stack|name|check|get|swap|pin|unpin|freeze|tie|empty|empty2"
    r"|new_ref|free_ref|empty_ref|accum_grad_in_ref|addupdate|dce_sink|unreachable"
)

names = set()
for mod in list(sys.modules.values()):
    if (getattr(mod, "__name__", "") or "").startswith("jax"):
        names |= {v.name for v in list(vars(mod).values()) if isinstance(v, Primitive)}
kept = sorted(n for n in names if not LEFT_OUT.fullmatch(n))
out = Path(__file__).parent.parent / "bufferhouse" / "queries" / "jax_primitives.txt"
out.write_text("\n".join(kept) + "\n")
print(f"jax {jax.__version__}: {len(names)} primitives, {len(kept)} kept -> {out}")
