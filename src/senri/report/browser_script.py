"""The question browser's one script (``questions/browser.js``), shared by the list, the grid and every question
page, so that the three read the address the same way and agree on which questions a filter selects.

The pages are static files opened from disk (``file://``), so the data travels as a script too
(``questions/rows.js`` sets ``window.SENRI_DATA``; a ``fetch`` of JSON is refused on ``file://``):
``runs`` (labels in table order), ``rows`` (one per run and question, the list's columns) and ``questions``
(qid → text, video, task, direction, answer, page).

The address holds the state of a view: ``index.html?run=…&video=…&task=…&direction=…&correct=yes|no|missing&
flag=…&q=<text>&sort=<column>&order=asc|desc&page=<n>&rows=<n>`` (each view shows a page of ``rows`` rows,
``SENRI_DATA.page_rows`` by default; the list's rows come as HTML from ``questions/list.js``, made into table rows
only when their page is shown) and ``grid.html?video=…&task=…&direction=…&outcome=mixed|
all_wrong|all_right&right=<run>&wrong=<run>&q=<text>&sort=<column>&order=…``. A question page opened from a view
carries that view's state (``from=list`` or ``from=grid`` plus its parameters) and links to the previous and
next question of the same filtered, sorted sequence and back to the view as it was. A parameter the page does
not know, or a value no row has, is named in a visible warning and ignored — never silently matched to nothing
or to everything. ``correct`` also takes 1/0, true/false and right/wrong.
"""

BROWSER_JS = r"""
(function(){
'use strict';
const D = window.SENRI_DATA;
const LIST_KEYS = ['run','video','task','direction','correct','flag'];
const GRID_KEYS = ['video','task','direction','outcome','right','wrong'];
const ALIASES = {correct: {'1':'yes','true':'yes','right':'yes','0':'no','false':'no','wrong':'no'}};
const OUTCOMES = {mixed: 'runs disagree (some right, some wrong)', all_wrong: 'all runs wrong',
                  all_right: 'all runs right'};
const uniq = a => [...new Set(a)].sort();
const known = {
  run: () => D.runs, right: () => D.runs, wrong: () => D.runs,
  video: () => uniq(D.rows.map(r => r.video)), task: () => uniq(D.rows.map(r => r.task)),
  direction: () => uniq(D.rows.map(r => r.direction)), correct: () => ['yes','no','missing'],
  flag: () => uniq(D.rows.flatMap(r => r.flags)), outcome: () => Object.keys(OUTCOMES),
};
const LIST_SORTS = () => D.list_columns;
const GRID_SORTS = () => ['qid','video','task','direction','answer','text','right'];

function parse(search, view){
  const params = new URLSearchParams(search);
  const keys = view === 'grid' ? GRID_KEYS : LIST_KEYS;
  const sorts = view === 'grid' ? GRID_SORTS() : LIST_SORTS();
  const st = {view: view, filters: {}, q: '', sort: null, order: 'asc', page: 1, rows: D.page_rows, warnings: []};
  for (const [key, raw] of params){
    if (key === 'from') continue;
    if (key === 'q'){ st.q = raw; continue; }
    if (key === 'page' || key === 'rows'){
      if (/^[1-9][0-9]*$/.test(raw)) st[key] = +raw;
      else st.warnings.push(`${key} "${raw}" ignored (a whole number from 1)`);
      continue;
    }
    if (key === 'order'){
      if (raw === 'asc' || raw === 'desc') st.order = raw;
      else st.warnings.push(`unknown order "${raw}" ignored (asc or desc)`);
      continue;
    }
    if (key === 'sort'){
      // a column key, or (addresses written before keys) its position in the list
      const byIndex = /^[0-9]+$/.test(raw) && view !== 'grid' ? sorts[+raw] : undefined;
      const col = sorts.includes(raw) ? raw : byIndex;
      if (col) st.sort = col;
      else st.warnings.push(`unknown sort column "${raw}" ignored (known: ${sorts.join(', ')})`);
      continue;
    }
    if (!keys.includes(key)){
      st.warnings.push(`unknown filter "${key}" ignored (this page filters by ${keys.concat(['q','sort','order']).join(', ')})`);
      continue;
    }
    if (raw === '') continue;
    const value = (ALIASES[key] || {})[raw.toLowerCase()] || raw;
    const allowed = known[key]();
    if (!allowed.includes(value)){
      st.warnings.push(`unknown ${key} "${raw}" ignored (known: ${allowed.join(', ') || 'none'})`);
      continue;
    }
    st.filters[key] = value;
  }
  return st;
}

function query(st, extra){
  const params = new URLSearchParams(extra || {});
  for (const [k, v] of Object.entries(st.filters)) if (v) params.set(k, v);
  if (st.q) params.set('q', st.q);
  if (st.sort){ params.set('sort', st.sort); if (st.order === 'desc') params.set('order', 'desc'); }
  if (st.page > 1) params.set('page', st.page);
  if (st.rows !== D.page_rows) params.set('rows', st.rows);
  return params.toString();
}

function textMatch(qid, q){
  if (!q) return true;
  const info = D.questions[qid] || {};
  return (qid + ' ' + (info.text || '')).toLowerCase().includes(q.toLowerCase());
}

function rowMatches(row, st){
  for (const [k, v] of Object.entries(st.filters)){
    if (k === 'flag' ? !row.flags.includes(v) : row[k] !== v) return false;
  }
  return textMatch(row.qid, st.q);
}

function compare(x, y){
  if (typeof x === 'number' && typeof y === 'number') return x - y;
  return String(x).localeCompare(String(y), undefined, {numeric: true});
}

/** The list's rows that pass the filters, in the address's order (stable: the page's order breaks ties). */
function listRows(st){
  const rows = D.rows.filter(r => rowMatches(r, st));
  if (st.sort){
    const key = st.sort === 'flags' ? (r => r.flags.join(' '))
      : st.sort === 'text' ? (r => (D.questions[r.qid] || {}).text || '') : (r => r[st.sort]);
    rows.sort((a, b) => (st.order === 'desc' ? -1 : 1) * compare(key(a), key(b)) || a.i - b.i);
  }
  return rows;
}

/** Per question: each run's outcome (yes / no / missing) and prediction. */
function cellsOf(){
  const cells = {};
  for (const r of D.rows){ (cells[r.qid] = cells[r.qid] || {})[r.run] = r; }
  return cells;
}

function outcomeOf(byRun){
  const right = D.runs.filter(run => byRun[run] && byRun[run].correct === 'yes').length;
  return right === 0 ? 'all_wrong' : right === D.runs.length ? 'all_right' : 'mixed';
}

function gridQuestions(st){
  const cells = cellsOf();
  let qids = D.question_order.filter(qid => cells[qid]).filter(qid => {
    const info = D.questions[qid], byRun = cells[qid], f = st.filters;
    if (f.video && info.video !== f.video) return false;
    if (f.task && info.task !== f.task) return false;
    if (f.direction && info.direction !== f.direction) return false;
    if (f.outcome && outcomeOf(byRun) !== f.outcome) return false;
    if (f.right && !(byRun[f.right] && byRun[f.right].correct === 'yes')) return false;
    if (f.wrong && byRun[f.wrong] && byRun[f.wrong].correct === 'yes') return false;
    return textMatch(qid, st.q);
  });
  if (st.sort){
    const right = qid => D.runs.filter(run => cells[qid][run] && cells[qid][run].correct === 'yes').length;
    const key = st.sort === 'right' ? right : st.sort === 'qid' ? (qid => qid) : (qid => D.questions[qid][st.sort]);
    const pos = Object.fromEntries(D.question_order.map((q, i) => [q, i]));
    qids.sort((a, b) => (st.order === 'desc' ? -1 : 1) * compare(key(a), key(b)) || pos[a] - pos[b]);
  }
  return qids;
}

/** The questions a view shows, in its order, each once: what previous / next walk through. */
function sequence(st){
  if (st.view === 'grid') return gridQuestions(st);
  const seen = new Set(), out = [];
  for (const r of listRows(st)) if (!seen.has(r.qid)){ seen.add(r.qid); out.push(r.qid); }
  return out;
}

function showWarnings(st){
  const box = document.getElementById('warnings');
  box.hidden = st.warnings.length === 0;
  box.innerHTML = '';
  for (const w of st.warnings){ const p = document.createElement('p'); p.textContent = '⚠ ' + w; box.appendChild(p); }
}

function write(st){
  const q = query(st);
  try { history.replaceState(null, '', location.pathname + (q ? '?' + q : '')); } catch (e) { /* an old browser */ }
}

function fillSelect(el, values, labels){
  for (const v of values){ const o = document.createElement('option'); o.value = v; o.textContent = (labels || {})[v] || v; el.appendChild(o); }
}

function bindControls(st, keys, refresh){
  for (const k of keys){
    const el = document.getElementById('f-' + k);
    fillSelect(el, known[k](), k === 'outcome' ? OUTCOMES : null);
    el.value = st.filters[k] || '';
    el.addEventListener('change', () => { st.filters[k] = el.value; st.warnings = []; st.page = 1; refresh(); });
  }
  const text = document.getElementById('f-q');
  text.value = st.q;
  text.addEventListener('input', () => { st.q = text.value; st.page = 1; refresh(); });
}

function bindSort(table, st, refresh){
  const heads = [...table.tHead.rows[0].cells];
  heads.forEach(th => {
    const key = th.dataset.key;
    if (!key) return;
    th.addEventListener('click', () => {
      st.order = st.sort === key && st.order === 'asc' ? 'desc' : 'asc';
      st.sort = key; st.page = 1; refresh();
    });
  });
  return () => heads.forEach(th => {
    th.classList.remove('sorted-asc', 'sorted-desc');
    if (th.dataset.key && th.dataset.key === st.sort) th.classList.add(st.order === 'desc' ? 'sorted-desc' : 'sorted-asc');
  });
}

function percent(right, n){ return n ? (100 * right / n).toFixed(1) + ' %' : '–'; }

/** One view (the list or the grid): the rows ``select`` gives, a page of them (``st.rows`` a page) in the table,
 * the line above it, the page controls, its links carrying the view's state, the address kept up to date.
 * ``rowOf(key)`` gives a row's element; ``total`` counts the rows unfiltered. */
function view(kind, tableId, keys, rowOf, total, select, summary){
  const st = parse(location.search, kind);
  const table = document.getElementById(tableId);
  const pager = document.querySelector('.pager'), prev = document.getElementById('page-prev'),
        next = document.getElementById('page-next');
  let marks;
  function refresh(){
    const items = select(st), pages = Math.max(1, Math.ceil(items.length / st.rows));
    if (st.page > pages){
      st.warnings.push(`page ${st.page} is past the last page of this selection; showing page ${pages}`);
      st.page = pages;
    }
    const start = (st.page - 1) * st.rows, page = items.slice(start, start + st.rows);
    table.tBodies[0].replaceChildren(...page.map(rowOf));
    document.getElementById('shown').textContent = summary(items, total) +
      (pages > 1 ? ` · rows ${start + 1}–${start + page.length} on page ${st.page} of ${pages}` : '');
    pager.hidden = pages <= 1;
    document.getElementById('page-at').textContent = `page ${st.page} of ${pages}`;
    prev.disabled = st.page <= 1; next.disabled = st.page >= pages;
    table.dataset.shown = items.length;
    const q = query(st, {from: kind});
    for (const a of table.querySelectorAll('a.question')) a.href = a.dataset.page + '?' + q + (a.dataset.anchor || '');
    marks(); showWarnings(st); write(st);
  }
  prev.addEventListener('click', () => { st.page -= 1; refresh(); });
  next.addEventListener('click', () => { st.page += 1; refresh(); });
  bindControls(st, keys, refresh);
  marks = bindSort(table, st, refresh);
  refresh();
}

/** The list's row ``i`` as an element, made from ``list.js`` the first time the page shows it. */
function listRow(){
  const made = {}, holder = document.createElement('tbody');
  return i => {
    if (!made[i]){ holder.innerHTML = window.SENRI_LIST[i]; made[i] = holder.firstElementChild; }
    return made[i];
  };
}

function list(){
  view('list', 'questions', LIST_KEYS, listRow(), D.rows.length, st => listRows(st).map(r => r.i), (items, total) => {
    const right = items.filter(i => D.rows[i].correct === 'yes').length;
    return `${items.length} of ${total} rows shown · accuracy of the rows shown: ${right} of ${items.length} right ` +
      `(${percent(right, items.length)}; missing counted wrong)`;
  });
}

function grid(){
  const table = document.getElementById('grid');
  const byQid = Object.fromEntries([...table.tBodies[0].rows].map(tr => [tr.dataset.qid, tr]));
  view('grid', 'grid', GRID_KEYS, qid => byQid[qid], Object.keys(byQid).length, gridQuestions,
       (items, total) => `${items.length} of ${total} questions shown`);
}

function question(qid){
  const params = new URLSearchParams(location.search);
  const view = params.get('from') === 'grid' ? 'grid' : 'list';
  const st = parse(location.search, view);
  const back = document.getElementById('back');
  const rest = query(st);
  back.href = (view === 'grid' ? '../grid.html' : '../index.html') + (rest ? '?' + rest : '');
  back.textContent = view === 'grid' ? '← grid' : '← all questions';
  const seq = sequence(st), at = seq.indexOf(qid);
  const q = query(st, {from: view});
  const link = (id, other) => {
    const a = document.getElementById(id);
    if (other === undefined){ a.removeAttribute('href'); a.classList.add('disabled'); return; }
    a.removeAttribute('class'); a.href = D.questions[other].page + '?' + q; a.dataset.qid = other;
  };
  link('prev', at > 0 ? seq[at - 1] : undefined);
  link('next', at >= 0 && at < seq.length - 1 ? seq[at + 1] : undefined);
  document.getElementById('position').textContent = at >= 0
    ? `question ${at + 1} of ${seq.length} in this selection`
    : `not in this selection (${seq.length} question(s))`;
  showWarnings(st);
}

window.SENRI = {parse: parse, query: query, sequence: sequence, list: list, grid: grid, question: question};
})();
"""
