"""What model calls cost and who pays (ORCH-14), the bot's side: ``usage`` (what a server says a request
cost), ``attribution`` (whose each call is), ``budgets`` (the daily budgets and how the bot spends less
as one nears) and ``commands`` (/usage). The memory side: ``memory.usage`` (the ledger's reads,
``Spending``), ``memory.charges`` (whose each job's cost is) and ``memory.storage.ledger`` (the table).
"""
