package chstore_test

import (
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want chstore.Version
	}{
		{"18.16.1", chstore.Version{18, 16, 1}},
		{"24.8.4.13", chstore.Version{24, 8, 4}},
		{"26.7.2.1\n", chstore.Version{26, 7, 2}},
		{"25.3", chstore.Version{25, 3, 0}},
	} {
		got, err := chstore.ParseVersion(c.in)
		if err != nil || got != c.want {
			t.Errorf("chstore.ParseVersion(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "18", "v18.16", "18.x.1", "-1.2"} {
		if v, err := chstore.ParseVersion(bad); err == nil {
			t.Errorf("chstore.ParseVersion(%q) = %v, want an error", bad, v)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	v := chstore.Version{24, 8, 4}
	for _, c := range []struct {
		major, minor int
		want         bool
	}{{18, 16, true}, {24, 8, true}, {24, 9, false}, {25, 1, false}, {23, 12, true}} {
		if got := v.AtLeast(c.major, c.minor); got != c.want {
			t.Errorf("%v.AtLeast(%d, %d) = %v", v, c.major, c.minor, got)
		}
	}
}

// TestServerVersionOfTestServer: a store knows its server's version, and
// the tests' server is one the service supports.
func TestServerVersionOfTestServer(t *testing.T) {
	v := testenv.ClickHouse(t).ServerVersion()
	if !v.AtLeast(chstore.MinVersion.Major, chstore.MinVersion.Minor) {
		t.Fatalf("server version %v, below %v", v, chstore.MinVersion)
	}
}
