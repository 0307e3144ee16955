"""Images a person shares (ORCH-11), the bot's side: ``intake`` (fetched within limits, checked from
their own bytes) and ``vision`` (whether the chat model can see, and the note a shared image leaves in
memory). The memory side: ``memory.storage.model_traits`` (what a model was found able to do).
"""
