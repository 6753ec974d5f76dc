package deletion

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A filter compiles to a condition only when it constrains: empty
// property groups, however nested, constrain nothing and are refused.
func TestCompileRefusesWhatSelectsEverything(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, raw := range []string{
		`{}`,
		`{"properties":[]}`,
		`{"properties":{"type":"AND","values":[]}}`,
		`{"properties":{"values":[]}}`,
		`{"properties":[{"type":"OR","values":[]}]}`,
		`{"properties":{"type":"AND","values":[{"type":"OR","values":[]}]}}`,
	} {
		f, err := ParseFilter(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if c, err := f.Compile(context.Background(), now); !errors.Is(err, ErrSelectsEverything) {
			t.Errorf("%s: compiled to %q, %v; want ErrSelectsEverything", raw, c.SQL, err)
		}
	}
	for raw, byProps := range map[string]bool{
		`{"events":["x"]}`:                                         false,
		`{"after":"2026-01-01T00:00:00Z"}`:                         false,
		`{"properties":[{"key":"plan","value":"pro"}]}`:            true,
		`{"events":["x"],"properties":{"type":"AND","values":[]}}`: false,
	} {
		f, err := ParseFilter(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		c, err := f.Compile(context.Background(), now)
		if err != nil || c.SQL == "1" || c.ByProperties != byProps {
			t.Errorf("%s: %q by properties %v, %v", raw, c.SQL, c.ByProperties, err)
		}
	}
}
