// Reads go-playground/locales' names (main.go's JSON) on stdin and writes
// pkg/transform/intl_data.go from this Node's ICU: for each supported
// locale, the pattern ICU picks for each combination of date and time
// fields (the order and literals; widths are adjusted at run time), the
// date-time glue, the style patterns, the number patterns, and the names
// where ICU's CLDR differs from the library's (or the library has none:
// eras, day periods). Run with Node 20 or later (full ICU).
'use strict';
const lib = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const LOCALES = ['en-US', 'en-GB', 'de-DE', 'fr-FR', 'es-ES', 'it-IT', 'pt-BR', 'nl-NL', 'ja-JP'];
const T = Date.UTC(2021, 0, 7, 9, 4, 5); // single digits show which fields ICU pads
const W = {short: 3, long: 4, narrow: 5};
const eq = (a, b) => a && b && a.length === b.length && a.every((x, i) => x === b[i]);
const fail = (m) => { throw new Error(m); };

function gen(loc) {
  const L = lib[loc.replace('-', '_')];
  const names = {}; // token -> array emitted for this locale
  const fmt = {}; // format-context arrays by token
  const parts = (o, t) => new Intl.DateTimeFormat(loc, Object.assign({timeZone: 'UTC'}, o)).formatToParts(t === undefined ? T : t);
  const partAt = (o, t, i) => parts(o, t)[i].value;
  const months = (o, i) => [...Array(12).keys()].map((m) => partAt(o, Date.UTC(2021, m, 27, 15, 4, 5), i));
  const days = (o, i) => [...Array(7).keys()].map((d) => partAt(o, Date.UTC(2021, 0, 24 + d, 15, 4, 5), i));
  function ref(kind, w) {
    const k = kind + w;
    if (fmt[k]) return fmt[k];
    const o = kind === 'M' ? {year: 'numeric', month: ['', '', '', 'short', 'long', 'narrow'][w], day: 'numeric'} : {weekday: ['', '', '', 'short', 'long', 'narrow'][w], year: 'numeric', month: 'long', day: 'numeric'};
    const i = parts(o).findIndex((p) => p.type === (kind === 'M' ? 'month' : 'weekday'));
    const a = kind === 'M' ? months(o, i) : days(o, i);
    if (/^\d+$/.test(a[0])) return null;
    fmt[k] = a;
    const libA = L[kind.repeat(w)];
    if (!eq(a, libA)) names[k] = a;
    return a;
  }
  for (const w of [3, 4, 5]) { ref('M', w); ref('E', w); }
  // Eras and day periods: the library has no accessor for them.
  for (const [w, name] of [[3, 'short'], [4, 'long'], [5, 'narrow']]) {
    const o = {era: name, year: 'numeric', month: 'numeric', day: 'numeric'};
    const i = parts(o).findIndex((p) => p.type === 'era');
    names['G' + w] = [partAt(o, Date.UTC(-100, 0, 1), i), partAt(o, T, i)];
  }
  {
    const o = {hour: 'numeric', minute: 'numeric', hour12: true};
    const i = parts(o).findIndex((p) => p.type === 'dayPeriod');
    names.a = [partAt(o, Date.UTC(2021, 0, 27, 3), i), partAt(o, Date.UTC(2021, 0, 27, 15), i)];
  }
  function tokens(o) {
    const ps = parts(o);
    const hc = new Intl.DateTimeFormat(loc, Object.assign({timeZone: 'UTC'}, o)).resolvedOptions().hourCycle;
    return ps.map((p, i) => {
      const v = p.value;
      switch (p.type) {
        case 'literal':
          if (/[{}]/.test(v)) fail(loc + ': brace in a literal');
          return v;
        case 'year': return v === '2021' ? '{y}' : v === '21' ? '{yy}' : fail(loc + ' year ' + v);
        case 'day': return v === '7' ? '{d}' : v === '07' ? '{dd}' : fail(loc + ' day ' + v);
        case 'hour': {
          const c = {h11: 'K', h12: 'h', h23: 'H', h24: 'k'}[hc];
          return v.length === 2 && v[0] === '0' ? '{' + c + c + '}' : '{' + c + '}';
        }
        case 'minute': return v === '04' ? '{mm}' : v === '4' ? '{m}' : fail(loc + ' minute ' + v);
        case 'second': return v === '05' ? '{ss}' : v === '5' ? '{s}' : fail(loc + ' second ' + v);
        case 'dayPeriod': return '{a}';
        case 'era': return '{G}';
        case 'timeZoneName': return o.timeStyle === 'full' ? (names.zzzz = [v], '{zzzz}') : (names.z = [v], '{z}');
        case 'month': {
          if (v === '1') return '{M}';
          if (v === '01') return '{MM}';
          const w = W[o.month] || W[o.dateStyle === 'medium' ? 'short' : 'long'];
          const a = months(o, i);
          const f = ref('M', w);
          if (eq(a, f)) return '{M' + w + '}';
          if (names['L' + w] && !eq(names['L' + w], a)) fail(loc + ' two standalone month forms');
          names['L' + w] = a;
          return '{L' + w + '}';
        }
        case 'weekday': {
          const w = W[o.weekday] || 4;
          const a = days(o, i);
          if (eq(a, ref('E', w))) return '{E}';
          for (const x of [3, 4, 5]) {
            const so = {weekday: ['', '', '', 'short', 'long', 'narrow'][x]};
            names['c' + x] = days(so, 0);
          }
          if (!eq(a, names['c' + w])) fail(loc + ' weekday form ' + a);
          return '{c}';
        }
        default: fail(loc + ' part ' + p.type);
      }
    }).join('');
  }
  const MC = {'': undefined, M: 'numeric', MMM: 'short', MMMM: 'long', MMMMM: 'narrow'};
  const date = {};
  for (const E of ['', 'E']) for (const G of ['', 'G']) for (const y of ['', 'y']) for (const M of Object.keys(MC)) for (const d of ['', 'd']) {
    const key = E + G + y + M + d;
    if (!key) continue;
    const o = {};
    if (E) o.weekday = 'short';
    if (G) o.era = 'short';
    if (y) o.year = 'numeric';
    if (M) o.month = MC[M];
    if (d) o.day = 'numeric';
    date[key] = tokens(o);
  }
  const time = {};
  for (const h of ['', 'h', 'H']) for (const m of ['', 'm']) for (const s of ['', 's']) {
    const key = h + m + s;
    if (!key || (!h && key !== (m + s))) continue;
    const o = {};
    if (h) { o.hour = 'numeric'; o.hour12 = h === 'h'; }
    if (m) o.minute = 'numeric';
    if (s) o.second = 'numeric';
    time[key] = tokens(o);
  }
  // The glue of a date and a time: ICU picks it by the date's month
  // width and weekday (full, long, medium, short).
  const glue = {};
  const cls = (k) => k.includes('MMMM') && !k.includes('MMMMM') ? (k.includes('E') ? 'full' : 'long') : k.includes('MMM') && !k.includes('MMMMM') ? 'medium' : 'short';
  const canon = ['EyMMMMd', 'yMMMMd', 'yMMMd', 'yMd'];
  for (const k of canon.concat(Object.keys(date).filter((x) => !canon.includes(x)))) {
    const o = {hour: 'numeric', minute: 'numeric', hour12: false};
    const dk = {};
    if (k.includes('E')) dk.weekday = 'short';
    if (k.includes('G')) dk.era = 'short';
    if (k.includes('y')) dk.year = 'numeric';
    const M = (k.match(/M+/) || [''])[0];
    if (M) dk.month = MC[M];
    if (k.endsWith('d')) dk.day = 'numeric';
    const all = new Intl.DateTimeFormat(loc, Object.assign({timeZone: 'UTC'}, dk, o)).format(T);
    const ds = new Intl.DateTimeFormat(loc, Object.assign({timeZone: 'UTC'}, dk)).format(T);
    const ts = new Intl.DateTimeFormat(loc, Object.assign({timeZone: 'UTC'}, o)).format(T);
    const at = all.indexOf(ds), tt = all.indexOf(ts);
    if (at < 0 || tt < 0 || (at < tt ? at + ds.length > tt : tt + ts.length > at)) continue; // ICU merged the fields (era or weekday alone): the class's glue
    const g = all.replace(ds, '{1}').replace(ts, '{0}');
    const c = cls(k);
    if (!glue[c]) glue[c] = g;
    else if (glue[c] !== g) glue[k] = g; // this field set's own
  }
  const styles = {};
  for (const s of ['full', 'long', 'medium', 'short']) {
    styles['date.' + s] = tokens({dateStyle: s});
    styles['time.' + s] = tokens({timeStyle: s});
    styles['time12.' + s] = tokens({timeStyle: s, hour12: true});
    styles['time23.' + s] = tokens({timeStyle: s, hour12: false});
    const all = new Intl.DateTimeFormat(loc, {timeZone: 'UTC', dateStyle: s, timeStyle: 'short'}).format(T);
    const ds = new Intl.DateTimeFormat(loc, {timeZone: 'UTC', dateStyle: s}).format(T);
    const ts = new Intl.DateTimeFormat(loc, {timeZone: 'UTC', timeStyle: 'short'}).format(T);
    styles['glue.' + s] = all.startsWith(ds) ? '{1}' + all.slice(ds.length, all.length - ts.length) + '{0}' : fail(loc + ' style glue');
  }
  const hourCycle = new Intl.DateTimeFormat(loc, {hour: 'numeric'}).resolvedOptions().hourCycle;
  // Numbers: symbols from the library (checked), the rest from ICU.
  const n = new Intl.NumberFormat(loc, {minimumFractionDigits: 1}).format(1234567.5);
  if (n !== L.number[0]) fail(loc + ' number ' + n + ' vs library ' + L.number[0]);
  const minGroup = new Intl.NumberFormat(loc).format(1234).length === 4 ? 2 : 1;
  const tpl = (o, x) => new Intl.NumberFormat(loc, o).formatToParts(x).map((p) => ['integer', 'group', 'decimal', 'fraction'].includes(p.type) ? '\0' : p.type === 'currency' ? '{c}' : p.value).join('').replace(/\0+/g, '{n}');
  const percent = [tpl({style: 'percent'}, 0.5), tpl({style: 'percent'}, -0.5)];
  const currency = {};
  for (const c of CURRENCIES) currency[c] = [tpl({style: 'currency', currency: c}, 1234.5), tpl({style: 'currency', currency: c}, -1234.5), sym(c)];
  function sym(c) { return new Intl.NumberFormat(loc, {style: 'currency', currency: c}).formatToParts(1).find((p) => p.type === 'currency').value; }
  const code = [tpl({style: 'currency', currency: 'XYZ'}, 1234.5), tpl({style: 'currency', currency: 'XYZ'}, -1234.5)];
  const sign = new Intl.NumberFormat(loc).formatToParts(-1).find((p) => p.type === 'minusSign').value;
  return {date, time, glue, styles, names, hourCycle, minGroup, percent, currency, code, sign};
}
const CURRENCIES = ['USD', 'EUR', 'GBP', 'JPY', 'CNY', 'INR', 'BRL', 'CAD', 'AUD', 'CHF', 'MXN', 'KRW', 'SEK', 'NOK', 'DKK', 'PLN', 'RUB', 'TRY', 'ZAR', 'HKD'];
const q = JSON.stringify;
const map = (m, ind) => '{\n' + Object.keys(m).sort().map((k) => ind + '\t' + q(k) + ': ' + (Array.isArray(m[k]) ? '{' + m[k].map(q).join(', ') + '}' : q(m[k])) + ',').join('\n') + '\n' + ind + '}';
const digits = {};
let out = '// Code generated by scripts/intlgen from Node ' + process.version + ' (ICU ' + process.versions.icu + ', CLDR ' + process.versions.cldr + '); DO NOT EDIT.\n\npackage transform\n\n';
out += 'var intlData = map[string]*intlLocale{\n';
for (const loc of LOCALES) {
  const d = gen(loc);
  out += '\t' + q(loc) + ': {\n';
  out += '\t\thourCycle: ' + q(d.hourCycle) + ',\n\t\tminGroup: ' + d.minGroup + ',\n\t\tsign: ' + q(d.sign) + ',\n';
  out += '\t\tpercent: [2]string{' + d.percent.map(q).join(', ') + '},\n';
  out += '\t\tcode: [2]string{' + d.code.map(q).join(', ') + '},\n';
  out += '\t\tcurrency: map[string][3]string' + map(d.currency, '\t\t') + ',\n';
  out += '\t\tnames: map[string][]string' + map(d.names, '\t\t') + ',\n';
  out += '\t\tglue: map[string]string' + map(d.glue, '\t\t') + ',\n';
  out += '\t\tstyles: map[string]string' + map(d.styles, '\t\t') + ',\n';
  out += '\t\tpatterns: map[string]string' + map(Object.assign({}, d.date, d.time), '\t\t') + ',\n';
  out += '\t},\n';
}
out += '}\n\n';
// Minor units of the currencies whose Intl default is not 2 digits.
for (const c of Intl.supportedValuesOf('currency')) {
  const f = new Intl.NumberFormat('en', {style: 'currency', currency: c}).resolvedOptions().maximumFractionDigits;
  if (f !== 2) digits[c] = f;
}
out += '// currencyDigits are the fraction digits of currencies other than 2.\nvar currencyDigits = map[string]int' + map(digits, '') + '\n';
process.stdout.write(out);
