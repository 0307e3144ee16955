"""Measuring the bot from outside: ``companion bench`` (PERF-1) and ``companion eval`` (EVAL-1).

The top layer: prompts <- memory <- voice <- bot <- measure. It may import every package of ours,
because a measurement drives the real code (the bench's turn runs the bot's Orchestrator); nothing
imports it except the CLI's ``bench`` and ``eval`` handlers, inside the handler, so a running bot
never loads it. ``tests/test_architecture.py`` keeps these arrows, string imports included.

    bench        latency and throughput on synthetic stores, one process per size
    turn         the bench's pre-LLM turn, through the bot's own Orchestrator
    locomo       LoCoMo-format data: reading (.json or .json.gz), turns, evidence ids
    evaluation   evidence recall@k per method, one fresh store per sample
    answers      answers from memory end to end (EVAL-2): the run, the baselines, the summary
    asking       a conversation told to the bot and questions asked of it, through its pipeline
    scoring      LoCoMo's token F1, abstention on adversarial questions, the judge's label
    ledger       finished samples as JSON lines, so an interrupted eval resumes

Errors: bad data raises ``ValueError`` (``KeyError`` for a missing field); a resume file that
cannot be used raises ``ledger.LedgerError``, a ``ValueError`` too. The CLI turns both into one
line and exit 2.
"""
