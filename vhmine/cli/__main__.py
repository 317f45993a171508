"""`python -m vhmine.cli`: the same command line as `vhmine`."""

from vhmine.cli import main

main()
