/* The memories of the dashboard page: the table (type badge, importance tier, expandable content), its
 * filters and paging, the new-entry form, inline edit (click a cell or Edit -> inputs -> Save -> PUT of what
 * changed), delete with an undo window, and search. Data reaches the page as text only (Dash.el).
 */
"use strict";

(function () {
  const { TYPES, KINDS, el, table, empty, api, showError, clearError, toast, timeCell, splitTags, tierOf, fillSelect, formValues, query, loaders, inits } = window.Dash;
  const CONTENT_PREVIEW = 140;
  // The undo window: ?undo_ms= (tests use a short one), else the page's data-undo-ms, else 5 s.
  const UNDO_MS = Number(new URLSearchParams(location.search).get("undo_ms")) || Number(document.body.dataset.undoMs) || 5000;

  // -- memory rows: badges, expandable content, inline edit, delete with undo --------------------------
  const pendingDeletes = new Map(); // id -> {timer, send}: rows hidden, DELETE not sent yet

  function typeBadge(m) {
    return el("span", { class: `badge type-${m.type}`, title: m.kind ? `kind: ${m.kind}` : null, text: m.type }, m.kind ? el("small", { text: m.kind }) : null);
  }

  function tierBadge(m) {
    const tier = tierOf(m);
    return el("span", { class: `tier tier-${tier.toLowerCase()}`, title: `importance ${m.importance}`, text: tier }, el("small", { text: String(m.importance) }));
  }

  function contentCell(m) {
    const text = String(m.content || "");
    const body = el("div", { class: "content", text });
    if (text.length <= CONTENT_PREVIEW && !text.includes("\n")) return [body];
    body.classList.add("clamped");
    const toggle = el("button", { type: "button", class: "link expand", "aria-expanded": "false", text: "More" });
    toggle.addEventListener("click", (event) => {
      event.stopPropagation();
      const open = body.classList.toggle("clamped") === false;
      toggle.setAttribute("aria-expanded", String(open));
      toggle.textContent = open ? "Less" : "More";
    });
    return [body, toggle];
  }

  function scopeCell(m) {
    return [el("span", { class: `scope scope-${m.scope}`, text: m.scope }), m.scope_id ? el("small", { class: "muted block", text: m.scope_id }) : null, m.guild_id && m.guild_id !== m.scope_id ? el("small", { class: "muted block", text: `guild ${m.guild_id}` }) : null];
  }

  const EDITABLE = { type: 0, importance: 1, subject: 2, content: 3, tags: 4 };

  function memoryRow(m, opts) {
    const tags = (m.tags || []).map((t) => el("span", { class: "chip", text: t }));
    if (opts.compact) {
      return el("tr", { class: "memory-row", dataset: { id: m.id } }, el("td", { class: "c-type" }, typeBadge(m)), el("td", { class: "c-importance" }, tierBadge(m)), el("td", { class: "c-content" }, contentCell(m)), el("td", { class: "c-tags" }, tags));
    }
    const cells = [
      el("td", { class: "c-type", dataset: { field: "type" } }, typeBadge(m)),
      el("td", { class: "c-importance", dataset: { field: "importance" } }, tierBadge(m)),
      el("td", { class: "c-subject", dataset: { field: "subject" }, text: m.subject || "" }),
      el("td", { class: "c-content", dataset: { field: "content" } }, contentCell(m)),
      el("td", { class: "c-tags", dataset: { field: "tags" } }, tags),
      el("td", { class: "c-scope" }, scopeCell(m)),
      el("td", { class: "c-date" }, timeCell(m.created_at)),
    ];
    if (opts.score) cells.push(el("td", { class: "c-score", text: m.score === undefined ? "" : Number(m.score).toFixed(3) }));
    const row = el("tr", { class: "memory-row", dataset: { id: m.id } }, cells);
    if (opts.readonly) return row;
    row.append(
      el(
        "td",
        { class: "c-actions" },
        el("button", { type: "button", class: "edit", "aria-label": `Edit memory: ${shorten(m.content, 50)}`, text: "Edit", onclick: () => startEdit(row, m, opts, "content") }),
        el("button", { type: "button", class: "delete danger", "aria-label": `Delete memory: ${shorten(m.content, 50)}`, text: "Delete", onclick: () => scheduleDelete(m, opts) }),
      ),
    );
    row.addEventListener("click", (event) => {
      const cell = event.target.closest("td[data-field]");
      if (cell && !row.classList.contains("editing") && !event.target.closest("button")) startEdit(row, m, opts, cell.dataset.field);
    });
    return row;
  }

  function editInputs(m) {
    const type = el("select", { name: "type", "aria-label": "Type" });
    fillSelect(type, TYPES.includes(m.type) ? TYPES : [m.type, ...TYPES]);
    type.value = m.type;
    const kind = el("select", { name: "kind", "aria-label": "Kind" });
    fillSelect(kind, KINDS.includes(m.kind) || !m.kind ? KINDS : [m.kind, ...KINDS]);
    kind.value = m.kind || "other";
    return {
      type,
      kind,
      importance: el("input", { name: "importance", type: "number", min: 1, max: 10, step: 1, value: m.importance, "aria-label": "Importance" }),
      subject: el("input", { name: "subject", value: m.subject || "", "aria-label": "Subject" }),
      content: el("textarea", { name: "content", rows: 3, "aria-label": "Content", text: m.content }),
      tags: el("input", { name: "tags", value: (m.tags || []).join(", "), "aria-label": "Tags (comma separated)" }),
    };
  }

  /** Only what changed goes into the PUT, so a save never rewrites fields nobody touched. */
  function editChanges(m, inputs) {
    const changes = {};
    if (inputs.type.value !== m.type) changes.type = inputs.type.value;
    if (inputs.kind.value !== (m.kind || "other")) changes.kind = inputs.kind.value;
    if (inputs.importance.value !== "" && Number(inputs.importance.value) !== Number(m.importance)) changes.importance = Number(inputs.importance.value);
    if (inputs.subject.value !== (m.subject || "")) changes.subject = inputs.subject.value;
    if (inputs.content.value !== m.content) changes.content = inputs.content.value;
    const tags = splitTags(inputs.tags.value);
    if (tags.join("\u0000") !== (m.tags || []).join("\u0000")) changes.tags = tags;
    return changes;
  }

  function startEdit(row, m, opts, focusField) {
    if (row.classList.contains("editing")) return;
    row.classList.add("editing");
    const inputs = editInputs(m);
    const error = el("p", { class: "form-error", role: "alert", hidden: true });
    for (const [field, index] of Object.entries(EDITABLE)) row.cells[index].replaceChildren(inputs[field]);
    row.cells[EDITABLE.type].append(inputs.kind);
    row.cells[EDITABLE.content].append(error);
    const cancel = () => row.replaceWith(memoryRow(m, opts));
    const save = async () => {
      const changes = editChanges(m, inputs);
      if (Object.keys(changes).length === 0) return cancel();
      try {
        const updated = await api("PUT", `/api/memory/${encodeURIComponent(m.id)}`, changes);
        row.replaceWith(memoryRow(updated, opts));
        toast("Memory saved", { kind: "ok" });
      } catch (err) {
        showError(err, error);
      }
    };
    const actions = row.querySelector(".c-actions");
    actions.replaceChildren(
      el("button", { type: "button", class: "primary save", text: "Save", onclick: save }),
      el("button", { type: "button", class: "cancel", text: "Cancel", onclick: cancel }),
    );
    row.addEventListener("keydown", (event) => {
      if (event.key === "Escape") cancel();
      else if (event.key === "Enter" && (event.target.tagName !== "TEXTAREA" || event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        save();
      }
    });
    (inputs[focusField] || inputs.content).focus();
  }

  /** Every row showing memory ``id`` (the list and search results may both hold one; a reload makes new ones). */
  function rowsOf(id) {
    return document.querySelectorAll(`tr.memory-row[data-id="${CSS.escape(id)}"]`);
  }

  function showRows(id, shown) {
    rowsOf(id).forEach((r) => (r.hidden = !shown));
  }

  /** The rows go at once; the DELETE is sent only when the undo window ends (nothing waits server-side). */
  function scheduleDelete(m, opts) {
    showRows(m.id, false);
    const send = async () => {
      pendingDeletes.delete(m.id);
      try {
        await api("DELETE", `/api/memory/${encodeURIComponent(m.id)}`);
        rowsOf(m.id).forEach((r) => r.remove());
        if (opts.onDeleted) opts.onDeleted(m);
      } catch (err) {
        showRows(m.id, true);
        showError(err);
      }
    };
    const note = toast(`Deleted: ${shorten(m.content, 60)}`, {
      ms: UNDO_MS,
      action: "Undo",
      kind: "undo",
      onAction: () => {
        const pending = pendingDeletes.get(m.id);
        if (!pending) return; // the window had just ended: the DELETE is on its way
        clearTimeout(pending.timer);
        pendingDeletes.delete(m.id);
        showRows(m.id, true);
        toast("Restored", { kind: "ok", ms: 2000 });
      },
    });
    const timer = setTimeout(() => (note.close(), send()), UNDO_MS);
    pendingDeletes.set(m.id, { timer, send });
  }

  /** Send every delete still in its undo window now (before logging out, while the session is valid). */
  function flushDeletes() {
    const sends = [...pendingDeletes.values()].map((pending) => (clearTimeout(pending.timer), pending.send()));
    return Promise.all(sends);
  }

  // Leaving the page ends every undo window: the deletes the user asked for still happen.
  window.addEventListener("pagehide", () => {
    for (const [id, pending] of pendingDeletes) {
      clearTimeout(pending.timer);
      fetch(`/api/memory/${encodeURIComponent(id)}`, { method: "DELETE", credentials: "same-origin", keepalive: true, headers: { "X-CSRF-Token": window.Dash.csrf() } });
    }
    pendingDeletes.clear();
  });

  function shorten(text, n) {
    const s = String(text || "").replace(/\s+/g, " ");
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  /** A table of memories; opts: {score, readonly, compact (type, tier, content, tags only), onDeleted}. Rows waiting to be deleted stay hidden. */
  function memoryTable(items, opts = {}) {
    if (!items.length) return empty(opts.emptyText || "No memories.");
    const headers = opts.compact ? ["Type", "Importance", "Content", "Tags"] : ["Type", "Importance", "Subject", "Content", "Tags", "Scope", "Date"];
    if (opts.score) headers.push("Score");
    if (!opts.readonly && !opts.compact) headers.push("Actions");
    const rows = items.map((m) => {
      const row = memoryRow(m, opts);
      row.hidden = pendingDeletes.has(m.id);
      return row;
    });
    const t = table(headers, rows, opts.caption || "Memories");
    t.classList.add("memories");
    return t;
  }

  // -- the memories view: filters, paging, new entry --------------------------------------------------
  const listState = { offset: 0, limit: 50, filters: {}, total: 0 };

  async function loadMemories() {
    const box = document.getElementById("memories-table");
    try {
      const data = await api("GET", "/api/memory" + query({ ...listState.filters, limit: listState.limit, offset: listState.offset }));
      listState.total = data.total;
      box.replaceChildren(memoryTable(data.items, { caption: "Memories", emptyText: "No memories match these filters." }));
      const first = data.total ? listState.offset + 1 : 0;
      document.getElementById("page-info").textContent = `${first}–${listState.offset + data.items.length} of ${data.total}`;
      document.getElementById("prev-page").disabled = listState.offset === 0;
      document.getElementById("next-page").disabled = listState.offset + listState.limit >= data.total;
    } catch (err) {
      showError(err);
    }
  }

  function initMemories() {
    const filters = document.getElementById("filters");
    filters.addEventListener("submit", (event) => {
      event.preventDefault();
      listState.filters = formValues(filters);
      listState.offset = 0;
      loadMemories();
    });
    filters.addEventListener("reset", () => setTimeout(() => filters.requestSubmit()));
    document.getElementById("prev-page").addEventListener("click", () => {
      listState.offset = Math.max(0, listState.offset - listState.limit);
      loadMemories();
    });
    document.getElementById("next-page").addEventListener("click", () => {
      listState.offset += listState.limit;
      loadMemories();
    });
    document.getElementById("page-size").addEventListener("change", (event) => {
      listState.limit = Number(event.target.value);
      listState.offset = 0;
      loadMemories();
    });
    initNewForm();
  }

  function initNewForm() {
    const form = document.getElementById("new-form");
    const toggle = document.getElementById("new-toggle");
    const show = (open) => {
      form.hidden = !open;
      toggle.setAttribute("aria-expanded", String(open));
      if (open) form.elements.content.focus();
    };
    toggle.addEventListener("click", () => show(form.hidden));
    document.getElementById("new-cancel").addEventListener("click", () => show(false));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const values = formValues(form);
      const body = { ...values, tags: splitTags(values.tags) };
      if (values.importance !== undefined) body.importance = Number(values.importance);
      const error = form.querySelector(".form-error");
      try {
        await api("POST", "/api/memory", body);
        clearError(error);
        form.reset();
        show(false);
        toast("Memory saved", { kind: "ok" });
        listState.offset = 0;
        loadMemories();
      } catch (err) {
        showError(err, error);
      }
    });
  }

  // -- search -------------------------------------------------------------------------------------------
  function initSearch() {
    const form = document.getElementById("search-form");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const box = document.getElementById("search-results");
      box.replaceChildren(el("p", { class: "muted", text: "Searching…" }));
      try {
        const data = await api("GET", "/api/memory/search" + query(formValues(form)));
        box.replaceChildren(el("p", { class: "muted", text: `${data.items.length} found` }), memoryTable(data.items, { score: true, caption: "Search results", emptyText: "Nothing matched." }));
      } catch (err) {
        box.replaceChildren();
        showError(err);
      }
    });
  }

  loaders.memories = loadMemories;
  inits.push(initMemories, initSearch);
  Object.assign(window.Dash, { memoryTable, flushDeletes });
})();
