"""The dashboard (DASH-1..3): a JSON API and one page to see, search, fix and forget what the bot remembers.

    app.py        create_app / serve / DashboardServer: middleware, error mapping, the page and the login form
    auth.py       bearer token or login cookie, CSRF for cookie sessions, constant-time comparisons
    services.py   what the routes are given: the store, its memory thread, the orchestrator (scope and prompt)
    common.py     what every route shares: services, caller, body parsing, JSON errors, the audit write
    bodies.py     pydantic request bodies (unknown fields and wrong types are a 400)
    contexts.py   a named conversation turned into the bot's own Turn (snapshot, contextual search)
    views.py      typed rows to JSON (the contract's memory shape, tiers), query-string parsing
    memories.py   /api/memory*: list, search, read, write, forget
    people.py     /api/people*, /api/snapshot, /api/reflections, /api/entities, /api/graph
    admin.py      /api/settings, /api/guilds (purge), /api/audit, /api/session

Every store call runs on the bot's memory thread (``AsyncRunner``), so inside ``companion run`` the
dashboard is not a second writer.
"""
