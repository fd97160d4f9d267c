"""``python -m playlisteval``."""

from playlisteval.cli import main

main()
