"""Buffer-assignment text dumps (`--xla_dump_to`), every era since 2019-09.

`grammar` declares the format (line kinds, section markers); `scan` reads it
line by line (the reference, which words every error); `vector` reads large
dumps as Arrow columns (`blocks`: their Used values blocks); `rules` checks
the invariants between lines over the columns either produced; `finish`
cross-checks the sections and builds the warehouse tables (`columns`: what is
parsed per distinct text); `heap` sweeps the heap peaks."""
