/* The graph view: people and the entities they mention, drawn as SVG with a small hand-written force
 * layout (Fruchterman-Reingold, ~300 steps, computed once: deterministic, no library). People are blue
 * circles, entities orange diamonds; every node is labelled, draggable with the pointer and movable with
 * the arrow keys once focused. Labels are SVG text nodes (textContent), never markup.
 */
"use strict";

(function () {
  const { api, showError, empty, counted, loaders } = window.Dash;
  const SVG = "http://www.w3.org/2000/svg";
  const MIN_HEIGHT = 420;
  const MAX_NODES = 300;

  function svg(tag, attrs = {}) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    return node;
  }

  /** Positions for every node: repulsion between all pairs, springs along edges, a pull to the centre. */
  function layout(nodes, edges, width, height, steps = 300) {
    const n = nodes.length;
    const k = Math.min(Math.sqrt((width * height) / Math.max(n, 1)) * 0.6, 140);
    const pos = nodes.map((_, i) => {
      const r = 12 * Math.sqrt(i + 1);
      const a = i * 2.399963; // the golden angle spreads the start evenly and the same way every time
      return { x: width / 2 + r * Math.cos(a), y: height / 2 + r * Math.sin(a) };
    });
    const index = new Map(nodes.map((node, i) => [node.id, i]));
    const links = edges.map((e) => [index.get(e.source), index.get(e.target)]).filter(([s, t]) => s !== undefined && t !== undefined && s !== t);
    for (let step = 0; step < steps; step++) {
      const temperature = (width / 8) * (1 - step / steps) + 1;
      const dx = new Float64Array(n);
      const dy = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        for (let j = i + 1; j < n; j++) {
          const x = pos[i].x - pos[j].x;
          const y = pos[i].y - pos[j].y;
          const d = Math.max(Math.hypot(x, y), 0.01);
          if (d > 3 * k) continue; // far nodes stop pushing: separate groups stay near each other
          const f = (k * k) / d / d;
          dx[i] += x * f;
          dy[i] += y * f;
          dx[j] -= x * f;
          dy[j] -= y * f;
        }
      }
      for (const [s, t] of links) {
        const x = pos[s].x - pos[t].x;
        const y = pos[s].y - pos[t].y;
        const f = Math.max(Math.hypot(x, y), 0.01) / k;
        dx[s] -= x * f;
        dy[s] -= y * f;
        dx[t] += x * f;
        dy[t] += y * f;
      }
      for (let i = 0; i < n; i++) {
        dx[i] += (width / 2 - pos[i].x) * 0.1;
        dy[i] += (height / 2 - pos[i].y) * 0.1;
        const d = Math.max(Math.hypot(dx[i], dy[i]), 0.01);
        const move = Math.min(d, temperature);
        pos[i].x += (dx[i] / d) * move;
        pos[i].y += (dy[i] / d) * move;
      }
    }
    return fit(pos, width, height, 60);
  }

  /** Scale and centre the layout into the box with a margin for the labels; each axis is stretched on its own
   * (at most twice the other, at most 3x) so a wide box is used without distorting the picture much. */
  function fit(pos, width, height, margin) {
    if (!pos.length) return pos;
    const xs = pos.map((p) => p.x);
    const ys = pos.map((p) => p.y);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    let sx = Math.min((width - 2 * margin) / Math.max(x1 - x0, 1), 3);
    let sy = Math.min((height - 2 * margin) / Math.max(y1 - y0, 1), 3);
    sx = Math.min(sx, 2 * sy);
    sy = Math.min(sy, 2 * sx);
    const ox = (width - (x1 - x0) * sx) / 2;
    const oy = (height - (y1 - y0) * sy) / 2;
    return pos.map((p) => ({ x: ox + (p.x - x0) * sx, y: oy + (p.y - y0) * sy }));
  }

  function nodeShape(kind) {
    if (kind === "person") return svg("circle", { r: 13, class: "shape" });
    return svg("polygon", { points: "0,-14 14,0 0,14 -14,0", class: "shape" });
  }

  function draw(box, data) {
    const width = Math.max(box.clientWidth - 2, 600);
    const height = Math.max(MIN_HEIGHT, window.innerHeight - box.getBoundingClientRect().top - 24);
    const nodes = data.nodes.slice(0, MAX_NODES);
    const ids = new Set(nodes.map((n) => n.id));
    const edges = data.edges.filter((e) => ids.has(e.source) && ids.has(e.target));
    const pos = layout(nodes, edges, width, height);
    const at = new Map(nodes.map((n, i) => [n.id, pos[i]]));
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", height, role: "group", "aria-label": `Graph of people and entities, ${counted(nodes.length, "node")}`, class: "graph" });
    const edgeLayer = svg("g", { class: "edges" });
    const nodeLayer = svg("g", { class: "nodes" });
    root.append(edgeLayer, nodeLayer);
    const drawn = edges.map((e) => drawEdge(edgeLayer, e));
    const redraw = () => drawn.forEach((d) => d.place(at.get(d.edge.source), at.get(d.edge.target)));
    for (const node of nodes) drawNode(nodeLayer, root, node, at.get(node.id), redraw);
    redraw();
    const parts = [root];
    if (data.nodes.length > MAX_NODES) parts.push(empty(`Showing the first ${MAX_NODES} of ${data.nodes.length} nodes.`));
    box.replaceChildren(...parts);
  }

  function drawEdge(layer, edge) {
    const line = svg("line", { class: "edge" });
    const label = svg("text", { class: "edge-label", "text-anchor": "middle" });
    label.textContent = edge.label || "";
    const title = svg("title");
    title.textContent = edge.label || "";
    line.append(title);
    layer.append(line, label);
    return {
      edge,
      place(a, b) {
        line.setAttribute("x1", a.x);
        line.setAttribute("y1", a.y);
        line.setAttribute("x2", b.x);
        line.setAttribute("y2", b.y);
        label.setAttribute("x", (a.x + b.x) / 2);
        label.setAttribute("y", (a.y + b.y) / 2 - 3);
      },
    };
  }

  function drawNode(layer, root, node, p, redraw) {
    const kind = node.kind === "person" ? "person" : "entity";
    const g = svg("g", { class: `node node-${kind}`, tabindex: 0, role: "button", "aria-label": `${kind} ${node.label}`, "data-id": node.id });
    const label = svg("text", { class: "node-label", y: 28, "text-anchor": "middle" });
    label.textContent = node.label;
    const title = svg("title");
    title.textContent = `${node.label} (${node.kind})`;
    g.append(title, nodeShape(kind), label);
    const place = () => g.setAttribute("transform", `translate(${p.x} ${p.y})`);
    place();
    const move = (x, y) => {
      p.x = x;
      p.y = y;
      place();
      redraw();
    };
    g.addEventListener("pointerdown", (event) => {
      g.setPointerCapture(event.pointerId);
      g.classList.add("dragging");
    });
    g.addEventListener("pointermove", (event) => {
      if (!g.hasPointerCapture(event.pointerId)) return;
      const pt = new DOMPoint(event.clientX, event.clientY).matrixTransform(root.getScreenCTM().inverse());
      move(pt.x, pt.y);
    });
    g.addEventListener("pointerup", (event) => {
      g.releasePointerCapture(event.pointerId);
      g.classList.remove("dragging");
    });
    const profile = () => node.person_id && window.Dash.showPerson(node.person_id);
    g.addEventListener("dblclick", profile);
    g.addEventListener("keydown", (event) => {
      if (event.key === "Enter") return profile();
      const step = { ArrowLeft: [-10, 0], ArrowRight: [10, 0], ArrowUp: [0, -10], ArrowDown: [0, 10] }[event.key];
      if (!step) return;
      event.preventDefault();
      move(p.x + step[0], p.y + step[1]);
    });
    layer.append(g);
  }

  let lastGraph = null;

  async function loadGraph() {
    const box = document.getElementById("graph-box");
    try {
      lastGraph = await api("GET", "/api/graph");
      if (!lastGraph.nodes.length) return box.replaceChildren(empty("No people or entities yet."));
      draw(box, lastGraph);
    } catch (err) {
      showError(err);
    }
  }

  loaders.graph = loadGraph;
  window.Dash.inits.push(() => {
    document.getElementById("graph-relayout").addEventListener("click", () => lastGraph && lastGraph.nodes.length && draw(document.getElementById("graph-box"), lastGraph));
  });
})();
