"""Reminders (ORCH-13), the bot's side: ``commands`` (/remind, /reminders and the answers they give),
``claims`` (a reply that says a reminder was set when none was stored is corrected) and ``sending`` (the
job that fires them where they were asked). The memory side: ``memory.reminding`` (the sender's books),
``memory.reminder_time`` (times read in the person's zone) and ``memory.storage.reminders`` (the table).
"""
