package transform

import (
	"fmt"
	"strings"
	"sync"
	"time"
	// The IANA zone rules, so that a timeZone option works on a machine
	// without /usr/share/zoneinfo (a minimal container).
	_ "time/tzdata"

	"github.com/dop251/goja"
	"github.com/go-playground/locales"
	"github.com/go-playground/locales/de_DE"
	"github.com/go-playground/locales/en_GB"
	"github.com/go-playground/locales/en_US"
	"github.com/go-playground/locales/es_ES"
	"github.com/go-playground/locales/fr_FR"
	"github.com/go-playground/locales/it_IT"
	"github.com/go-playground/locales/ja_JP"
	"github.com/go-playground/locales/nl_NL"
	"github.com/go-playground/locales/pt_BR"
)

// Intl gives a transformation what Node gives it for dates and numbers
// (docs/plugins.md, "Compatibility", row Intl): Intl.DateTimeFormat,
// Intl.NumberFormat, and Date's and Number's toLocale*String with a locale
// and options. The options are read in JavaScript (intlJS), in Node's
// order, so that a getter runs and throws as in Node; the formatting is
// here. Names and number symbols come from go-playground/locales (CLDR
// generated for Go); what it lacks or has from an older CLDR (which
// pattern ICU picks for a set of fields, eras, day periods, currency
// symbols, a few renamed abbreviations) is intl_data.go, generated from
// Node's ICU by scripts/intlgen. The default time zone is UTC and the
// default locale en-US, whatever the machine's, so that a replay formats
// the same.

// intlLocale is one supported locale's data (intl_data.go).
type intlLocale struct {
	hourCycle string
	minGroup  int    // grouping starts at this many digits over 3 (es: 2)
	sign      string // the minus sign
	percent   [2]string
	code      [2]string // a currency shown by its code: positive, negative
	currency  map[string][3]string
	names     map[string][]string
	glue      map[string]string
	styles    map[string]string
	patterns  map[string]string
	lib       locales.Translator
	decimal   string
	group     string
}

// intlLibs are the library's translators of the supported locales.
var intlLibs = map[string]func() locales.Translator{
	"en-US": en_US.New, "en-GB": en_GB.New, "de-DE": de_DE.New, "fr-FR": fr_FR.New, "es-ES": es_ES.New,
	"it-IT": it_IT.New, "pt-BR": pt_BR.New, "nl-NL": nl_NL.New, "ja-JP": ja_JP.New,
}

// intlLanguages maps a language to its supported locale: a tag whose
// language is here but whose region is not formats as this locale.
var intlLanguages = map[string]string{
	"en": "en-US", "de": "de-DE", "fr": "fr-FR", "es": "es-ES", "it": "it-IT", "pt": "pt-BR", "nl": "nl-NL", "ja": "ja-JP",
}

var intlInit sync.Once

// localeData is the data of a resolved locale; its library translator and
// number symbols are set on first use.
func localeData(tag string) *intlLocale {
	intlInit.Do(func() {
		for k, d := range intlData {
			d.lib = intlLibs[k]()
			// The symbols, read from the library's own formatting.
			s := d.lib.FmtNumber(1234567.5, 1)
			d.group = s[1:strings.Index(s, "234")]
			d.decimal = s[strings.LastIndex(s, "567")+3 : len(s)-1]
		}
	})
	if d, ok := intlData[tag]; ok {
		return d
	}
	lang, _, _ := strings.Cut(tag, "-")
	if l, ok := intlLanguages[strings.ToLower(lang)]; ok {
		return intlData[l]
	}
	return intlData["en-US"]
}

// maxLocaleTag bounds a locale tag (Node has no bound; a real tag is a
// few dozen characters).
const maxLocaleTag = 256

// canonicalLocale checks a BCP 47 language tag's form and gives it in
// canonical case without its extensions (which the formatting ignores);
// false when it is not a tag (Node: RangeError "Incorrect locale
// information provided").
func canonicalLocale(tag string) (string, bool) {
	if tag == "" || len(tag) > maxLocaleTag {
		return "", false
	}
	subs := strings.Split(tag, "-")
	for _, s := range subs {
		if s == "" || len(s) > 8 || strings.IndexFunc(s, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) >= 0 {
			return "", false
		}
	}
	lang := strings.ToLower(subs[0])
	if len(lang) < 2 || len(lang) == 4 || !alpha(lang) {
		return "", false
	}
	out := []string{lang}
	i := 1
	if i < len(subs) && len(subs[i]) == 4 && alpha(subs[i]) { // script
		out = append(out, strings.ToUpper(subs[i][:1])+strings.ToLower(subs[i][1:]))
		i++
	}
	if i < len(subs) && (len(subs[i]) == 2 && alpha(subs[i]) || len(subs[i]) == 3 && digits(subs[i])) { // region
		out = append(out, strings.ToUpper(subs[i]))
		i++
	}
	for ; i < len(subs); i++ { // variants, then extensions
		s := subs[i]
		if len(s) == 1 {
			// An extension or private use: singleton then subtags of
			// 2-8 (private use: 1-8) characters; dropped.
			if i+1 >= len(subs) {
				return "", false
			}
			for _, e := range subs[i+1:] {
				if len(e) < 2 && strings.ToLower(s) != "x" {
					return "", false
				}
			}
			break
		}
		if len(s) < 4 || len(s) == 4 && !(s[0] >= '0' && s[0] <= '9') {
			return "", false
		}
		out = append(out, strings.ToLower(s))
	}
	return strings.Join(out, "-"), true
}

func alpha(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }) < 0
}

func digits(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// zones caches loaded time zones by the name asked for (a bounded set:
// the IANA names, plus at most maxBadZones names that are not).
var zones sync.Map

const maxBadZones = 1024

var badZones struct {
	sync.Mutex
	n int
}

// loadZone is a time zone by its IANA name (case as in the database;
// UTC, GMT, Etc/UTC and Etc/GMT are UTC), and the name resolvedOptions
// reports; nil when Node would throw "Invalid time zone specified".
func loadZone(name string) (*time.Location, string) {
	switch strings.ToUpper(name) {
	case "UTC", "GMT", "ETC/UTC", "ETC/GMT", "ETC/UCT", "UCT", "ETC/ZULU", "ZULU", "ETC/UNIVERSAL", "UNIVERSAL", "ETC/GREENWICH", "GREENWICH":
		return time.UTC, "UTC"
	}
	if name == "" || len(name) > 64 || strings.HasPrefix(name, "/") || strings.Contains(name, "..") || name == "Local" {
		return nil, ""
	}
	if v, ok := zones.Load(name); ok {
		loc, _ := v.(*time.Location)
		return loc, name
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		badZones.Lock()
		defer badZones.Unlock()
		if badZones.n < maxBadZones {
			badZones.n++
			zones.Store(name, (*time.Location)(nil))
		}
		return nil, ""
	}
	zones.Store(name, loc)
	return loc, name
}

// enableIntl installs Intl and the toLocale*String methods.
func (in *instance) enableIntl() error {
	vm := in.vm
	helpers := map[string]func(goja.FunctionCall) goja.Value{
		"__personhub_locale": func(c goja.FunctionCall) goja.Value {
			tag, ok := canonicalLocale(c.Argument(0).String())
			if !ok {
				panic(rangeError(vm, "Incorrect locale information provided"))
			}
			return vm.ToValue(tag)
		},
		"__personhub_supported": func(c goja.FunctionCall) goja.Value {
			_, ok := intlData[c.Argument(0).String()]
			if !ok {
				lang, _, _ := strings.Cut(c.Argument(0).String(), "-")
				_, ok = intlLanguages[lang]
			}
			return vm.ToValue(ok)
		},
		"__personhub_zone": func(c goja.FunctionCall) goja.Value {
			name := c.Argument(0).String()
			loc, canon := loadZone(name)
			if loc == nil {
				panic(rangeError(vm, "Invalid time zone specified: "+name))
			}
			return vm.ToValue(canon)
		},
		"__personhub_hourcycle": func(c goja.FunctionCall) goja.Value {
			d := localeData(c.Argument(0).String())
			return vm.ToValue(hourCycles(d)[c.Argument(1).String()])
		},
		"__personhub_fmtdate": func(c goja.FunctionCall) goja.Value {
			o, err := dateOptionsOf(c.Argument(1))
			if err != nil {
				panic(vm.NewTypeError(err.Error()))
			}
			return in.partsValue(formatDate(c.Argument(0).ToFloat(), o))
		},
		"__personhub_cdigits": func(c goja.FunctionCall) goja.Value {
			if n, ok := currencyDigits[c.Argument(0).String()]; ok {
				return vm.ToValue(n)
			}
			return vm.ToValue(2)
		},
		"__personhub_fmtnum": func(c goja.FunctionCall) goja.Value {
			o, err := numberOptionsOf(c.Argument(1))
			if err != nil {
				panic(vm.NewTypeError(err.Error()))
			}
			return in.partsValue(formatNumber(c.Argument(0).ToFloat(), o))
		},
	}
	for name, fn := range helpers {
		if err := vm.Set(name, fn); err != nil {
			return err
		}
	}
	_, err := vm.RunString(intlJS)
	return err
}

// part is one piece of a formatted value, as formatToParts gives it.
type part struct{ typ, value string }

func (in *instance) partsValue(ps []part) goja.Value {
	out := make([]any, len(ps))
	for i, p := range ps {
		o := in.vm.NewObject()
		_ = o.Set("type", p.typ)
		_ = o.Set("value", p.value)
		out[i] = o
	}
	return in.vm.ToValue(out)
}

// hourCycles are the locale's cycles for hour12 true ("12"), hour12 false
// ("24") and neither ("default"), read from its patterns' hour tokens.
func hourCycles(d *intlLocale) map[string]string {
	cyc := func(p string) string {
		switch {
		case strings.Contains(p, "{K"):
			return "h11"
		case strings.Contains(p, "{k"):
			return "h24"
		case strings.Contains(p, "{H"):
			return "h23"
		}
		return "h12"
	}
	return map[string]string{"12": cyc(d.patterns["h"]), "24": cyc(d.patterns["H"]), "default": d.hourCycle}
}

// dateOptions are a DateTimeFormat's resolved options (intlJS resolves
// and checks them; strings are the option values or "").
type dateOptions struct {
	locale, timeZone                                             string
	weekday, era, year, month, day, hour, minute, second, tzName string
	hourCycle, dateStyle, timeStyle                              string
}

func dateOptionsOf(v goja.Value) (dateOptions, error) {
	var o dateOptions
	obj, ok := v.(*goja.Object)
	if !ok {
		return o, fmt.Errorf("options: not an object")
	}
	get := func(k string) string { return optString(obj, k) }
	o.locale, o.timeZone = get("locale"), get("timeZone")
	o.weekday, o.era, o.year, o.month, o.day = get("weekday"), get("era"), get("year"), get("month"), get("day")
	o.hour, o.minute, o.second, o.tzName = get("hour"), get("minute"), get("second"), get("timeZoneName")
	o.hourCycle, o.dateStyle, o.timeStyle = get("hourCycle"), get("dateStyle"), get("timeStyle")
	return o, nil
}

// rangeError is a RangeError of the runtime's realm.
func rangeError(vm *goja.Runtime, msg string) *goja.Object {
	c, _ := goja.AssertConstructor(vm.Get("RangeError"))
	if c == nil {
		return vm.NewGoError(fmt.Errorf("%s", msg))
	}
	e, err := c(nil, vm.ToValue(msg))
	if err != nil {
		return vm.NewGoError(fmt.Errorf("%s", msg))
	}
	return e
}

// optString is a resolved option's value, "" when absent.
func optString(obj *goja.Object, k string) string {
	x := obj.Get(k)
	if x == nil || goja.IsUndefined(x) {
		return ""
	}
	return x.String()
}
