"""Model-calling jobs in one shape (``base``: gather -> ask -> apply -> report), one module per occasion: a live
conversation, the day, a check-in and upkeep. The bot's one runner (``bot.jobs``) schedules them."""
