package transform

// intlJS defines Intl.DateTimeFormat, Intl.NumberFormat and the
// toLocale*String methods over the Go formatters (intl.go), which it then
// hides. Options are read as ECMA-402 reads them, in its order: a getter
// runs once, a value out of range is a RangeError, an option that cannot
// go with another a TypeError, with Node's messages.
const intlJS = `(function(g){
var H = {loc: g.__personhub_locale, sup: g.__personhub_supported, zone: g.__personhub_zone, hc: g.__personhub_hourcycle,
  date: g.__personhub_fmtdate, num: g.__personhub_fmtnum, cdigits: g.__personhub_cdigits};
['__personhub_locale', '__personhub_supported', '__personhub_zone', '__personhub_hourcycle', '__personhub_fmtdate', '__personhub_fmtnum', '__personhub_cdigits'].forEach(function(k){ delete g[k]; });
var R = Symbol('resolved'), A = Symbol('arguments');
function put(o, k, v){ Object.defineProperty(o, k, {value: v, writable: true, configurable: true, enumerable: false}); }
function canonList(l){
  if (l === undefined) return [];
  var one = typeof l === 'string', O = one ? [l] : Object(l), n = one ? 1 : Math.min(Math.max(Math.trunc(Number(O.length)) || 0, 0), 9007199254740991), out = [];
  for (var k = 0; k < n; k++) {
    if (!(k in O)) continue;
    var v = O[k];
    if (typeof v !== 'string' && (typeof v !== 'object' || v === null)) throw new TypeError('Language ID should be string or object.');
    var t = H.loc(String(v));
    if (out.indexOf(t) < 0) out.push(t);
  }
  return out;
}
function locale(l){
  var list = canonList(l);
  for (var i = 0; i < list.length; i++) if (H.sup(list[i])) return list[i];
  return 'en-US';
}
function opts(o){
  if (o === undefined) return Object.create(null);
  if (o === null) throw new TypeError('Cannot convert undefined or null to object');
  return Object(o);
}
function str(o, k, allowed, what, fb){
  var v = o[k];
  if (v === undefined) return fb;
  v = String(v);
  if (allowed && allowed.indexOf(v) < 0) throw new RangeError('Value ' + v + ' out of range for ' + what + ' options property ' + k);
  return v;
}
function numOpt(o, k, lo, hi, fb){
  var v = o[k];
  if (v === undefined) return fb;
  v = Number(v);
  if (isNaN(v) || v < lo || v > hi) throw new RangeError(k + ' value is out of range.');
  return Math.floor(v);
}
var D = 'Intl.DateTimeFormat', TWO = ['2-digit', 'numeric'], NAME = ['narrow', 'short', 'long'], STYLE = ['full', 'long', 'medium', 'short'];
var DATEF = [['weekday', NAME], ['era', NAME], ['year', TWO], ['month', TWO.concat(NAME)], ['day', TWO]];
var TIMEF = [['dayPeriod', NAME], ['hour', TWO], ['minute', TWO], ['second', TWO]];
function resolveDate(l, options, required, defaults){
  var loc = locale(l), o = opts(options), r = {locale: loc, calendar: 'gregory', numberingSystem: 'latn'};
  str(o, 'localeMatcher', ['lookup', 'best fit'], D);
  str(o, 'calendar', null, D); str(o, 'numberingSystem', null, D);
  var h12 = o.hour12; h12 = h12 === undefined ? undefined : !!h12;
  var hcOpt = str(o, 'hourCycle', ['h11', 'h12', 'h23', 'h24'], D);
  var tz = o.timeZone;
  r.timeZone = tz === undefined ? 'UTC' : H.zone(String(tz));
  var f = {}, any = false;
  DATEF.concat(TIMEF).forEach(function(p){ f[p[0]] = str(o, p[0], p[1], D); });
  f.fractionalSecondDigits = numOpt(o, 'fractionalSecondDigits', 1, 3, undefined);
  f.timeZoneName = str(o, 'timeZoneName', ['short', 'long', 'shortOffset', 'longOffset', 'shortGeneric', 'longGeneric'], D);
  str(o, 'formatMatcher', ['basic', 'best fit'], D);
  var ds = str(o, 'dateStyle', STYLE, D), ts = str(o, 'timeStyle', STYLE, D);
  if (ds !== undefined || ts !== undefined) {
    for (var k in f) if (f[k] !== undefined) throw new TypeError("Can't set option " + k + ' when ' + (ds !== undefined ? 'dateStyle' : 'timeStyle') + ' is used');
    if (required === 'date' && ts !== undefined) throw new TypeError('Invalid option : timeStyle');
    if (required === 'time' && ds !== undefined) throw new TypeError('Invalid option : dateStyle');
  } else {
    var needDate = required !== 'time', needTime = required !== 'date', need = true;
    if (needDate) ['weekday', 'year', 'month', 'day'].forEach(function(k){ if (f[k] !== undefined) need = false; });
    if (needTime) ['dayPeriod', 'hour', 'minute', 'second', 'fractionalSecondDigits'].forEach(function(k){ if (f[k] !== undefined) need = false; });
    if (need && (defaults === 'date' || defaults === 'all')) f.year = f.month = f.day = 'numeric';
    if (need && (defaults === 'time' || defaults === 'all')) f.hour = f.minute = f.second = 'numeric';
  }
  if (f.hour !== undefined || ts !== undefined) {
    var hc = h12 !== undefined ? H.hc(loc, h12 ? '12' : '24') : hcOpt || H.hc(loc, 'default');
    r.hourCycle = hc; r.hour12 = hc === 'h11' || hc === 'h12';
  }
  ['weekday', 'era', 'year', 'month', 'day', 'dayPeriod', 'hour', 'minute', 'second', 'fractionalSecondDigits', 'timeZoneName'].forEach(function(k){ if (f[k] !== undefined) r[k] = f[k]; });
  if (r.hour !== undefined && r.minute !== undefined) r.minute = '2-digit';
  if (r.minute !== undefined && r.second !== undefined) r.second = '2-digit';
  if (ds !== undefined) r.dateStyle = ds;
  if (ts !== undefined) r.timeStyle = ts;
  return r;
}
function timeValue(d){
  var x = d === undefined ? Date.now() : Number(d);
  if (!isFinite(x) || Math.abs(x) > 8.64e15) throw new RangeError('Invalid time value');
  return Math.trunc(x) + 0;
}
function join(ps){ var s = ''; for (var i = 0; i < ps.length; i++) s += ps[i].value; return s; }
// V8 writes ICU's narrow no-break space (U+202F) in a formatted date as a
// plain space (web compatibility); formatToParts keeps it.
function joinDate(ps){ return join(ps).replace(/\u202f/g, ' '); }
function DateTimeFormat(l, o){
  if (!(this instanceof DateTimeFormat)) return new DateTimeFormat(l, o);
  put(this, R, resolveDate(l, o, 'any', 'date'));
}
function me(x, C, what){ if (x === null || typeof x !== 'object' || !(R in x) || !(x instanceof C)) throw new TypeError('Method ' + what + ' called on incompatible receiver ' + String(x)); return x[R]; }
Object.defineProperty(DateTimeFormat.prototype, 'format', {configurable: true, get: function(){
  var r = me(this, DateTimeFormat, 'get Intl.DateTimeFormat.prototype.format');
  return function(d){ return joinDate(H.date(timeValue(d), r)); };
}});
put(DateTimeFormat.prototype, 'formatToParts', function(d){ return H.date(timeValue(d), me(this, DateTimeFormat, 'Intl.DateTimeFormat.prototype.formatToParts')); });
put(DateTimeFormat.prototype, 'resolvedOptions', function(){ var r = me(this, DateTimeFormat, 'Intl.DateTimeFormat.prototype.resolvedOptions'), out = {}; for (var k in r) out[k] = r[k]; return out; });
put(DateTimeFormat, 'supportedLocalesOf', function(l){ return canonList(l).filter(function(t){ return H.sup(t); }); });
var N = 'Intl.NumberFormat';
function resolveNumber(l, options){
  var loc = locale(l), o = opts(options), r = {locale: loc, numberingSystem: 'latn'};
  str(o, 'localeMatcher', ['lookup', 'best fit'], N);
  str(o, 'numberingSystem', null, N);
  r.style = str(o, 'style', ['decimal', 'percent', 'currency', 'unit'], N, 'decimal');
  var cur = str(o, 'currency', null, N);
  if (cur !== undefined) { if (!/^[A-Za-z]{3}$/.test(cur)) throw new RangeError('Invalid currency code : ' + cur); cur = cur.toUpperCase(); }
  var cd = str(o, 'currencyDisplay', ['code', 'symbol', 'narrowSymbol', 'name'], N, 'symbol');
  var cs = str(o, 'currencySign', ['standard', 'accounting'], N, 'standard');
  var unit = str(o, 'unit', null, N);
  if (r.style === 'currency' && cur === undefined) throw new TypeError('Currency code is required with currency style.');
  if (r.style === 'unit') throw new RangeError('Intl.NumberFormat style unit is not supported in this runtime');
  if (r.style === 'currency') { r.currency = cur; r.currencyDisplay = cd; r.currencySign = cs; }
  var notation = str(o, 'notation', ['standard', 'scientific', 'engineering', 'compact'], N, 'standard');
  if (notation !== 'standard') throw new RangeError('Intl.NumberFormat notation ' + notation + ' is not supported in this runtime');
  var cdig = r.style === 'currency' ? H.cdigits(cur) : 0;
  var dmin = r.style === 'currency' ? cdig : 0, dmax = r.style === 'currency' ? cdig : r.style === 'percent' ? 0 : 3;
  r.minimumIntegerDigits = numOpt(o, 'minimumIntegerDigits', 1, 21, 1);
  var mnfd = o.minimumFractionDigits, mxfd = o.maximumFractionDigits, mnsd = o.minimumSignificantDigits, mxsd = o.maximumSignificantDigits;
  if (mnsd !== undefined || mxsd !== undefined) {
    mnsd = numOpt({v: mnsd}, 'v', 1, 21, 1); mxsd = numOpt({v: mxsd}, 'v', mnsd, 21, 21);
    r.minimumSignificantDigits = mnsd; r.maximumSignificantDigits = mxsd;
  } else {
    mnfd = numOpt({minimumFractionDigits: mnfd}, 'minimumFractionDigits', 0, 20, undefined);
    mxfd = numOpt({maximumFractionDigits: mxfd}, 'maximumFractionDigits', 0, 20, undefined);
    if (mnfd === undefined && mxfd === undefined) { mnfd = dmin; mxfd = dmax; }
    else if (mnfd === undefined) mnfd = Math.min(dmin, mxfd);
    else if (mxfd === undefined) mxfd = Math.max(dmax, mnfd);
    else if (mnfd > mxfd) throw new RangeError('maximumFractionDigits value is out of range.');
    r.minimumFractionDigits = mnfd; r.maximumFractionDigits = mxfd;
  }
  var ug = o.useGrouping;
  if (ug === undefined) ug = 'auto';
  else if (ug === true) ug = 'always';
  else if (ug === false || ug === null || ug === 0 || ug === '') ug = false;
  else { ug = String(ug); if (ug === 'true' || ug === 'false') ug = 'auto'; else if (['always', 'auto', 'min2'].indexOf(ug) < 0) throw new RangeError('Value ' + ug + ' out of range for ' + N + ' options property useGrouping'); }
  r.useGrouping = ug;
  r.notation = 'standard';
  r.signDisplay = str(o, 'signDisplay', ['auto', 'never', 'always', 'exceptZero', 'negative'], N, 'auto');
  r.roundingMode = 'halfExpand'; r.roundingIncrement = 1; r.trailingZeroDisplay = 'auto'; r.roundingPriority = 'auto';
  return r;
}
function numArgs(r){
  return {locale: r.locale, style: r.style, currency: r.currency, currencyDisplay: r.currencyDisplay, useGrouping: r.useGrouping === false ? 'false' : r.useGrouping,
    minimumIntegerDigits: r.minimumIntegerDigits, minimumFractionDigits: r.minimumFractionDigits || 0, maximumFractionDigits: r.maximumFractionDigits || 0,
    minimumSignificantDigits: r.minimumSignificantDigits || 0, maximumSignificantDigits: r.maximumSignificantDigits || 0};
}
function NumberFormat(l, o){
  if (!(this instanceof NumberFormat)) return new NumberFormat(l, o);
  var r = resolveNumber(l, o);
  put(this, R, r);
  put(this, A, numArgs(r));
}
Object.defineProperty(NumberFormat.prototype, 'format', {configurable: true, get: function(){
  me(this, NumberFormat, 'get Intl.NumberFormat.prototype.format');
  var a = this[A];
  return function(x){ return join(H.num(Number(x), a)); };
}});
put(NumberFormat.prototype, 'formatToParts', function(x){ me(this, NumberFormat, 'Intl.NumberFormat.prototype.formatToParts'); return H.num(Number(x), this[A]); });
put(NumberFormat.prototype, 'resolvedOptions', function(){ var r = me(this, NumberFormat, 'Intl.NumberFormat.prototype.resolvedOptions'), out = {}; for (var k in r) out[k] = r[k]; return out; });
put(NumberFormat, 'supportedLocalesOf', DateTimeFormat.supportedLocalesOf);
var Intl = {};
put(Intl, 'DateTimeFormat', DateTimeFormat);
put(Intl, 'NumberFormat', NumberFormat);
put(Intl, 'getCanonicalLocales', function(l){ return canonList(l); });
Object.defineProperty(Intl, Symbol.toStringTag, {value: 'Intl', configurable: true});
put(g, 'Intl', Intl);
var DP = Date.prototype, getTime = DP.getTime;
function receiver(x){ return x !== null && typeof x === 'object' ? '#<' + ((x.constructor && x.constructor.name) || 'Object') + '>' : String(x); }
function dateLocale(required, defaults, name){
  return function(l, o){
    var t;
    try { t = getTime.call(this); } catch (e) { throw new TypeError('Method Date.prototype.' + name + ' called on incompatible receiver ' + receiver(this)); }
    if (isNaN(t)) return 'Invalid Date';
    return joinDate(H.date(t, resolveDate(l, o, required, defaults)));
  };
}
put(DP, 'toLocaleDateString', dateLocale('date', 'date', 'toLocaleDateString'));
put(DP, 'toLocaleTimeString', dateLocale('time', 'time', 'toLocaleTimeString'));
put(DP, 'toLocaleString', dateLocale('any', 'all', 'toLocaleString'));
var valueOf = Number.prototype.valueOf;
put(Number.prototype, 'toLocaleString', function(l, o){ var x = valueOf.call(this); return join(H.num(x, numArgs(resolveNumber(l, o)))); });
})(this);`
