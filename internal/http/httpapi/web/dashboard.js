// Mosaic's dashboard: refreshes a log's live figures from its
// dashboard.json every few seconds and draws the tree's growth over the
// last hour as an SVG chart. No libraries and nothing from another origin
// (the page's Content-Security-Policy allows only this origin). Text is
// only ever set with textContent, never parsed as HTML.
(() => {
  'use strict';
  const root = document.getElementById('dashboard');
  if (!root) return; // the list of logs has no live figures
  const url = root.dataset.dashboard;
  const refresh = Number(root.dataset.refreshMs) || 3000;
  const svgNS = 'http://www.w3.org/2000/svg';
  let updates = 0;
  let lastSample = -1;

  // The same formats as the Go side (dashboard.go), so the first refresh
  // does not change what the page showed.
  const digits = (n) => Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const rate = (r) => (r == null ? '—' : r < 10 ? r.toFixed(1) : digits(r));
  const seconds = (s) =>
    s == null ? '—' : s < 0.01 ? (s * 1000).toFixed(1) + ' ms' : s < 1 ? (s * 1000).toFixed(0) + ' ms' : s.toFixed(2) + ' s';
  const percent = (f) => (f == null ? '—' : f < 0.1 ? (f * 100).toFixed(1) + ' %' : (f * 100).toFixed(0) + ' %');
  const age = (s) => {
    s = Math.max(0, s);
    if (s < 60) return s.toFixed(1) + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  };
  // reasons names the reasons with the highest refusal rates, highest
  // first (formatReasons in dashboard.go).
  const reasons = (m) => {
    const list = Object.entries(m || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    if (!list.length) return 'none';
    return list.slice(0, 3).map(([r, v]) => r + ' ' + rate(v) + '/s').join(', ');
  };
  const clock = (ms) => new Date(ms).toISOString().substring(11, 19);

  const set = (id, text) => {
    const el = document.getElementById(id);
    if (el && el.textContent !== text) el.textContent = text;
  };

  function svg(name, attrs, text) {
    const el = document.createElementNS(svgNS, name);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    if (text !== undefined) el.textContent = text;
    return el;
  }

  // drawChart draws tree size against time over the last hour, from the
  // samples and the live point, and says the same in words.
  function drawChart(doc) {
    const chart = document.getElementById('chart');
    const pts = doc.history.concat([doc.now]);
    // The last hour, or less while the process has run for less (at
    // least a minute), so the line fills the width.
    const end = doc.now.time_ms;
    const start = Math.max(end - 3600 * 1000, Math.min(pts[0].time_ms, end - 60 * 1000));
    // Drawn at the chart's own width, so text keeps its size on any screen.
    const W = Math.max(280, Math.round(chart.getBoundingClientRect().width) || 640);
    const H = 220, left = 78, right = 12, top = 12, bottom = 30;
    chart.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    let lo = Math.min(...pts.map((p) => p.tree_size));
    let hi = Math.max(...pts.map((p) => p.tree_size));
    if (hi === lo) { hi = lo + 1; lo = Math.max(0, lo - 1); }
    const x = (t) => left + ((Math.max(t, start) - start) / (end - start)) * (W - left - right);
    const y = (n) => top + (1 - (n - lo) / (hi - lo)) * (H - top - bottom);

    const keep = [chart.querySelector('title'), chart.querySelector('desc')];
    chart.replaceChildren(...keep);
    for (const n of [lo, (lo + hi) / 2, hi]) {
      chart.appendChild(svg('line', { class: 'grid', x1: left, x2: W - right, y1: y(n), y2: y(n) }));
      chart.appendChild(svg('text', { x: left - 8, y: y(n) + 4, 'text-anchor': 'end' }, digits(n)));
    }
    const mid = (start + end) / 2;
    for (const [t, label, anchor] of [[start, clock(start) + ' UTC', 'start'], [mid, clock(mid), 'middle'], [end, 'now', 'end']]) {
      chart.appendChild(svg('text', { x: x(t), y: H - 8, 'text-anchor': anchor }, label));
    }
    const line = pts.map((p) => x(p.time_ms).toFixed(1) + ',' + y(p.tree_size).toFixed(1));
    const base = y(lo).toFixed(1);
    chart.appendChild(svg('path', {
      class: 'area',
      d: 'M' + x(pts[0].time_ms).toFixed(1) + ',' + base + ' L' + line.join(' L') + ' L' + x(end).toFixed(1) + ',' + base + ' Z',
    }));
    chart.appendChild(svg('polyline', { class: 'line', points: line.join(' ') }));
    const last = pts[pts.length - 1];
    chart.appendChild(svg('circle', { class: 'dot', cx: x(last.time_ms), cy: y(last.tree_size), r: 4 }));

    const first = pts[0];
    const grown = last.tree_size - first.tree_size;
    const words = 'Tree size over the last hour: ' + (grown > 0
      ? 'it grew by ' + digits(grown) + ' entries, from ' + digits(first.tree_size) + ' to ' + digits(last.tree_size)
      : 'it stayed at ' + digits(last.tree_size) + ' entries') +
      ' between ' + clock(first.time_ms) + ' and ' + clock(last.time_ms) + ' UTC (' + doc.history.length +
      (doc.history.length === 1 ? ' sample' : ' samples') + ' and the live figure).';
    chart.querySelector('desc').textContent = words;
    set('chart-summary', words);
  }

  // fillTable lists the samples, newest first, when a new one arrived.
  function fillTable(doc) {
    const h = doc.history;
    const newest = h.length ? h[h.length - 1].time_ms : 0;
    if (newest === lastSample) return;
    lastSample = newest;
    const rows = [];
    for (let i = h.length - 1; i >= 0; i--) {
      const p = h[i];
      const tr = document.createElement('tr');
      for (const text of [clock(p.time_ms), digits(p.tree_size), rate(p.entries_per_second),
        seconds(p.round_duration_seconds), percent(p.pool_fill), age(p.checkpoint_age_seconds),
        [p.refused_429_per_second, p.refused_503_per_second, p.refused_4xx_per_second].map(rate).join(' · ')]) {
        const td = document.createElement('td');
        td.textContent = text;
        tr.appendChild(td);
      }
      rows.push(tr);
    }
    document.getElementById('samples').replaceChildren(...rows);
  }

  // renderWitnesses shows each witness's state (doc.witnesses, see
  // WitnessState in dashboard.go).
  function renderWitnesses(list) {
    const ul = document.getElementById('witnesses');
    ul.replaceChildren(...list.map((w) => {
      const li = document.createElement('li');
      const size = w.cosigned_size >= 0 ? 'cosigned size ' + w.cosigned_size : 'cosigned size unknown';
      li.textContent = w.name + ': ' + w.state + ' (' + size + ', last cosignature ' + w.last_success + ', latency ' + w.latency + ')';
      return li;
    }));
    document.getElementById('witnesses-none').hidden = list.length > 0;
  }

  function update(doc) {
    const now = doc.now;
    set('tree-size', digits(now.tree_size));
    set('entries-rate', rate(now.entries_per_second));
    set('round-duration', seconds(now.round_duration_seconds));
    set('pool-fill', percent(now.pool_fill));
    set('checkpoint-age', age(now.checkpoint_age_seconds));
    set('accepted-roots', doc.accepted_roots >= 0 ? String(doc.accepted_roots) : '—');
    set('version', doc.version);
    set('refused-429', rate(now.refused_429_per_second));
    set('refused-503', rate(now.refused_503_per_second));
    set('refused-4xx', rate(now.refused_4xx_per_second));
    set('refusal-reasons', reasons(now.refused_by_reason));
    drawChart(doc);
    fillTable(doc);
    renderWitnesses(doc.witnesses || []);
    let status = 'Live: updated ' + clock(now.time_ms) + ' UTC, every ' + refresh / 1000 + ' s.';
    if (!doc.sequencing) status += ' This process is a standby: another process sequences the log, so round duration and pool fill are not known here.';
    set('live-status', status);
    updates++;
    root.dataset.updates = String(updates);
  }

  function tick() {
    fetch(url, { cache: 'no-store', headers: { Accept: 'application/json' } })
      .then((r) => {
        if (!r.ok) throw new Error('the server answered ' + r.status);
        return r.json();
      })
      .then(update)
      .catch((err) => {
        set('live-status', 'The live figures could not be refreshed (' + err.message + '); retrying.');
      })
      .finally(() => setTimeout(tick, refresh));
  }
  tick();
})();
