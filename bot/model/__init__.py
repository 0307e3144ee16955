"""The chat model, as the bot talks to it: ``client`` (``ChatClient``: the OpenAI-compatible SDK, the
tool loop, retries and the turn's deadline), ``textual_tools`` (tool calls a model writes as text),
``reply_checks`` (answers made only of given words, copied notes, echoes), ``honesty`` (no claim of a
memory or reminder the store does not hold), ``gate`` (replies before background work on one local
model), ``local`` (a model file served by llama.cpp), ``quirks`` (what differs between servers) and
``language`` (the language a person writes in, and how to ask for an answer in it).
"""
