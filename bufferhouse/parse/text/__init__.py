"""Buffer-assignment text dumps (`--xla_dump_to`), every era since 2019-09:
`scan` reads line by line (the reference, which words every error),
`vector` reads large dumps as Arrow columns, `finish` cross-checks what either
scanned and builds the warehouse tables, `heap` sweeps the heap peaks."""
