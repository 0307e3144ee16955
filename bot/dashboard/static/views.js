/* The read-mostly views of the dashboard page: the runtime snapshot, people and their profiles, the
 * reflections audit, guilds (purge with a typed-name confirmation), the audit trail and the settings
 * dialog. Same rule as app.js: data reaches the page as text only (Dash.el), never as markup.
 */
"use strict";

(function () {
  const { el, table, empty, api, showError, clearError, toast, memoryTable, timeCell, formValues, query, loaders } = window.Dash;

  function asText(value) {
    if (value === null || value === undefined) return "";
    return typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  // -- snapshot: what the bot would put in the prompt for this message ---------------------------------
  function contextLine(ctx) {
    if (!ctx) return null;
    const where = ctx.guild ? `in guild ${ctx.guild}` : ctx.dm ? "in a DM" : "";
    const parts = [`as ${ctx.person || "?"}`, where, ctx.owner_private ? "owner-private" : "", `partitions: ${(ctx.partitions || []).join(", ") || "none"}`];
    return el("p", { class: "muted snapshot-context", text: parts.filter(Boolean).join(" · ") });
  }

  function renderSnapshot(data) {
    const parts = [contextLine(data.context)].filter(Boolean);
    const sections = data.sections || [];
    const filled = sections.filter((s) => s.lines && s.lines.length);
    for (const section of filled) {
      parts.push(el("section", { class: "card snapshot-section" }, el("h3", { text: section.title }), el("ul", { class: "lines" }, section.lines.map((line) => el("li", { text: line })))));
    }
    const bare = sections.filter((s) => !(s.lines && s.lines.length)).map((s) => s.title);
    if (bare.length) parts.push(el("p", { class: "muted small", text: `Empty here: ${bare.join("; ")}` }));
    if (!filled.length) parts.push(empty("Nothing from memory would be shown for this message."));
    parts.push(el("details", { class: "card", open: true }, el("summary", { text: "Prompt text" }), el("pre", { class: "snapshot-text", text: data.text || "" })));
    parts.push(el("h3", { text: "Memories behind it" }), memoryTable(data.memories || [], { readonly: true, caption: "Memories in the snapshot", emptyText: "No memories." }));
    return parts;
  }

  function initSnapshot() {
    const form = document.getElementById("snapshot-form");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const out = document.getElementById("snapshot-out");
      try {
        out.replaceChildren(...renderSnapshot(await api("GET", "/api/snapshot" + query(formValues(form)))));
      } catch (err) {
        out.replaceChildren();
        showError(err);
      }
    });
  }

  // -- people and their profiles ---------------------------------------------------------------------------
  function accountText(a) {
    return [a.platform, a.user_id, a.name].filter((x) => x !== null && x !== undefined && x !== "").join(" · ");
  }

  async function loadPeople() {
    const box = document.getElementById("people-list");
    try {
      const data = await api("GET", "/api/people");
      if (!data.items.length) return box.replaceChildren(empty("Nobody yet."));
      const rows = data.items.map((p) =>
        el(
          "tr",
          { dataset: { id: p.id } },
          el("td", { text: (p.names || []).join(", ") || p.id }),
          el("td", {}, (p.accounts || []).map((a) => el("div", { class: "account", text: accountText(a) }))),
          el("td", { class: "num", text: p.memories }),
          el("td", {}, el("button", { type: "button", class: "open-person", "aria-label": `Open profile of ${(p.names || [])[0] || p.id}`, text: "Profile", onclick: () => openPerson(p.id) })),
        ),
      );
      box.replaceChildren(table(["Names", "Linked accounts", "Memories", ""], rows, "People"));
    } catch (err) {
      showError(err);
    }
  }

  async function openPerson(id) {
    const box = document.getElementById("person-detail");
    try {
      const p = await api("GET", `/api/people/${encodeURIComponent(id)}`);
      box.replaceChildren(...personParts(p));
      box.hidden = false;
    } catch (err) {
      showError(err);
    }
  }

  function personParts(p) {
    const parts = [el("h3", { text: (p.names || []).join(", ") || p.id }), el("p", { class: "muted", text: `id ${p.id}` })];
    parts.push(el("h4", { text: "Linked accounts" }), el("ul", {}, (p.accounts || []).map((a) => el("li", { text: accountText(a) }))));
    const profile = Object.entries(p.profile || {});
    parts.push(el("h4", { text: "Profile" }));
    if (!profile.length) parts.push(empty("No memories about this person."));
    for (const [type, items] of profile) parts.push(el("h5", { text: type }), memoryTable(items, { readonly: true, compact: true, caption: `${type} memories` }));
    const settings = Object.entries(p.settings || {});
    if (settings.length) parts.push(el("h4", { text: "Settings" }), el("dl", { class: "settings-list" }, settings.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: asText(v) })])));
    parts.push(timezoneForm(p));
    parts.push(
      el(
        "div",
        { class: "form-actions" },
        el("button", { type: "button", text: "Export JSON", onclick: () => exportPerson(p.id) }),
        el("button", { type: "button", class: "danger", text: "Forget this person…", onclick: () => forgetPerson(p) }),
      ),
    );
    return parts;
  }

  /** ORCH-8: the person's time zone (an IANA name; empty goes back to the operator's default). */
  function timezoneForm(p) {
    const settings = p.settings || {};
    const input = el("input", { type: "text", name: "timezone", value: settings.timezone || "", placeholder: settings.timezone_default || "UTC", "aria-label": "Time zone" });
    const save = async (event) => {
      event.preventDefault();
      try {
        await api("PUT", `/api/people/${encodeURIComponent(p.id)}/timezone`, { zone: input.value.trim() });
        await openPerson(p.id);
      } catch (err) {
        showError(err);
      }
    };
    return el("form", { class: "form-actions", onsubmit: save }, el("label", { text: "Time zone " }, input), el("button", { type: "submit", text: "Save time zone" }));
  }

  async function exportPerson(id) {
    try {
      const data = await api("GET", `/api/people/${encodeURIComponent(id)}/export`);
      const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }));
      const link = el("a", { href: url, download: `person-${id}.json` });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      showError(err);
    }
  }

  function forgetPerson(p) {
    confirmTyped({
      title: "Forget this person",
      text: "Everything the bot remembers about them, their messages and their links is removed. This cannot be undone.",
      expected: String(p.id),
      label: "Forget",
      run: async (typed) => {
        const result = await api("DELETE", `/api/people/${encodeURIComponent(p.id)}`, { confirm: typed });
        toast(`Forgotten: ${summary(result.forgotten)}`, { kind: "ok" });
        document.getElementById("person-detail").hidden = true;
        loadPeople();
      },
    });
  }

  function summary(counts) {
    return Object.entries(counts || {})
      .map(([k, v]) => `${k} ${v}`)
      .join(", ") || "nothing";
  }

  // -- the typed confirmation dialog (guild purge, forget a person) --------------------------------------
  function confirmTyped({ title, text, expected, label, run }) {
    const dialog = document.getElementById("confirm-dialog");
    const input = document.getElementById("confirm-input");
    const go = document.getElementById("confirm-go");
    const error = document.getElementById("confirm-error");
    document.getElementById("h-confirm").textContent = title;
    document.getElementById("confirm-text").textContent = text;
    document.getElementById("confirm-expected").textContent = expected;
    go.textContent = label;
    go.disabled = true;
    input.value = "";
    clearError(error);
    input.oninput = () => (go.disabled = input.value !== expected);
    document.getElementById("confirm-form").onsubmit = async (event) => {
      event.preventDefault();
      if (input.value !== expected) return;
      go.disabled = true;
      try {
        await run(input.value);
        dialog.close();
      } catch (err) {
        showError(err, error);
        go.disabled = input.value !== expected;
      }
    };
    document.getElementById("confirm-cancel").onclick = () => dialog.close();
    dialog.showModal();
    input.focus();
  }

  // -- guilds -----------------------------------------------------------------------------------------------
  async function loadGuilds() {
    const box = document.getElementById("guilds-table");
    try {
      const data = await api("GET", "/api/guilds");
      if (!data.items.length) return box.replaceChildren(empty("No guilds."));
      const rows = data.items.map((g) =>
        el(
          "tr",
          { dataset: { id: g.id } },
          el("td", { text: g.name || "(name unknown)" }),
          el("td", { class: "mono", text: g.id }),
          el("td", { class: "num", text: g.memories }),
          el("td", {}, el("button", { type: "button", class: "persona", "aria-label": `Persona of guild ${g.name || g.id}`, text: "Persona…", onclick: () => editPersona(g) })),
          el("td", {}, el("button", { type: "button", class: "manners", "aria-label": `Manners in guild ${g.name || g.id}`, text: "Manners…", onclick: () => editManners(g) })),
          el("td", {}, el("button", { type: "button", class: "danger purge", "aria-label": `Purge guild ${g.name || g.id}`, text: "Purge…", onclick: () => purgeGuild(g) })),
        ),
      );
      box.replaceChildren(table(["Name", "Id", "Memories", "", "", ""], rows, "Guilds"));
    } catch (err) {
      showError(err);
    }
  }

  // ORCH-7: a place's own persona, added to the operator's (the same checks and audit as /persona set).
  async function editPersona(g) {
    try {
      const shown = await api("GET", "/api/persona");
      const current = (shown.places.find((p) => p.guild_id === g.id) || {}).text || "";
      const text = window.prompt(`Persona of ${g.name || g.id} (at most ${shown.max_place_chars} characters; empty: none)`, current);
      if (text === null) return;
      const path = `/api/guilds/${encodeURIComponent(g.id)}/persona`;
      await (text.trim() ? api("PUT", path, { text }) : api("DELETE", path));
      toast(text.trim() ? "Persona saved." : "Persona removed.", { kind: "ok" });
    } catch (err) {
      showError(err);
    }
  }

  // ORCH-10: when the bot speaks in each channel of a guild (the same as /manners there), one channel at a time.
  async function editManners(g) {
    try {
      const shown = await api("GET", "/api/manners");
      const places = shown.places.filter((p) => p.guild_id === g.id);
      if (!places.length) return toast("The bot has not talked in any channel of this guild yet.", { kind: "ok" });
      for (const p of places) {
        const now = p.mode || "addressed (default)";
        const mode = window.prompt(`Mode of ${p.channel_key}, now ${now}: one of ${shown.modes.join(", ")} (cancel: keep)`, p.mode || "");
        if (mode === null || !mode.trim() || mode.trim() === p.mode) continue;
        await api("PUT", `/api/places/${encodeURIComponent(p.channel_key)}/manners`, { mode: mode.trim() });
        toast(`${p.channel_key}: ${mode.trim()}.`, { kind: "ok" });
      }
    } catch (err) {
      showError(err);
    }
  }

  function purgeGuild(g) {
    confirmTyped({
      title: `Purge ${g.name || g.id}`,
      text: "Every memory, message and summary from this guild is forgotten. This cannot be undone.",
      expected: String(g.name || g.id),
      label: "Purge guild",
      run: async (typed) => {
        const result = await api("POST", `/api/guilds/${encodeURIComponent(g.id)}/purge`, { confirm: typed });
        toast(`Purged: ${summary(result.purged)}`, { kind: "ok" });
        loadGuilds();
      },
    });
  }

  // -- reflections and the audit trail ----------------------------------------------------------------------
  const REFLECTION_KEYS = ["id", "started_at", "finished_at", "channel_key", "facts", "status"];

  function factsCell(facts) {
    if (!Array.isArray(facts)) return el("td", { class: "num", text: asText(facts) });
    return el("td", {}, el("details", {}, el("summary", { text: `${facts.length}` }), el("ul", {}, facts.map((f) => el("li", { text: asText(f) })))));
  }

  async function loadReflections() {
    const box = document.getElementById("reflections-table");
    try {
      const data = await api("GET", "/api/reflections?limit=100");
      if (!data.items.length) return box.replaceChildren(empty("No reflections yet."));
      const rows = data.items.map((r) => {
        const extra = Object.entries(r).filter(([k, v]) => !REFLECTION_KEYS.includes(k) && v !== null && v !== "" && !(Array.isArray(v) && !v.length));
        return el(
          "tr",
          {},
          el("td", {}, timeCell(r.started_at)),
          el("td", {}, timeCell(r.finished_at)),
          el("td", { class: "mono", text: r.channel_key }),
          factsCell(r.facts),
          el("td", {}, el("span", { class: `status status-${String(r.status).toLowerCase()}`, text: r.status })),
          el("td", { class: "small" }, extra.map(([k, v]) => el("div", { text: `${k}: ${asText(v)}` }))),
        );
      });
      box.replaceChildren(table(["Started", "Finished", "Channel", "Facts", "Status", "Details"], rows, "Reflections"));
    } catch (err) {
      showError(err);
    }
  }

  async function loadAudit() {
    const box = document.getElementById("audit-table");
    try {
      const data = await api("GET", "/api/audit?limit=200");
      if (!data.items.length) return box.replaceChildren(empty("No changes yet."));
      const rows = data.items.map((a) => el("tr", {}, el("td", {}, timeCell(a.at)), el("td", { text: a.who }), el("td", { text: a.action }), el("td", { class: "mono", text: asText(a.target) }), el("td", { class: "mono small", text: asText(a.detail) })));
      box.replaceChildren(table(["When", "Who", "Action", "Target", "Detail"], rows, "Audit trail"));
    } catch (err) {
      showError(err);
    }
  }

  // -- settings: the recall knobs of memories and of messages, validated by the server ---------------------------
  const GROUPS = { recall: "Memory recall", messages: "Message history recall" };
  let current = {}; // {recall: {...}, messages: {...}} as last read from the server
  let settingsHelp = {}; // {knob: one line}, served with the settings (memory/knobs.py field descriptions)

  /** A setting as the form shows it: a number rounded to at most 4 significant digits (0.00770163533955494 shows
   * as 0.0077: the shorter of 4 significant digits and 4 decimals, never rounded to 0). */
  function shownSetting(value) {
    if (typeof value !== "number" || Number.isInteger(value)) return asText(value);
    const precise = String(Number(value.toPrecision(4)));
    const fixed = String(Number(value.toFixed(4)));
    return Number(fixed) !== 0 && fixed.length < precise.length ? fixed : precise;
  }

  function settingField(path, value) {
    const id = `knob-${path.replace(/\./g, "-")}`;
    const knob = path.split(".").slice(1).join("."); // "recall.weights.semantic" is explained under "weights.semantic"
    const help = settingsHelp[knob] ? el("span", { class: "help", id: `${id}-help`, text: settingsHelp[knob] }) : null;
    if (value !== null && typeof value === "object") {
      return el("fieldset", {}, el("legend", { text: knob }), help, Object.entries(value).map(([k, v]) => settingField(`${path}.${k}`, v)));
    }
    const shown = shownSetting(value);
    const attrs = { id, name: path, "aria-describedby": help ? `${id}-help` : null };
    const input =
      typeof value === "boolean"
        ? el("input", { ...attrs, type: "checkbox", checked: value })
        : el("input", { ...attrs, value: shown, inputmode: typeof value === "number" ? "decimal" : null, title: shown !== asText(value) ? `exactly ${value}` : null });
    // the help sits beside the label, not in it: the field's name stays short, the help is its description
    return el("div", { class: "knob" }, el("label", { for: id }, path.split(".").pop().replace(/_/g, " "), input), help);
  }

  function fieldInput(path) {
    return document.querySelector(`#settings-fields [name="${CSS.escape(path)}"]`);
  }

  /** What the form says differs from what the server holds, shaped like the settings ({knob: value}). */
  function changedSettings(shape, prefix) {
    const out = {};
    for (const [k, old] of Object.entries(shape)) {
      const path = `${prefix}.${k}`;
      if (old !== null && typeof old === "object") {
        const inner = changedSettings(old, path);
        if (Object.keys(inner).length) out[k] = inner;
        continue;
      }
      const input = fieldInput(path);
      // compared with what was shown, not with the stored value: an untouched rounded number is not a change
      if (typeof old !== "boolean" && input.value === shownSetting(old)) continue;
      let value = input.value; // a value that is not a number goes as typed: the server says what is wrong
      if (typeof old === "boolean") value = input.checked;
      else if (typeof old === "number" && value.trim() !== "" && !Number.isNaN(Number(value))) value = Number(value);
      if (value !== old) out[k] = value;
    }
    return out;
  }

  function markInvalid(err, groups) {
    for (const item of Array.isArray(err.detail) ? err.detail : []) {
      const field = window.Dash.problemField(item);
      for (const group of groups) {
        const input = fieldInput(field.startsWith(`${group}.`) ? field : `${group}.${field}`);
        if (input) input.setAttribute("aria-invalid", "true");
      }
    }
  }

  async function openSettings() {
    clearError(document.getElementById("settings-errors"));
    try {
      current = await api("GET", "/api/settings");
      settingsHelp = current.help || {};
      const parts = Object.entries(GROUPS)
        .filter(([group]) => current[group])
        .map(([group, title]) => el("fieldset", { class: "group" }, el("legend", { text: title }), Object.entries(current[group]).map(([k, v]) => settingField(`${group}.${k}`, v))));
      document.getElementById("settings-fields").replaceChildren(...parts);
      document.getElementById("settings-dialog").showModal();
    } catch (err) {
      showError(err);
    }
  }

  async function saveSettings(event) {
    event.preventDefault();
    const errors = document.getElementById("settings-errors");
    const dialog = document.getElementById("settings-dialog");
    document.querySelectorAll("#settings-fields [aria-invalid]").forEach((i) => i.removeAttribute("aria-invalid"));
    const change = {};
    for (const group of Object.keys(GROUPS)) {
      const part = current[group] ? changedSettings(current[group], group) : {};
      if (Object.keys(part).length) change[group] = part;
    }
    if (!Object.keys(change).length) return dialog.close();
    try {
      current = await api("PUT", "/api/settings", change);
      clearError(errors);
      dialog.close();
      toast("Settings saved and applied", { kind: "ok" });
    } catch (err) {
      errors.replaceChildren(...window.Dash.errorLines(err).map((line) => el("li", { text: line })));
      errors.hidden = false;
      markInvalid(err, Object.keys(change));
    }
  }

  /** From elsewhere (the graph): the People view with this person's profile open. */
  window.Dash.showPerson = function (id) {
    window.Dash.showView("people");
    openPerson(id);
  };

  window.Dash.inits.push(function initViews() {
    initSnapshot();
    Object.assign(loaders, { people: loadPeople, guilds: loadGuilds, reflections: loadReflections, audit: loadAudit });
    document.getElementById("open-settings").addEventListener("click", openSettings);
    document.getElementById("settings-form").addEventListener("submit", saveSettings);
    document.getElementById("settings-cancel").addEventListener("click", () => document.getElementById("settings-dialog").close());
  });
})();
