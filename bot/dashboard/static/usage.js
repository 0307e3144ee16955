/* The usage view (ORCH-14): what the model calls cost, from GET /api/usage, for the days chosen. Counts only. */
(function () {
  "use strict";
  const { el, table, counted, empty, api, showError, loaders, inits } = window.Dash;

  function rows(items, key, label) {
    return items.map((r) => el("tr", {}, el("td", { text: label ? label(r) : r[key] || "(none)" }), el("td", { class: "num", text: r.tokens.toLocaleString() }), el("td", { class: "num", text: r.calls.toLocaleString() }), el("td", { class: "num", text: r.cached_tokens.toLocaleString() })));
  }

  function group(title, items, key, label) {
    if (!items.length) return null;
    return el("div", { class: "usage-group" }, el("h3", { text: title }), table([title, "Tokens", "Calls", "Cached"], rows(items, key, label), title));
  }

  async function loadUsage() {
    const box = document.getElementById("usage-table");
    const days = document.getElementById("usage-days").value || "1";
    try {
      const data = await api("GET", `/api/usage?days=${encodeURIComponent(days)}`);
      const budgets = data.budgets ? `Daily budgets: ${data.budgets.person_tokens || "none"} a person, ${data.budgets.server_tokens || "none"} a server.` : "";
      const head = el("p", { text: `${data.first_day} to ${data.last_day} (UTC): ${counted(data.total.tokens, "token")} in ${counted(data.total.calls, "call")}. ${budgets}` });
      if (!data.total.calls) return box.replaceChildren(head, empty("No model calls in these days."));
      const parts = [
        group("Day", data.by_day, "day"),
        group("Place", data.by_place, "place", (r) => r.place || "private chats"),
        group("Job", data.by_kind, "kind"),
        group("Model", data.by_model, "model"),
        group("Person", data.people, "name", (r) => `${r.name} (${r.person_id})`),
      ];
      box.replaceChildren(head, ...parts.filter(Boolean));
    } catch (err) {
      showError(err);
    }
  }

  inits.push(function initUsage() {
    loaders.usage = loadUsage;
    document.getElementById("usage-days").addEventListener("change", loadUsage);
  });
})();
