"""`python -m bufferhouse.cli`: the same as the `bufferhouse` command."""

from bufferhouse.cli import main

main()
