package transform

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"
)

// maxDateMs is the ECMAScript time value range.
const maxDateMs = 8.64e15

// formatDate formats a time value with resolved options: the pattern ICU
// picks for the fields (or the styles), then each field by the options'
// width, with the locale's names.
func formatDate(ms float64, o dateOptions) []part {
	if math.IsNaN(ms) || math.Abs(ms) > maxDateMs {
		return []part{{"literal", "Invalid Date"}}
	}
	d := localeData(o.locale)
	loc, _ := loadZone(o.timeZone)
	if loc == nil {
		loc = time.UTC
	}
	t := time.UnixMilli(int64(ms)).In(loc)
	var pat string
	if o.dateStyle != "" || o.timeStyle != "" {
		dp, tp := d.styles["date."+o.dateStyle], ""
		if o.timeStyle != "" {
			key := "time."
			if o.hourCycle != d.hourCycle {
				key = "time23."
				if o.hourCycle == "h11" || o.hourCycle == "h12" {
					key = "time12."
				}
			}
			tp = d.styles[key+o.timeStyle]
		}
		pat = glued(d.styles["glue."+o.dateStyle], dp, tp)
	} else {
		dk, tk := dateKey(o), timeKey(o)
		dp, tp := d.patterns[dk], d.patterns[tk]
		if o.tzName != "" && tp != "" {
			tp += " {z}"
			if o.tzName == "long" {
				tp = strings.TrimSuffix(tp, "{z}") + "{zzzz}"
			}
		}
		g, ok := d.glue[dk]
		if !ok {
			g = d.glue[glueClass(o)]
		}
		pat = glued(g, dp, tp)
	}
	var out []part
	for pat != "" {
		i := strings.IndexByte(pat, '{')
		if i != 0 {
			if i < 0 {
				i = len(pat)
			}
			out = append(out, part{"literal", pat[:i]})
			pat = pat[i:]
			continue
		}
		j := strings.IndexByte(pat, '}')
		if j < 0 {
			out = append(out, part{"literal", pat})
			break
		}
		out = append(out, dateField(d, o, t, pat[1:j]))
		pat = pat[j+1:]
	}
	return out
}

// glued is the glue pattern with the date ({1}) and time ({0}) in it, or
// the one of them that is not empty.
func glued(g, dp, tp string) string {
	switch {
	case tp == "":
		return dp
	case dp == "":
		return tp
	case g == "":
		return dp + " " + tp
	}
	return strings.NewReplacer("{1}", dp, "{0}", tp).Replace(g)
}

func dateKey(o dateOptions) string {
	k := ""
	if o.weekday != "" {
		k += "E"
	}
	if o.era != "" {
		k += "G"
	}
	if o.year != "" {
		k += "y"
	}
	k += map[string]string{"numeric": "M", "2-digit": "M", "short": "MMM", "long": "MMMM", "narrow": "MMMMM"}[o.month]
	if o.day != "" {
		k += "d"
	}
	return k
}

func timeKey(o dateOptions) string {
	k := ""
	if o.hour != "" {
		k = "H"
		if o.hourCycle == "h11" || o.hourCycle == "h12" {
			k = "h"
		}
	}
	if o.minute != "" {
		k += "m"
	}
	if o.second != "" {
		k += "s"
	}
	return k
}

// glueClass is which of the locale's date-time glues ICU uses: by the
// month's width and the weekday.
func glueClass(o dateOptions) string {
	switch o.month {
	case "long":
		if o.weekday != "" {
			return "full"
		}
		return "long"
	case "short":
		return "medium"
	}
	return "short"
}

var widths = map[string]string{"short": "3", "long": "4", "narrow": "5", "": "4"}

// names is a name list: the generated one when ICU's differs from the
// library's, else the library's.
func (d *intlLocale) namesOf(tok string) []string {
	if a, ok := d.names[tok]; ok {
		return a
	}
	switch tok {
	case "M3", "L3":
		return d.lib.MonthsAbbreviated()
	case "M4", "L4":
		return d.lib.MonthsWide()
	case "M5", "L5":
		return d.lib.MonthsNarrow()
	case "E3", "c3":
		return d.lib.WeekdaysAbbreviated()
	case "E4", "c4":
		return d.lib.WeekdaysWide()
	case "E5", "c5":
		return d.lib.WeekdaysNarrow()
	}
	return nil
}

func pick(a []string, i int) string {
	if i < 0 || i >= len(a) {
		return ""
	}
	return a[i]
}

func pad(n int, two bool) string {
	if two {
		return fmt.Sprintf("%02d", n)
	}
	return strconv.Itoa(n)
}

// dateField is one pattern token of t.
func dateField(d *intlLocale, o dateOptions, t time.Time, tok string) part {
	year := t.Year()
	if year <= 0 {
		year = 1 - year // the era's year, as ICU's y
	}
	switch tok {
	case "y", "yy":
		if tok == "yy" || o.year == "2-digit" {
			return part{"year", pad(year%100, true)}
		}
		return part{"year", strconv.Itoa(year)}
	case "M", "MM":
		return part{"month", pad(int(t.Month()), tok == "MM" || o.month == "2-digit")}
	case "d", "dd":
		return part{"day", pad(t.Day(), tok == "dd" || o.day == "2-digit")}
	case "E", "c":
		w := widths[o.weekday]
		a := d.namesOf(tok + w)
		if a == nil {
			a = d.namesOf("E" + w)
		}
		return part{"weekday", pick(a, int(t.Weekday()))}
	case "G":
		i := 1
		if t.Year() <= 0 {
			i = 0
		}
		w := widths[o.era]
		if o.era == "" {
			w = "3"
		}
		return part{"era", pick(d.names["G"+w], i)}
	case "a":
		return part{"dayPeriod", pick(d.names["a"], t.Hour()/12)}
	case "m", "mm":
		return part{"minute", pad(t.Minute(), tok == "mm" || o.minute == "2-digit")}
	case "s", "ss":
		return part{"second", pad(t.Second(), tok == "ss" || o.second == "2-digit")}
	case "z", "zzzz":
		return part{"timeZoneName", zoneName(d, t, tok == "zzzz")}
	}
	if len(tok) > 0 && strings.Contains("hHkK", tok[:1]) {
		h := t.Hour()
		switch o.hourCycle {
		case "h11":
			h %= 12
		case "h12":
			if h %= 12; h == 0 {
				h = 12
			}
		case "h24":
			if h == 0 {
				h = 24
			}
		}
		return part{"hour", pad(h, len(tok) == 2 || o.hour == "2-digit")}
	}
	if a := d.namesOf(tok); a != nil { // M3..M5, L3..L5
		return part{"month", pick(a, int(t.Month())-1)}
	}
	return part{"literal", ""}
}

// zoneName is UTC's name in the locale, or the offset as ICU's localized
// GMT format writes it in English (GMT-5, GMT+5:30; long: GMT-05:00).
func zoneName(d *intlLocale, t time.Time, long bool) string {
	if t.Location() == time.UTC {
		if long {
			return pick(d.names["zzzz"], 0)
		}
		return pick(d.names["z"], 0)
	}
	_, off := t.Zone()
	if off == 0 {
		return "GMT"
	}
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	h, m := off/3600, off%3600/60
	if long {
		return fmt.Sprintf("GMT%s%02d:%02d", sign, h, m)
	}
	if m != 0 {
		return fmt.Sprintf("GMT%s%d:%02d", sign, h, m)
	}
	return fmt.Sprintf("GMT%s%d", sign, h)
}

// numberOptions are a NumberFormat's resolved options (intlJS checks
// them: digits within Node's ranges).
type numberOptions struct {
	locale, style, currency, display, grouping string
	minInt, minFrac, maxFrac, minSig, maxSig   int
}

func numberOptionsOf(v goja.Value) (numberOptions, error) {
	var o numberOptions
	obj, ok := v.(*goja.Object)
	if !ok {
		return o, fmt.Errorf("options: not an object")
	}
	str := func(k string) string { return optString(obj, k) }
	num := func(k string, lo, hi int64) (int, error) {
		x := obj.Get(k)
		if x == nil || goja.IsUndefined(x) {
			return 0, nil
		}
		n := x.ToInteger()
		if n < lo || n > hi {
			return 0, fmt.Errorf("%s value is out of range", k)
		}
		return int(n), nil
	}
	o.locale, o.style, o.currency, o.display, o.grouping = str("locale"), str("style"), str("currency"), str("currencyDisplay"), str("useGrouping")
	var err error
	for _, f := range []struct {
		k      string
		p      *int
		lo, hi int64
	}{{"minimumIntegerDigits", &o.minInt, 1, 21}, {"minimumFractionDigits", &o.minFrac, 0, 20}, {"maximumFractionDigits", &o.maxFrac, 0, 20}, {"minimumSignificantDigits", &o.minSig, 0, 21}, {"maximumSignificantDigits", &o.maxSig, 0, 21}} {
		if *f.p, err = num(f.k, f.lo, f.hi); err != nil {
			return o, err
		}
	}
	return o, nil
}

// formatNumber formats a number as Intl.NumberFormat does for the
// supported options: decimal digits rounded half away from zero on the
// shortest decimal form of the double (as ICU), grouped by the locale.
func formatNumber(x float64, o numberOptions) []part {
	d := localeData(o.locale)
	neg := math.Signbit(x) && !math.IsNaN(x)
	var num []part
	switch {
	case math.IsNaN(x):
		num = []part{{"nan", "NaN"}}
	case math.IsInf(x, 0):
		num = []part{{"infinity", "∞"}}
	default:
		if o.style == "percent" {
			x *= 100
		}
		ip, fp := roundDecimal(math.Abs(x), o)
		num = d.grouped(ip, o.grouping)
		if fp != "" {
			num = append(num, part{"decimal", d.decimal}, part{"fraction", fp})
		}
	}
	var tpl, sym string
	switch o.style {
	case "percent":
		tpl = d.percent[0]
		if neg {
			tpl = d.percent[1]
		}
	case "currency":
		c, ok := d.currency[o.currency]
		if ok && o.display != "code" {
			tpl, sym = c[0], c[2]
			if neg {
				tpl = c[1]
			}
		} else {
			tpl, sym = d.code[0], o.currency
			if neg {
				tpl = d.code[1]
			}
		}
	default:
		tpl = "{n}"
		if neg {
			tpl = d.sign + "{n}"
		}
	}
	var out []part
	for tpl != "" {
		switch {
		case strings.HasPrefix(tpl, "{n}"):
			out = append(out, num...)
			tpl = tpl[3:]
		case strings.HasPrefix(tpl, "{c}"):
			out = append(out, part{"currency", sym})
			tpl = tpl[3:]
		case strings.HasPrefix(tpl, d.sign):
			out = append(out, part{"minusSign", d.sign})
			tpl = tpl[len(d.sign):]
		case strings.HasPrefix(tpl, "%"):
			out = append(out, part{"percentSign", "%"})
			tpl = tpl[1:]
		default:
			i := strings.IndexAny(tpl[1:], "{%"+d.sign[:1]) + 1
			if i <= 0 {
				i = len(tpl)
			}
			out = append(out, part{"literal", tpl[:i]})
			tpl = tpl[i:]
		}
	}
	return out
}

// roundDecimal gives the integer and fraction digits of a non-negative
// finite number rounded by the options.
func roundDecimal(x float64, o numberOptions) (string, string) {
	// The shortest decimal digits that read back as x, and the position
	// of the decimal point in them.
	e := strconv.FormatFloat(x, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	ds := strings.Replace(mant, ".", "", 1)
	p, _ := strconv.Atoi(exp)
	p++
	if x == 0 {
		ds, p = "0", 1
	}
	keep := p + o.maxFrac
	if o.maxSig > 0 {
		keep = o.maxSig
	}
	if keep < len(ds) {
		up := keep >= 0 && ds[keep] >= '5'
		if keep < 0 {
			keep = 0
		}
		b := []byte(ds[:keep])
		if up {
			i := len(b) - 1
			for ; i >= 0 && b[i] == '9'; i-- {
				b[i] = '0'
			}
			if i < 0 {
				b = append([]byte{'1'}, b...)
				p++
			} else {
				b[i]++
			}
		}
		ds = string(b)
	}
	ip, fp := "0", ""
	switch {
	case p <= 0:
		fp = strings.Repeat("0", -p) + ds
	case p >= len(ds):
		ip = ds + strings.Repeat("0", p-len(ds))
	default:
		ip, fp = ds[:p], ds[p:]
	}
	ip = strings.TrimLeft(ip, "0")
	if ip == "" {
		ip = "0"
	}
	minFrac := o.minFrac
	if o.maxSig > 0 {
		// Significant digits: trailing zeros up to minSig of them.
		fp = strings.TrimRight(fp, "0")
		sig := len(strings.TrimLeft(ip+fp, "0"))
		if ip == "0" {
			sig = len(strings.TrimLeft(fp, "0"))
			if sig == 0 {
				sig = 1 // zero has one significant digit
			}
		}
		minFrac = len(fp)
		if sig < o.minSig {
			minFrac += o.minSig - sig
		}
	}
	fp = strings.TrimRight(fp, "0")
	if len(fp) < minFrac {
		fp += strings.Repeat("0", minFrac-len(fp))
	}
	if len(ip) < o.minInt {
		ip = strings.Repeat("0", o.minInt-len(ip)) + ip
	}
	return ip, fp
}

// grouped is the integer digits with the locale's group separators.
func (d *intlLocale) grouped(ip, grouping string) []part {
	n := len(ip)
	use := false
	switch grouping {
	case "always":
		use = n > 3
	case "min2":
		use = n >= 5
	case "auto", "":
		use = n >= 3+d.minGroup
	}
	if !use {
		return []part{{"integer", ip}}
	}
	var out []part
	first := n % 3
	if first == 0 {
		first = 3
	}
	out = append(out, part{"integer", ip[:first]})
	for i := first; i < n; i += 3 {
		out = append(out, part{"group", d.group}, part{"integer", ip[i : i+3]})
	}
	return out
}
