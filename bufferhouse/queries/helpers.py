"""Which modules are jax's helper programs: the one rule (the macro bh_is_helper) that the
queries, the report and your own SQL share.

A jax program run eagerly, outside jit, compiles small programs of its own beside
yours: each lax primitive dispatched op by op is a module `jit_<primitive>`
(`jit_convert_element_type`, `jit_broadcast_in_dim`, `jit_iota`), and jax's private
jitted functions are `jit__<name>` (`jit__normal`, `jit__uniform`, `jit__multi_slice`,
`jit__threefry_split`). A module is a helper program when its name is

- `jit__` followed by anything (a jitted function whose name starts with `_`), or
- `jit_` + one of the primitives in jax_primitives.txt (jax 0.12's, written by
  bench/make_jax_primitives.py; higher-order ones such as scan, cond and while are
  left out: a program of yours is often named so).

A function of yours named `_step` or `transpose` counts as a helper too; jnp's
public jitted wrappers (`jit_clip`, `jit_greater`) do not.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

HELPER_NAME = "bh_is_helper"
HELPER_PARAMS = ("module_name",)


@cache
def primitives() -> tuple[str, ...]:
    text = resources.files(__package__).joinpath("jax_primitives.txt").read_text("utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


@cache
def helper_body() -> str:
    listed = ", ".join(f"'jit_{p}'" for p in primitives())
    return f"\n  starts_with(module_name, 'jit__')\n  OR module_name IN ({listed})"


def helper_macro_sql(temp: bool = False) -> str:
    kind = "TEMP MACRO" if temp else "MACRO"
    return f"CREATE OR REPLACE {kind} {HELPER_NAME}({', '.join(HELPER_PARAMS)}) AS{helper_body()}"


def is_helper(name: str | None) -> bool:
    """The same rule in Python (tests hold it to the macro)."""
    if not name or not name.startswith("jit_"):
        return False
    return name.startswith("jit__") or name.removeprefix("jit_") in primitives()
