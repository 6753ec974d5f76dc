// Command intlgen prints, as JSON, the names go-playground/locales has for
// the locales pkg/transform's Intl supports. gen.js reads it and writes
// pkg/transform/intl_data.go: the patterns and the names where Node's
// ICU differs from the library (see that file's header).
//
//	go run ./scripts/intlgen | node scripts/intlgen/gen.js > pkg/transform/intl_data.go
package main

import (
	"encoding/json"
	"os"

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

func main() {
	out := map[string]map[string][]string{}
	for _, l := range []locales.Translator{en_US.New(), en_GB.New(), de_DE.New(), fr_FR.New(), es_ES.New(), it_IT.New(), pt_BR.New(), nl_NL.New(), ja_JP.New()} {
		out[l.Locale()] = map[string][]string{
			"MMMM": l.MonthsWide(), "MMM": l.MonthsAbbreviated(), "MMMMM": l.MonthsNarrow(),
			"EEEE": l.WeekdaysWide(), "EEE": l.WeekdaysAbbreviated(), "EEEEE": l.WeekdaysNarrow(),
			"number": {l.FmtNumber(1234567.5, 1)},
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}
