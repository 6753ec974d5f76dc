package transform

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// intlCases are expressions and what Node 20 (full ICU, TZ=UTC) gives
// for them, written out: formatted strings, or the error's name and
// message.
var intlCases = [][2]string{
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('en-GB', {weekday: 'long'})", "Wednesday"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString()", "1/27/2021"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleTimeString()", "3:04:05 PM"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString()", "1/27/2021, 3:04:05 PM"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('en-GB')", "27/01/2021"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('en-GB')", "27/01/2021, 15:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('de-DE')", "27.1.2021, 15:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('fr-FR')", "27/01/2021 15:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('es-ES')", "27/1/2021, 15:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('it-IT')", "27/01/2021, 15:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('pt-BR')", "27/01/2021, 15:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('nl-NL')", "27-1-2021, 15:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('ja-JP')", "2021/1/27 15:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('de-DE', {weekday: 'long', year: 'numeric', month: 'long', day: 'numeric'})", "Mittwoch, 27. Januar 2021"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('fr-FR', {weekday: 'short', month: 'short', day: 'numeric'})", "mer. 27 janv."},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('es-ES', {month: 'short', year: 'numeric'})", "ene 2021"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('nl-NL', {month: 'short', day: 'numeric'})", "27 jan"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('ja-JP', {year: 'numeric', month: 'long', day: 'numeric', weekday: 'short'})", "2021年1月27日(水)"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('en-US', {year: '2-digit', month: '2-digit', day: '2-digit'})", "01/27/21"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('en-US', {era: 'short', year: 'numeric'})", "2021 AD"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('de-DE', {month: 'short'})", "Jan"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleDateString('de-DE', {weekday: 'short'})", "Mi"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleTimeString('en-US', {hour: '2-digit', minute: '2-digit'})", "03:04 PM"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleTimeString('en-GB', {hour: 'numeric', minute: 'numeric', hour12: true})", "3:04 pm"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleTimeString('en-US', {hour12: false})", "15:04:05"},
	{"new Date('2021-01-27T00:04:05Z').toLocaleTimeString('en-US', {hour12: false})", "24:04:05"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleTimeString('en-US', {timeZone: 'America/New_York'})", "10:04:05 AM"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('en-US', {timeZone: 'Asia/Kolkata'})", "1/27/2021, 8:34:05 PM"},
	{"new Date('2021-01-27T15:04:05.123Z').toLocaleString('de-DE', {timeZone: 'Europe/Berlin', dateStyle: 'full', timeStyle: 'short'})", "Mittwoch, 27. Januar 2021 um 16:04"},
	{"new Date('2021-07-01T12:00:00Z').toLocaleString('en-GB', {timeZone: 'Europe/London'})", "01/07/2021, 13:00:00"},
	{"new Intl.DateTimeFormat('en-US', {dateStyle: 'full', timeStyle: 'long'}).format(new Date('2021-01-27T15:04:05.123Z'))", "Wednesday, January 27, 2021 at 3:04:05 PM UTC"},
	{"new Intl.DateTimeFormat('fr-FR', {dateStyle: 'long', timeStyle: 'medium'}).format(new Date('2021-01-27T15:04:05.123Z'))", "27 janvier 2021 à 15:04:05"},
	{"new Intl.DateTimeFormat('pt-BR', {dateStyle: 'medium'}).format(new Date('2021-01-27T15:04:05.123Z'))", "27 de jan. de 2021"},
	{"new Intl.DateTimeFormat('it-IT', {dateStyle: 'short', timeStyle: 'short'}).format(new Date('2021-01-27T15:04:05.123Z'))", "27/01/21, 15:04"},
	{"new Intl.DateTimeFormat('ja-JP', {dateStyle: 'full'}).format(new Date('2021-01-27T15:04:05.123Z'))", "2021年1月27日水曜日"},
	{"new Intl.DateTimeFormat('en-GB', {timeStyle: 'full'}).format(new Date('2021-01-27T15:04:05.123Z'))", "15:04:05 Coordinated Universal Time"},
	{"new Intl.DateTimeFormat().format(new Date('2021-01-27T15:04:05.123Z'))", "1/27/2021"},
	{"new Intl.DateTimeFormat('en').format(0)", "1/1/1970"},
	{"JSON.stringify(new Intl.DateTimeFormat('en-GB', {day: 'numeric', month: 'long', hour: 'numeric', minute: 'numeric'}).formatToParts(new Date('2021-01-27T15:04:05.123Z')))", "[{\"type\":\"day\",\"value\":\"27\"},{\"type\":\"literal\",\"value\":\" \"},{\"type\":\"month\",\"value\":\"January\"},{\"type\":\"literal\",\"value\":\" at \"},{\"type\":\"hour\",\"value\":\"15\"},{\"type\":\"literal\",\"value\":\":\"},{\"type\":\"minute\",\"value\":\"04\"}]"},
	{"JSON.stringify(new Intl.DateTimeFormat('en-US', {hour: 'numeric', minute: 'numeric'}).formatToParts(new Date('2021-01-27T15:04:05.123Z')))", "[{\"type\":\"hour\",\"value\":\"3\"},{\"type\":\"literal\",\"value\":\":\"},{\"type\":\"minute\",\"value\":\"04\"},{\"type\":\"literal\",\"value\":\" \"},{\"type\":\"dayPeriod\",\"value\":\"PM\"}]"},
	{"new Date('2021-03-05T09:08:07Z').toLocaleString('en-GB')", "05/03/2021, 09:08:07"},
	{"new Date('2021-03-05T09:08:07Z').toLocaleString('de-DE')", "5.3.2021, 09:08:07"},
	{"new Date('2021-03-05T09:08:07Z').toLocaleDateString('ja-JP')", "2021/3/5"},
	{"JSON.stringify(new Intl.DateTimeFormat('de', {timeZone: 'Europe/Berlin', month: 'long'}).resolvedOptions())", "{\"locale\":\"de\",\"calendar\":\"gregory\",\"numberingSystem\":\"latn\",\"timeZone\":\"Europe/Berlin\",\"month\":\"long\"}"},
	{"JSON.stringify(new Intl.DateTimeFormat('fr-CA').resolvedOptions().locale)", "\"fr-CA\""},
	{"new Intl.DateTimeFormat('xx').resolvedOptions().locale", "en-US"},
	{"new Intl.DateTimeFormat(['zz', 'de-DE']).format(new Date('2021-01-27T15:04:05.123Z'))", "27.1.2021"},
	{"new Date(NaN).toLocaleDateString('en-GB')", "Invalid Date"},
	{"new Date(NaN).toLocaleString()", "Invalid Date"},
	{"(1234567.891).toLocaleString()", "1,234,567.891"},
	{"(1234567.891).toLocaleString('de-DE')", "1.234.567,891"},
	{"(1234567.891).toLocaleString('fr-FR')", "1 234 567,891"},
	{"(1234.5).toLocaleString('es-ES')", "1234,5"},
	{"(12345.5).toLocaleString('es-ES')", "12.345,5"},
	{"(1234.5).toLocaleString('it-IT')", "1234,5"},
	{"(0.125).toLocaleString('en', {maximumFractionDigits: 2})", "0.13"},
	{"(1.005).toLocaleString('en', {maximumFractionDigits: 2})", "1.01"},
	{"(5).toLocaleString('en', {minimumFractionDigits: 2})", "5.00"},
	{"(-0).toLocaleString()", "-0"},
	{"NaN.toLocaleString('de')", "NaN"},
	{"(-Infinity).toLocaleString('fr')", "-∞"},
	{"(1e21).toLocaleString('en-US')", "1,000,000,000,000,000,000,000"},
	{"(0.000001234).toLocaleString()", "0"},
	{"(123.456).toLocaleString('en', {maximumSignificantDigits: 2})", "120"},
	{"(1.5).toLocaleString('en', {minimumSignificantDigits: 3})", "1.50"},
	{"(7).toLocaleString('en', {minimumIntegerDigits: 3})", "007"},
	{"(1234.5).toLocaleString('en', {useGrouping: false})", "1234.5"},
	{"(0.256).toLocaleString('en-US', {style: 'percent'})", "26%"},
	{"(-0.256).toLocaleString('de-DE', {style: 'percent', minimumFractionDigits: 1})", "-25,6 %"},
	{"new Intl.NumberFormat('en-US', {style: 'currency', currency: 'USD'}).format(-1234.5)", "-$1,234.50"},
	{"new Intl.NumberFormat('de-DE', {style: 'currency', currency: 'EUR'}).format(1234.5)", "1.234,50 €"},
	{"new Intl.NumberFormat('ja-JP', {style: 'currency', currency: 'JPY'}).format(1234.5)", "￥1,235"},
	{"new Intl.NumberFormat('en-GB', {style: 'currency', currency: 'usd'}).format(1234.5)", "US$1,234.50"},
	{"new Intl.NumberFormat('pt-BR', {style: 'currency', currency: 'BRL'}).format(1234.5)", "R$ 1.234,50"},
	{"new Intl.NumberFormat('nl-NL', {style: 'currency', currency: 'EUR'}).format(-1234.5)", "€ -1.234,50"},
	{"new Intl.NumberFormat('fr-FR', {style: 'currency', currency: 'CHF'}).format(1234.5)", "1 234,50 CHF"},
	{"new Intl.NumberFormat('en-US', {style: 'currency', currency: 'KWD'}).format(1234.5)", "KWD 1,234.500"},
	{"new Intl.NumberFormat('en-US', {style: 'currency', currency: 'EUR', currencyDisplay: 'code'}).format(1234.5)", "EUR 1,234.50"},
	{"JSON.stringify(new Intl.NumberFormat('de-DE', {style: 'currency', currency: 'EUR'}).formatToParts(-1234.5))", "[{\"type\":\"minusSign\",\"value\":\"-\"},{\"type\":\"integer\",\"value\":\"1\"},{\"type\":\"group\",\"value\":\".\"},{\"type\":\"integer\",\"value\":\"234\"},{\"type\":\"decimal\",\"value\":\",\"},{\"type\":\"fraction\",\"value\":\"50\"},{\"type\":\"literal\",\"value\":\" \"},{\"type\":\"currency\",\"value\":\"€\"}]"},
	{"JSON.stringify(new Intl.NumberFormat('en', {maximumFractionDigits: 1}).resolvedOptions())", "{\"locale\":\"en\",\"numberingSystem\":\"latn\",\"style\":\"decimal\",\"minimumIntegerDigits\":1,\"minimumFractionDigits\":0,\"maximumFractionDigits\":1,\"useGrouping\":\"auto\",\"notation\":\"standard\",\"signDisplay\":\"auto\",\"roundingMode\":\"halfExpand\",\"roundingIncrement\":1,\"trailingZeroDisplay\":\"auto\",\"roundingPriority\":\"auto\"}"},
	{"[1, 2.5, 1000].map(new Intl.NumberFormat('de').format).join(' ')", "1 2,5 1.000"},
	{"new Intl.DateTimeFormat('en_US')", "RangeError: Incorrect locale information provided"},
	{"(1).toLocaleString('')", "no error"},
	{"new Date().toLocaleDateString('not a tag')", "RangeError: Incorrect locale information provided"},
	{"new Intl.DateTimeFormat('en', {timeZone: 'Mars/Base'})", "RangeError: Invalid time zone specified: Mars/Base"},
	{"new Intl.DateTimeFormat('en', {weekday: 'huge'})", "RangeError: Value huge out of range for Intl.DateTimeFormat options property weekday"},
	{"new Intl.DateTimeFormat('en', {dateStyle: 'full', month: 'long'})", "TypeError: Can't set option month when dateStyle is used"},
	{"new Date().toLocaleDateString('en', {timeStyle: 'short'})", "TypeError: Invalid option : timeStyle"},
	{"new Intl.DateTimeFormat('en').format(NaN)", "RangeError: Invalid time value"},
	{"new Intl.NumberFormat('en', {maximumFractionDigits: 21})", "RangeError: maximumFractionDigits value is out of range."},
	{"new Intl.NumberFormat('en', {style: 'currency'})", "TypeError: Currency code is required with currency style."},
	{"new Intl.NumberFormat('en', {style: 'currency', currency: 'US'})", "RangeError: Invalid currency code : US"},
	{"new Intl.NumberFormat('en', {minimumFractionDigits: 3, maximumFractionDigits: 1})", "RangeError: maximumFractionDigits value is out of range."},
	{"new Date().toLocaleString('en', {get weekday() { throw new Error('getter') }})", "Error: getter"},
	{"(1).toLocaleString('en', {get style() { throw new TypeError('getter') }})", "TypeError: getter"},
	{"Date.prototype.toLocaleDateString.call({})", "TypeError: Method Date.prototype.toLocaleDateString called on incompatible receiver #<Object>"},
}

// newTestInstance is an instance of a plugin that does nothing, for
// evaluating expressions in the transformation's runtime.
func newTestInstance(t *testing.T) *instance {
	t.Helper()
	prog, err := compile("index.js", "exports.processEvent = function(e){ return e }")
	if err != nil {
		t.Fatal(err)
	}
	dog := newWatchdog(time.Millisecond)
	in, err := newInstance(prog, map[string]any{}, nil, Limits{}.withDefaults(), dog, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestIntlAsNode: Intl, toLocale*String and their errors answer as Node
// does, in the supported locales, with time zones, styles and options.
func TestIntlAsNode(t *testing.T) {
	in := newTestInstance(t)
	for _, c := range intlCases {
		var got string
		err := in.bounded(func() error {
			v, err := in.vm.RunString("(function(){ try { return String(" + c[0] + ") } catch (e) { return e.name + ': ' + e.message } })()")
			if err == nil {
				got = v.String()
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: %v", c[0], err)
			continue
		}
		want := c[1]
		if want == "no error" {
			// An expression that does not throw in Node gives a value.
			if got == "" {
				t.Errorf("%s: empty", c[0])
			}
			continue
		}
		if got != want {
			t.Errorf("%s\n got %q\nwant %q", c[0], got, want)
		}
	}
}

// TestTimestampParserLocale: a plugin that names the day as PostHog's
// timestamp-parser does gets Node's answer through processEvent, and
// Date.now() is the event's time, so a replay names the same day.
func TestTimestampParserLocale(t *testing.T) {
	props := runOne(t, `
exports.processEvent = function(event) {
  var d = new Date('2021-01-27T10:00:00Z');
  event.properties.day_of_the_week = d.toLocaleDateString('en-GB', {weekday: 'long'});
  event.properties.day = d.toLocaleDateString('en-GB', {day: 'numeric'});
  event.properties.month = d.toLocaleDateString('en-GB', {month: 'long'});
  event.properties.hour = d.toLocaleTimeString('en-GB', {hour: 'numeric'});
  event.properties.now_day = new Date(Date.now()).toLocaleDateString('en-GB', {weekday: 'long'});
  event.properties.price = (1234.5).toLocaleString('de-DE', {style: 'currency', currency: 'EUR'});
  return event;
}`, sample("pageview"))
	// Node 20: Wednesday 27 January 10 1.234,50 €; the sample event's
	// timestamp, 2026-11-20, is a Friday.
	want := map[string]any{"day_of_the_week": "Wednesday", "day": "27", "month": "January", "hour": "10", "now_day": "Friday", "price": "1.234,50\u00a0€"}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("%s = %q, want %q", k, props[k], v)
		}
	}
}

// TestIntlHostileOptions: options a plugin controls end in a catchable
// error or a bounded result, never a Go panic or an unbounded string.
func TestIntlHostileOptions(t *testing.T) {
	in := newTestInstance(t)
	for _, src := range []string{
		`(1).toLocaleString('en', {minimumFractionDigits: 1e9})`,
		`(1).toLocaleString('en', {maximumSignificantDigits: -1})`,
		`(1).toLocaleString('en', {minimumIntegerDigits: 22})`,
		`new Date(0).toLocaleString('a'.repeat(300))`,
		`new Date(0).toLocaleString({length: 3, 0: 'en', 1: 7})`,
		`new Date(0).toLocaleString('en', {timeZone: '../../../etc/passwd'})`,
		`new Date(0).toLocaleString('en', {timeZone: {toString: function(){ throw new Error('tz') }}})`,
		`new Intl.NumberFormat('en', {style: 'unit', unit: 'meter'})`,
		`new Intl.NumberFormat('en', {notation: 'compact'})`,
		`Intl.DateTimeFormat.prototype.formatToParts.call({}, 0)`,
		`new Date(8.64e15).toLocaleString('ja-JP', {era: 'long', year: 'numeric'}) && null.x`,
	} {
		err := in.bounded(func() error {
			_, err := in.vm.RunString(src)
			return err
		})
		if err == nil {
			t.Errorf("%s: no error", src)
			continue
		}
		if strings.Contains(err.Error(), "GoError") || errors.Is(err, ErrTimeout) {
			t.Errorf("%s: %v", src, err)
		}
	}
	v, err := in.vm.RunString(`(1e308).toLocaleString('en', {maximumFractionDigits: 20, minimumFractionDigits: 20}).length`)
	if err != nil || v.ToInteger() != 432 { // Node 20: 309 digits, 102 commas, the point, 20 zeros
		t.Errorf("1e308 with 20 digits: %v %v", v, err)
	}
}

// FuzzIntl: any locale tag, time zone name, option value and number
// formats or throws a JavaScript error; none panics.
func FuzzIntl(f *testing.F) {
	f.Add("en-GB", "Europe/London", "long", 1234.5, int64(1611741845000))
	f.Add("de-DE-u-hc-h12", "utc", "2-digit", -0.005, int64(-62198755200000))
	f.Add("x-private", "America/New_York", "narrow", 1e21, int64(8640000000000000))
	f.Add("zh-Hant-TW", "", "short", 5e-324, int64(0))
	in := newTestInstance(&testing.T{})
	f.Fuzz(func(t *testing.T, tag, zone, width string, x float64, ms int64) {
		_ = in.vm.Set("tag", tag)
		_ = in.vm.Set("zone", zone)
		_ = in.vm.Set("w", width)
		_ = in.vm.Set("x", x)
		_ = in.vm.Set("ms", ms)
		err := in.bounded(func() error {
			_, err := in.vm.RunString(`(function(){
var out = [];
function tr(f){ try { out.push(f()); } catch (e) { if (!(e instanceof Error)) throw e; } }
var z = zone === '' ? undefined : zone;
tr(function(){ return new Date(ms).toLocaleString(tag, {timeZone: z, weekday: w, month: w, hour: w}); });
tr(function(){ return new Date(ms).toLocaleDateString(tag, {dateStyle: w, timeZone: z}); });
tr(function(){ return new Intl.DateTimeFormat(tag, {timeStyle: w, timeZone: z}).formatToParts(ms); });
tr(function(){ return x.toLocaleString(tag, {style: w === 'long' ? 'percent' : 'decimal', maximumFractionDigits: Math.abs(ms) % 21}); });
tr(function(){ return new Intl.NumberFormat(tag, {style: 'currency', currency: w.slice(0, 3) || 'EUR'}).format(x); });
tr(function(){ return x.toLocaleString(tag, {maximumSignificantDigits: Math.abs(ms) % 22}); });
return out;
})()`)
			return err
		})
		if err != nil {
			t.Fatalf("%q %q %q %v %d: %v", tag, zone, width, x, ms, err)
		}
	})
}
