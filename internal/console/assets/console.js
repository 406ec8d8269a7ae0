// The dfs console: draws the cluster from the REST API, one page per hash
// route (#/overview, #/nodes, #/files, #/operations), refreshing the live
// pages every few seconds. A file search is in the address
// (#/files?q=…&status=…), and two deep links act on arrival, for links from
// alerts and runbooks: #/nodes?drain=<node> opens that node's drain
// pre-flight (a dry run, which changes nothing), and #/files/<id>?verify=1
// verifies the file's copies. Every request goes to this coordinator's own
// /api with the browser's credentials; nothing is loaded from elsewhere.
'use strict';

(() => {
  const REFRESH_MS = 3000;
  const RING_SPAN = 2 ** 63; // positions are in [0, 2^63)

  // ---- the API --------------------------------------------------------

  class APIError extends Error {
    constructor(status, body) {
      super((body && body.message) || 'HTTP ' + status);
      this.status = status;
      this.code = body && body.error;
    }
  }

  // call asks the API; the console lives at <base>/console/, the API at
  // <base>/api, so relative paths keep working behind a path prefix.
  async function call(method, path) {
    const res = await fetch('../api' + path, {
      method, credentials: 'same-origin', headers: { Accept: 'application/json' },
    });
    const text = await res.text();
    let body = null;
    if (text) {
      try { body = JSON.parse(text); } catch (e) { body = null; }
    }
    if (!res.ok) throw new APIError(res.status, body);
    return { status: res.status, body };
  }
  const get = async (path) => (await call('GET', path)).body;

  // ---- building the DOM -----------------------------------------------

  // h builds an element: h('td', {class: 'num'}, 'text', child, …). Text
  // goes in as text nodes, never as markup, so names from users are safe.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      // data-* attributes carry values, false included; others are flags.
      else if (k.startsWith('data-')) el.setAttribute(k, String(v));
      else if (v !== false) el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const svg = (tag, attrs) => {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  };
  // fill replaces el's children, leaving out the absent ones (null and false
  // stand for "nothing here" throughout).
  const fill = (el, ...kids) => el.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
  const badge = (s) => h('span', { class: 'badge ' + s }, s);
  const panel = (title, ...body) => h('section', { class: 'panel' }, title ? h('h2', {}, title) : null, ...body);
  const stat = (id, value, label) => h('div', { class: 'panel stat' },
    h('div', { class: 'value', id }, value), h('div', { class: 'label' }, label));
  const errorLine = (e) => h('p', { class: 'error' }, String(e.message || e));

  // bar is a progress bar of done out of total; data attributes carry the
  // numbers for whoever reads the page without eyes.
  function bar(done, total, cls) {
    // An ended operation that had nothing to do is complete, not empty.
    const pct = total > 0 ? Math.min(100, (100 * done) / total) : cls === 'ok' ? 100 : 0;
    const fill = h('div', {});
    fill.style.width = pct.toFixed(1) + '%';
    return h('div', { class: 'bar ' + (cls || ''), 'data-done': done, 'data-total': total, title: pct.toFixed(0) + '%' }, fill);
  }

  function table(headers, rows) {
    return h('table', {},
      h('thead', {}, h('tr', {}, headers.map((x) => h('th', { class: x.endsWith('#') ? 'num' : '' }, x.replace(/#$/, ''))))),
      h('tbody', {}, rows));
  }

  // ---- formatting -----------------------------------------------------

  function bytes(n) {
    if (n === undefined || n === null) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    let v = Number(n);
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
  }
  function seconds(s) {
    if (s === undefined || s === null) return '—';
    s = Math.round(s);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  }
  function when(t) {
    if (!t) return '—';
    const d = new Date(t);
    const ago = (Date.now() - d.getTime()) / 1000;
    return h('span', { title: d.toISOString() }, ago >= 0 ? seconds(ago) + ' ago' : d.toLocaleString());
  }
  const num = (v) => (v === undefined || v === null ? '—' : Number(v).toLocaleString('en-US'));

  // ---- the header's health badge --------------------------------------

  async function refreshHealth() {
    const el = document.getElementById('health-badge');
    try {
      const { body } = await call('GET', '/health').catch((e) => {
        // DOWN is a 503 that still carries the report.
        if (e.status === 503) return { body: { status: 'DOWN' } };
        throw e;
      });
      el.className = 'badge ' + body.status;
      el.textContent = 'cluster ' + body.status;
    } catch (e) {
      el.className = 'badge DOWN';
      el.textContent = e.status === 401 ? 'not signed in' : 'coordinator unreachable';
    }
  }

  // ---- overview -------------------------------------------------------

  async function overview(view) {
    const [health, dur, operations] = await Promise.all([
      call('GET', '/health').then((r) => r.body, (e) => { if (e.status === 503) return { status: 'DOWN', nodes: {} }; throw e; }),
      get('/cluster/durability'),
      get('/cluster/operations'),
    ]);
    const n = health.nodes || {};
    const copies = Object.keys(dur.filesByCopies).map(Number).sort((a, b) => a - b);
    const stack = h('div', { class: 'stack', id: 'copies-bar' });
    for (const c of copies) {
      const count = dur.filesByCopies[String(c)];
      if (!count || !dur.files) continue;
      const seg = h('div', { class: 'c' + Math.min(c, 3), title: count + ' files with ' + c + ' healthy copies' });
      seg.style.width = ((100 * count) / dur.files).toFixed(2) + '%';
      stack.append(seg);
    }
    const legend = h('div', { class: 'legend' }, copies.map((c) =>
      h('span', { 'data-copies': c }, h('i', { class: 'c' + Math.min(c, 3) }),
        c + (c === 1 ? ' copy: ' : ' copies: '), h('b', {}, num(dur.filesByCopies[String(c)])))));
    fill(view,
      h('h1', {}, 'Cluster'),
      h('div', { class: 'grid' },
        h('div', { class: 'panel stat' }, h('div', { class: 'value' }, h('span', { id: 'health-status', class: 'badge ' + health.status }, health.status)),
          h('div', { class: 'label' }, 'health', (health.reasons || []).map((r) => h('div', { class: 'reason' }, r)))),
        stat('headroom', num(dur.failureHeadroom), 'node failures survivable now without losing a file'),
        stat('healthy-nodes', num(dur.healthyNodes) + ' / ' + num(n.total), 'healthy nodes (replication factor ' + dur.replicationFactor + ')'),
        stat('bytes-at-risk', bytes(dur.bytesAtRisk), 'in files below the replication factor'),
        stat('running-ops', num(operations.running.length), 'operations running')),
      panel('Files by healthy copies (' + num(dur.files) + ' files)', stack, legend),
      panel('If one node failed now',
        table(['Node', 'Status', 'Files left with one copy#', 'Files left with no copy#'],
          dur.nodes.map((r) => h('tr', { 'data-node': r.nodeId, 'data-status': r.status },
            h('td', {}, r.nodeId), h('td', {}, badge(r.status)),
            h('td', { class: 'num' }, num(r.filesLeftWithOneCopy)),
            h('td', { class: 'num' + (r.filesLeftWithNoCopy ? ' error' : '') }, num(r.filesLeftWithNoCopy)))))));
  }

  // ---- nodes ----------------------------------------------------------

  const palette = ['#2f6fdf', '#1f9d55', '#d98a00', '#8e44ad', '#d23c3c', '#16a2b8', '#c0549b', '#6b8e23', '#ff7f50', '#5f6b7a'];

  // ringDrawing draws each node's arcs of the ring: a point owns the arc
  // from the point before it to itself, so runs of one node's points merge
  // into one arc.
  function ringDrawing(ring) {
    const ids = ring.nodes.map((x) => x.nodeId).sort();
    const color = (id) => palette[ids.indexOf(id) % palette.length];
    const drawing = svg('svg', { viewBox: '-130 -130 260 260', id: 'ring', role: 'img' });
    const pts = ring.points || [];
    if (pts.length === 0) {
      drawing.append(svg('circle', { r: 100, fill: 'none', stroke: '#e3e6eb', 'stroke-width': 24 }));
      return { drawing, color };
    }
    const angle = (pos) => (2 * Math.PI * pos) / RING_SPAN - Math.PI / 2;
    const at = (a, r) => [(r * Math.cos(a)).toFixed(2), (r * Math.sin(a)).toFixed(2)];
    const arcs = [];
    const last = pts[pts.length - 1];
    let from = last.position - RING_SPAN; // the first point's arc wraps past 0
    for (let i = 0; i < pts.length; i++) {
      const p = pts[i];
      const prev = arcs[arcs.length - 1];
      if (prev && prev.node === p.nodeId) prev.to = p.position;
      else arcs.push({ node: p.nodeId, from, to: p.position });
      from = p.position;
    }
    for (const a of arcs) {
      const a0 = angle(a.from);
      const a1 = angle(a.to);
      if (a1 - a0 >= 2 * Math.PI - 1e-9) {
        // One node owns the whole ring: an arc from a point to itself is
        // drawn as nothing, a circle is not.
        drawing.append(svg('circle', { r: 100, fill: 'none', stroke: color(a.node), 'stroke-width': 24, 'data-node': a.node }));
        continue;
      }
      const large = a1 - a0 > Math.PI ? 1 : 0;
      const [x0, y0] = at(a0, 100);
      const [x1, y1] = at(a1, 100);
      const path = svg('path', {
        d: `M ${x0} ${y0} A 100 100 0 ${large} 1 ${x1} ${y1}`,
        fill: 'none', stroke: color(a.node), 'stroke-width': 24, 'data-node': a.node,
      });
      drawing.append(path);
    }
    // Inside, each node's whole share as one arc, for the proportions the
    // interleaved arcs hide.
    let start = 0;
    for (const x of [...ring.nodes].sort((a, b) => (a.nodeId < b.nodeId ? -1 : 1))) {
      const frac = x.keyspaceSharePercent / 100;
      if (frac <= 0) continue;
      const a0 = 2 * Math.PI * start - Math.PI / 2;
      const a1 = 2 * Math.PI * Math.min(1, start + frac) - Math.PI / 2 - (frac >= 1 ? 1e-4 : 0);
      const [x0, y0] = at(a0, 72);
      const [x1, y1] = at(a1, 72);
      drawing.append(svg('path', {
        d: `M ${x0} ${y0} A 72 72 0 ${a1 - a0 > Math.PI ? 1 : 0} 1 ${x1} ${y1}`,
        fill: 'none', stroke: color(x.nodeId), 'stroke-width': 14, opacity: 0.55, class: 'share',
      }));
      start += frac;
    }
    const label = svg('text', { 'text-anchor': 'middle', y: 5, 'font-size': 13, fill: '#667085' });
    label.textContent = pts.length + ' points';
    drawing.append(label);
    return { drawing, color };
  }

  // weightText shows a weight as the decimal it is; an older coordinator
  // gives none.
  const weightText = (w) => (w ? String(w) : '—');
  const pct = (v) => Number(v || 0).toFixed(2) + ' %';

  // zoneGroups sorts the nodes into their zones: the ring's zones first,
  // largest share first, then zones whose nodes are all off the ring, by
  // name, and last the nodes of no zone, each a zone of its own to the
  // ring, together under one "no zone" heading whose share is theirs
  // summed.
  function zoneGroups(list, ring) {
    const byZone = new Map();
    for (const n of list) {
      const z = n.zone || '';
      if (!byZone.has(z)) byZone.set(z, []);
      byZone.get(z).push(n);
    }
    const share = new Map((ring.zones || []).map((z) => [z.zone, z.keyspaceSharePercent]));
    const named = [...byZone.keys()].filter((z) => z !== '');
    named.sort((a, b) => (share.get(b) || 0) - (share.get(a) || 0) || (a < b ? -1 : a > b ? 1 : 0));
    const groups = named.map((z) => ({ zone: z, nodes: byZone.get(z),
      share: share.has(z) ? share.get(z) : byZone.get(z).reduce((sum, n) => sum + (n.onRing ? n.keyspaceSharePercent : 0), 0) }));
    if (byZone.has('')) {
      const nodes = byZone.get('');
      groups.push({ zone: '', nodes, share: nodes.reduce((sum, n) => sum + (n.onRing ? n.keyspaceSharePercent : 0), 0) });
    }
    return groups;
  }

  async function nodes(view, state, arg, params) {
    const ask = params.get('drain');
    if (ask && state.asked !== location.hash) {
      state.asked = location.hash;
      preflight(state, ask);
    }
    const [list, ring] = await Promise.all([get('/nodes'), get('/nodes/ring?points=true')]);
    const { drawing, color } = ringDrawing(ring);
    const legend = h('table', { id: 'ring-legend' }, h('tbody', {}, ring.nodes.map((x) => {
      const sw = h('i', { class: 'swatch' });
      sw.style.background = color(x.nodeId);
      return h('tr', { 'data-node': x.nodeId }, h('td', {}, sw, x.nodeId, x.zone ? h('span', { class: 'hint' }, ' ' + x.zone) : null),
        h('td', { class: 'num' }, pct(x.keyspaceSharePercent)));
    })));
    const overridden = (n, what) => (n.overridden || []).includes(what);
    const row = (n) => h('tr', { 'data-node': n.nodeId, 'data-status': n.status, 'data-zone': n.zone || '' },
      h('td', {}, h('b', {}, n.nodeId), h('div', { class: 'mono' }, n.host + ':' + n.port),
        overridden(n, 'zone') ? h('div', { class: 'hint', 'data-field': 'zoneOverride' },
          'zone set by an operator; the node reports ' + (n.reportedZone || 'no zone')) : null),
      h('td', {}, badge(n.status), n.onRing ? '' : h('div', { class: 'hint' }, 'off the ring')),
      h('td', { class: 'num', 'data-field': 'weight',
        title: overridden(n, 'weight') ? 'set by an operator; the node reports ' + weightText(n.reportedWeight) : null },
      weightText(n.weight), overridden(n, 'weight') ? ' *' : ''),
      h('td', { class: 'num', 'data-field': 'points' }, n.onRing ? num(n.points) : '—'),
      h('td', { class: 'num', 'data-field': 'share' }, n.onRing ? pct(n.keyspaceSharePercent) : '—'),
      h('td', { class: 'num', 'data-field': 'blobCount' }, num(n.blobCount)),
      h('td', { class: 'num' }, bytes(n.bytesUsed)),
      h('td', { class: 'num', 'data-field': 'freeBytes' }, bytes(n.freeBytes)),
      h('td', {}, when(n.lastCheckAt)),
      h('td', {}, n.drain
        ? h('div', { class: 'drain' }, bar(n.drain.done, n.drain.total, 'warn'),
          h('div', { class: 'hint' }, num(n.drain.done) + ' / ' + num(n.drain.total) + ' files, ETA ' + seconds(n.drain.etaSeconds)))
        : n.status !== 'DEREGISTERED'
          ? h('button', { onclick: () => preflight(state, n.nodeId), 'data-drain': n.nodeId }, 'Drain…')
          : ''));
    const head = ['Node', 'Status', 'Weight#', 'Points#', 'Keyspace#', 'Blobs#', 'Used#', 'Free#', 'Last check', ''];
    const groups = zoneGroups(list, ring).map((g) => h('tbody', { class: 'zone-group', 'data-zone': g.zone },
      h('tr', { class: 'zone-head' }, h('th', { colspan: head.length },
        h('span', { class: 'zone-name' }, g.zone || 'No zone'),
        ' · ', h('span', { 'data-field': 'zoneShare' }, pct(g.share)), ' of the keyspace · ',
        g.nodes.length + (g.nodes.length === 1 ? ' node' : ' nodes'),
        g.zone ? '' : h('span', { class: 'hint' }, ' — each a zone of its own to the ring'))),
      g.nodes.map(row)));
    const anyOverride = list.some((n) => overridden(n, 'weight'));
    fill(view,
      h('h1', {}, 'Nodes'),
      state.drainPanel,
      panel('Ring (' + ring.physicalNodes + ' nodes, ' + num(ring.totalRingPositions) + ' points, ' +
        ring.virtualNodesPerNode + ' per unit of weight)',
      h('div', { class: 'ring-wrap' }, drawing, legend)),
      panel('Storage nodes by zone',
        h('table', { id: 'nodes' },
          h('thead', {}, h('tr', {}, head.map((x) => h('th', { class: x.endsWith('#') ? 'num' : '' }, x.replace(/#$/, ''))))),
          groups),
        h('p', { class: 'hint' }, 'A zone is what fails as one; copies of a file go to distinct zones first. Shares count where keys fall, not bytes held. ' +
          (anyOverride ? 'A weight marked * was set by an operator (dfs nodes set), not reported by the node. ' : '') +
          'dfs nodes set NODE zone=<z> weight=<w> sets a node\'s zone and weight; -reset zone,weight returns to what the node reports.')));
  }

  // preflight asks what draining node would do and shows it, with the
  // buttons that start the drain.
  async function preflight(state, node) {
    const box = state.drainPanel;
    fill(box, panel('Drain ' + node, h('p', { class: 'notice' }, 'Checking what a drain would do…')));
    let plan;
    try {
      plan = (await call('DELETE', '/nodes/' + encodeURIComponent(node) + '?dryRun=true')).body;
    } catch (e) {
      fill(box, panel('Drain ' + node, errorLine(e)));
      return;
    }
    const result = h('div', { id: 'drain-result' });
    const start = async (force) => {
      try {
        const q = force ? '?force=true' : '';
        const r = await call('DELETE', '/nodes/' + encodeURIComponent(node) + q);
        fill(result, h('p', { class: 'safe' }, 'Drain of ' + node + ' started: ' +
          num(r.body.drain.filesRemaining) + ' files to move. Follow it under Operations.'));
      } catch (e) {
        fill(result, errorLine(e));
      }
    };
    const cancel = h('button', { onclick: () => fill(box) }, 'Cancel');
    let actions;
    if (plan.safe) {
      actions = h('div', { class: 'actions' }, h('button', { class: 'primary', id: 'drain-start', onclick: () => start(false) }, 'Start drain'), cancel);
    } else {
      const go = h('button', { class: 'danger', id: 'drain-force', disabled: true, onclick: () => start(true) }, 'Force drain');
      const ack = h('input', { type: 'checkbox', id: 'drain-ack', onchange: (ev) => { go.disabled = !ev.target.checked; } });
      actions = h('div', {},
        h('div', { class: 'risk', id: 'drain-risk' },
          h('b', {}, 'Forcing this drain takes ' + node + ' off the ring now regardless. '),
          'What it risks: files whose only healthy copy is on ' + node + ' are lost if the node goes away before they are copied; ' +
          'a remaining node that runs out of space leaves files below the replication factor; with fewer nodes than the ' +
          'replication factor every file stays under-replicated until a node is added.'),
        h('label', {}, ack, ' I understand what forcing risks'),
        h('div', { class: 'actions' }, go, cancel));
    }
    fill(box, panel('Drain ' + node + ' — pre-flight',
      h('p', { id: 'drain-verdict', class: plan.safe ? 'safe' : 'unsafe' }, plan.safe ? 'Safe to drain.' : 'Not safe to drain:'),
      plan.reasons && plan.reasons.length ? h('ul', { class: 'reasons', id: 'drain-reasons' }, plan.reasons.map((r) => h('li', {}, r))) : null,
      h('p', {}, num(plan.filesOnNode) + ' files (' + bytes(plan.bytesOnNode) + ') leave the node; ' +
        num(plan.files) + ' files gain copies, ' + bytes(plan.bytes) + ' written; ' +
        num(plan.remainingNodes) + ' nodes remain (replication factor ' + plan.replicationFactor + ').'),
      plan.targets && plan.targets.length ? table(['Receives copies', 'Files#', 'Bytes#', 'Free now#'],
        plan.targets.map((t) => h('tr', { 'data-node': t.nodeId }, h('td', {}, t.nodeId),
          h('td', { class: 'num' }, num(t.files)), h('td', { class: 'num' }, bytes(t.bytes)), h('td', { class: 'num' }, bytes(t.freeBytes))))) : null,
      plan.soleCopies && plan.soleCopies.length ? h('p', {}, 'Only copy here: ', plan.soleCopies.map((id) => h('code', {}, id + ' '))) : null,
      actions, result));
  }

  // ---- files ----------------------------------------------------------

  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
  const STATUSES = ['ACTIVE', 'DEGRADED', 'REBALANCING', 'FAILED', 'PENDING', 'DELETED'];
  const NAME_SCAN_PAGES = 5; // a name search reads the newest 5 × 1000 files
  const PAGE_SIZE = 50;

  // parseQuery reads the search box: a file id, "status:A,B", a bucket/key
  // (s3://bucket/key or bucket/key), or else a part of a file name.
  function parseQuery(q) {
    q = q.trim();
    if (q === '') return { kind: 'all' };
    const lower = q.toLowerCase();
    if (UUID.test(lower)) return { kind: 'id', id: lower };
    const m = /^status:\s*([a-z,\s]+)$/i.exec(q);
    if (m) return { kind: 'status', statuses: m[1].split(',').map((s) => s.trim().toUpperCase()).filter(Boolean) };
    const s3 = /^(?:s3:\/\/)?([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/(.*)$/.exec(q);
    if (s3) return { kind: 'object', bucket: s3[1], key: s3[2] };
    return { kind: 'name', name: lower };
  }

  function fileRows(items) {
    return items.map((f) => h('tr', { class: 'clickable', 'data-file': f.fileId, 'data-status': f.status, onclick: () => { location.hash = '#/files/' + f.fileId; } },
      h('td', {}, f.fileName), h('td', { class: 'mono' }, f.fileId), h('td', { class: 'num' }, bytes(f.sizeBytes)),
      h('td', {}, badge(f.status)), h('td', {}, f.primaryNode || '—'), h('td', {}, when(f.createdAt))));
  }

  async function searchFiles(query, status, page) {
    const q = parseQuery(query);
    const statusParam = status ? '&status=' + status : '';
    switch (q.kind) {
      case 'id': {
        try {
          return { items: [await get('/files/' + q.id + '/metadata')], note: 'file ' + q.id };
        } catch (e) {
          if (e.status === 404) return { items: [], note: 'no file has id ' + q.id };
          throw e;
        }
      }
      case 'object': {
        // The keys that start with what was typed, in the bucket's key
        // order, each shown with its file's live status.
        let l;
        try {
          l = await get('/buckets/' + encodeURIComponent(q.bucket) + '/objects?limit=' + PAGE_SIZE + '&prefix=' + encodeURIComponent(q.key));
        } catch (e) {
          if (e.status === 404) return { items: [], note: 'no bucket named ' + q.bucket };
          throw e;
        }
        const found = await Promise.allSettled(l.objects.map(async (o) =>
          Object.assign(await get('/files/' + o.fileId + '/metadata'), { fileName: o.bucket + '/' + o.key })));
        const items = found.filter((r) => r.status === 'fulfilled').map((r) => r.value);
        const where = q.key === '' ? 'in ' + q.bucket : 'in ' + q.bucket + ' with keys starting "' + q.key + '"';
        if (items.length === 0) return { items, note: 'no object ' + where };
        return { items, note: items.length + (l.truncated ? ' (the first)' : '') + ' objects ' + where };
      }
      case 'name': {
        const found = [];
        let scanned = 0;
        for (let p = 0; p < NAME_SCAN_PAGES; p++) {
          const l = await get('/files?size=1000&page=' + p + statusParam);
          scanned += l.items.length;
          found.push(...l.items.filter((f) => f.fileName.toLowerCase().includes(q.name)));
          if ((p + 1) * 1000 >= l.total) break;
        }
        return { items: found, note: found.length + ' files named like "' + q.name + '" among the newest ' + num(scanned) };
      }
      default: {
        const st = q.kind === 'status' ? '&status=' + q.statuses.join(',') : statusParam;
        const l = await get('/files?size=' + PAGE_SIZE + '&page=' + page + st);
        return { items: l.items, total: l.total, page, note: num(l.total) + ' files' };
      }
    }
  }

  async function files(view, state, arg, params) {
    if (arg) return fileDetail(view, arg, params.get('verify') === '1');
    // The search is in the address (#/files?q=…&status=…), so a search can
    // be linked to and the back button goes back to it.
    const query = params.get('q') || '';
    const status = params.get('status') || '';
    const input = h('input', { type: 'search', id: 'file-search', value: query, placeholder: 'file name, file id, status:DEGRADED, or bucket/key' });
    const select = h('select', { id: 'file-status' }, h('option', { value: '' }, 'listed statuses'),
      STATUSES.map((s) => h('option', { value: s, selected: status === s }, s)));
    const results = h('div', { id: 'file-results' });
    const run = async (page) => {
      fill(results, h('p', { class: 'notice' }, 'Searching…'));
      try {
        const r = await searchFiles(query, status, page);
        const pager = r.total > PAGE_SIZE ? h('div', { class: 'actions' },
          h('button', { disabled: page === 0, onclick: () => run(page - 1) }, '‹ Newer'),
          h('span', {}, 'page ' + (page + 1) + ' of ' + Math.ceil(r.total / PAGE_SIZE)),
          h('button', { disabled: (page + 1) * PAGE_SIZE >= r.total, onclick: () => run(page + 1) }, 'Older ›')) : null;
        fill(results, h('p', { class: 'hint', id: 'file-note' }, r.note),
          r.items.length ? table(['Name', 'Id', 'Size#', 'Status', 'Primary', 'Created'], fileRows(r.items)) : null, pager);
      } catch (e) {
        fill(results, errorLine(e));
      }
    };
    const submit = (ev) => {
      ev.preventDefault();
      const want = '#/files?' + new URLSearchParams({ q: input.value.trim(), status: select.value });
      if (location.hash === want) run(0);
      else location.hash = want;
    };
    const form = h('form', { class: 'searchrow', onsubmit: submit },
      input, select, h('button', { class: 'primary', type: 'submit' }, 'Search'));
    fill(view, h('h1', {}, 'Files'),
      panel(null, form, h('p', { class: 'hint' }, 'A file id finds that file; status:ACTIVE,DEGRADED lists by status; bucket/key (or s3://bucket/key) lists the objects whose keys start with it; anything else matches file names.'), results));
    await run(0);
  }

  // chunkCopies summarises a chunked file's copies as `dfs info` does: the
  // copies are per chunk, so the page says how many chunks there are, how
  // many ACTIVE copies each has and on which nodes, e.g. "3 chunks, 3
  // copies each on node-1, node-2, node-3" ("2–3 copies" when chunks
  // differ).
  function chunkCopies(chunks) {
    let low = -1;
    let high = 0;
    const nodes = new Set();
    for (const c of chunks) {
      const active = (c.replicas || []).filter((r) => r.status === 'ACTIVE');
      for (const r of active) nodes.add(r.nodeId);
      if (low < 0 || active.length < low) low = active.length;
      high = Math.max(high, active.length);
    }
    const copies = low === high ? String(high) : low + '–' + high;
    return chunks.length + ' chunks, ' + copies + (high === 1 ? ' copy' : ' copies') + ' each on ' +
      ([...nodes].sort().join(', ') || 'none');
  }

  // copiesBody is the Copies panel's content: a whole file's copies one per
  // row; a chunked file's summary, and the chunks that are not ACTIVE with
  // the nodes holding their good copies, the ones an operator looks into.
  function copiesBody(f) {
    if (!(f.chunks && f.chunks.length)) {
      return table(['Node', 'Status', 'Primary', 'Updated'], (f.replicas || []).map((c) => h('tr', { 'data-node': c.nodeId, 'data-status': c.status },
        h('td', {}, c.nodeId), h('td', {}, badge(c.status)), h('td', {}, c.primary ? 'primary' : ''), h('td', {}, when(c.updatedAt)))));
    }
    const trouble = f.chunks.filter((c) => c.status !== 'ACTIVE');
    return [
      h('p', { id: 'chunk-copies' }, chunkCopies(f.chunks)),
      trouble.length ? table(['Chunk#', 'Status', 'Active copies on', 'Reason'], trouble.map((c) => {
        const on = (c.replicas || []).filter((r) => r.status === 'ACTIVE').map((r) => r.nodeId);
        return h('tr', { 'data-chunk': c.index, 'data-status': c.status },
          h('td', { class: 'num' }, c.index), h('td', {}, badge(c.status)), h('td', {}, on.join(', ') || 'none'), h('td', {}, c.reason || ''));
      })) : null,
    ];
  }

  // copyCheckRow is one copy's line in a verification's table; chunk is the
  // chunk's index for a chunked file, undefined for a whole one.
  function copyCheckRow(c, chunk) {
    const attrs = { 'data-node': c.nodeId, 'data-result': c.result };
    const cells = [h('td', {}, c.nodeId), h('td', {}, badge(c.result)), h('td', {}, c.status ? badge(c.status) : '—'),
      h('td', {}, c.rebuilt ? 'yes' : 'no'), h('td', { class: 'mono' }, c.error || '')];
    if (chunk === undefined) return h('tr', attrs, ...cells);
    attrs['data-chunk'] = chunk;
    return h('tr', attrs, h('td', { class: 'num' }, chunk), ...cells);
  }

  // verifyBody shows a verification's copies: a whole file's one per row; a
  // chunked file's (whose copies are per chunk) as how many chunks were
  // checked and every chunk copy that was not OK or was rebuilt, which is
  // what an operator acts on.
  function verifyBody(r) {
    const head = ['Node', 'Result', 'Copy status', 'Rebuilt', 'Detail'];
    if (!(r.chunks && r.chunks.length)) return table(head, (r.copies || []).map((c) => copyCheckRow(c)));
    const rows = [];
    let troubled = 0;
    for (const ch of r.chunks) {
      const bad = (ch.copies || []).filter((c) => c.result !== 'OK' || c.rebuilt);
      if (bad.length) troubled++;
      for (const c of bad) rows.push(copyCheckRow(c, ch.index));
    }
    const line = r.chunks.length + ' chunks checked: ' +
      (troubled ? troubled + ' with a copy not OK or rebuilt' : 'every copy OK');
    return [h('p', { id: 'verify-chunks' }, line), rows.length ? table(['Chunk#', ...head], rows) : null];
  }

  async function fileDetail(view, id, verifyNow) {
    const f = await get('/files/' + encodeURIComponent(id) + '/metadata');
    const verdict = h('div', { id: 'verify-result' });
    const verify = h('button', { class: 'primary', id: 'verify', onclick: async () => {
      verify.disabled = true;
      fill(verdict, h('p', { class: 'notice' }, 'Re-hashing every copy…'));
      try {
        const r = (await call('POST', '/files/' + encodeURIComponent(id) + '/verify')).body;
        fill(verdict, h('p', {}, 'Verified: ', badge(r.status), ' ' + r.healthyCopies + ' healthy copies.'), verifyBody(r));
      } catch (e) {
        fill(verdict, errorLine(e));
      } finally {
        verify.disabled = false;
      }
    } }, 'Verify copies');
    fill(view,
      h('h1', {}, h('a', { href: '#/files' }, 'Files'), ' › ', f.fileName),
      panel('File',
        table(['Field', 'Value'], [
          ['Id', h('code', { id: 'file-id' }, f.fileId)], ['Status', h('span', { id: 'file-status-badge' }, badge(f.status))],
          ['Reason', f.reason || '—'], ['Size', bytes(f.sizeBytes) + ' (' + num(f.sizeBytes) + ' bytes)'],
          ['Content type', f.contentType], ['SHA-256', h('code', {}, f.checksum)], ['Primary', f.primaryNode || '—'],
          ['Replication factor', f.replicationFactor], ['Created', when(f.createdAt)], ['Updated', when(f.updatedAt)],
        ].map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, v))))),
      panel('Copies', copiesBody(f),
        h('div', { class: 'actions' }, verify, h('a', { href: '../api/files/' + encodeURIComponent(f.fileId) }, 'Download')),
        verdict));
    if (verifyNow) verify.click();
  }

  // ---- operations -----------------------------------------------------

  // A scrub pass carries its report while it runs: the corrupt copies it
  // has found so far; other operations have none to show here.
  function corruptCell(o) {
    if (o.kind !== 'SCRUB' || !o.report) return h('td', { class: 'num', 'data-field': 'corruptionsFound' }, '—');
    const n = o.report.corruptionsFound;
    return h('td', { class: 'num' + (n ? ' error' : ''), 'data-field': 'corruptionsFound' }, num(n) + (o.report.behind ? ' (behind)' : ''));
  }

  function opRow(o) {
    const finished = o.finishedAt ? (new Date(o.finishedAt) - new Date(o.startedAt)) / 1000 : null;
    return h('tr', { 'data-op': o.id, 'data-kind': o.kind, 'data-state': o.state, 'data-node': o.nodeId || '' },
      h('td', {}, badge(o.kind)), h('td', {}, o.trigger), h('td', {}, o.nodeId || '—'), h('td', {}, badge(o.state)),
      h('td', {}, bar(o.done, o.total, o.state === 'DONE' ? 'ok' : o.state === 'FAILED' ? 'warn' : ''),
        h('div', { class: 'hint' }, num(o.done) + ' / ' + num(o.total))),
      h('td', { class: 'num' }, bytes(o.bytesDone)),
      h('td', { class: 'num' }, bytes(o.bytesPerSecond) + '/s'),
      h('td', { class: 'num' }, o.state === 'RUNNING' ? seconds(o.etaSeconds) : seconds(finished)),
      corruptCell(o),
      h('td', {}, when(o.state === 'RUNNING' ? o.startedAt : o.finishedAt)));
  }

  async function operations(view) {
    const o = await get('/cluster/operations');
    const head = ['Kind', 'Trigger', 'Node', 'State', 'Progress', 'Bytes#', 'Rate#', 'ETA / took#', 'Corrupt#', 'When'];
    fill(view, h('h1', {}, 'Operations'),
      panel('Running', o.running.length ? table(head, o.running.map(opRow)) : h('p', { class: 'notice', id: 'none-running' }, 'Nothing is running.')),
      panel('Recent', o.recent.length ? table(head, o.recent.map(opRow)) : h('p', { class: 'notice' }, 'No operation has finished since this coordinator started.')),
      h('p', { class: 'hint' }, 'Rebalances, drains and repairs are those this coordinator ran since it started (the latest 100 of each kind). ' +
        'Scrub passes are each node\'s running pass and its last complete one, as the node reports them; Progress counts copies hashed, Bytes the bytes hashed, Corrupt the copies whose bytes did not match their checksum.'));
  }

  // ---- routing --------------------------------------------------------

  const pages = { overview, nodes, files, operations };
  const live = new Set(['overview', 'nodes', 'operations']);
  const state = { drainPanel: h('div', { id: 'drain-panel' }) };
  let timer = null;
  let generation = 0;

  async function show() {
    clearTimeout(timer);
    const [route, query = ''] = location.hash.split('?');
    const [, name = 'overview', arg] = /^#\/([a-z]+)\/?(.*)$/.exec(route) || [];
    const page = pages[name] ? name : 'overview';
    for (const a of document.querySelectorAll('header nav a')) a.classList.toggle('active', a.dataset.page === page);
    const view = document.getElementById('view');
    const mine = ++generation;
    view.dataset.page = page;
    try {
      await pages[page](view, state, arg ? decodeURIComponent(arg) : '', new URLSearchParams(query));
      view.dataset.loaded = 'true';
    } catch (e) {
      fill(view, h('h1', {}, page), errorLine(e));
      view.dataset.loaded = 'error';
    }
    refreshHealth();
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    if (live.has(page) && mine === generation) timer = setTimeout(show, REFRESH_MS);
  }

  window.addEventListener('hashchange', () => {
    fill(state.drainPanel);
    show();
  });
  show();
})();
