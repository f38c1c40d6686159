"""The package version, in a module of its own so that any stage can read it
without importing the package face (which imports the API, which imports
the stages)."""

__version__ = "0.1.0"


def compiled_reader_missing() -> str | None:
    """Why the compiled column reader (parse/text/native) cannot be used, None if it can:
    each extension loaded from its file under its own name, without importing
    bufferhouse.parse (which imports pyarrow, numpy and the whole parser: 0.8 s that
    `bufferhouse --version` need not pay). The parser's own verdict is
    `bufferhouse.parse.text.native.MISSING`; tests/parse/text/test_native_install.py holds the two equal.
    """
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.join(os.path.dirname(__file__), "parse", "text", "native")
    for name in ("_allocations", "_blocks", "_instructions", "_lines"):
        full = f"bufferhouse.parse.text.native.{name}"
        paths = [os.path.join(here, name + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
        path = next((p for p in paths if os.path.exists(p)), None)
        if path is None:
            return f"the compiled column reader is not built (No module named {full!r})"
        had = full in sys.modules
        try:
            spec = importlib.util.spec_from_file_location(full, path)
            assert spec is not None
            importlib.util.module_from_spec(spec)
        except ImportError as exc:
            return f"the compiled column reader is not built ({exc})"
        finally:
            if not had:  # the parser imports it as its own, in its package
                sys.modules.pop(full, None)
    return None
