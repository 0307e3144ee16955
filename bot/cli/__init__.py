"""``companion``: the command line (OPS-2), one module per group of commands.

main          parsing, settings, logging, errors to exit codes
conversation  run, chat, snapshot
memories      memory list | search | add | show | edit | delete | export | import | forget-person
upkeep        consolidate, decay, prune, reembed, backup, restore, journals rebuild, stats, retry-failed, eval, bench
store         store copy SRC DST (SQLite <-> PostgreSQL), store scrub (rewrite the files after forgetting)
doctor        what is wrong with this installation, and how to fix it
output        tables, JSON, progress bars and errors on the terminal
"""

from .main import main

__all__ = ["main"]
