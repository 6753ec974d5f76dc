package appconfig

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/testenv"
)

// TestGeoIPSetting: GEOIP_DB is the default of -geoip-db, the flag wins;
// no path is no database (said in the log), a real one opens, and a file
// that is no database stops the start naming it.
func TestGeoIPSetting(t *testing.T) {
	t.Setenv("GEOIP_DB", "/from/env.mmdb")
	var path string
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	BindGeoIP(fs, &path)
	if err := fs.Parse(nil); err != nil || path != "/from/env.mmdb" {
		t.Fatalf("env: %q, %v", path, err)
	}
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	BindGeoIP(fs, &path)
	if err := fs.Parse([]string{"-geoip-db", "/from/flag.mmdb"}); err != nil || path != "/from/flag.mmdb" {
		t.Fatalf("flag: %q, %v", path, err)
	}

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	db, err := OpenGeoIP("", log)
	if db != nil || err != nil || !strings.Contains(logs.String(), "meta.geoip.locate answers null") {
		t.Errorf("no path: %v, %v, log %q", db, err, logs.String())
	}
	city := testenv.GeoIPCity(t)
	db, err = OpenGeoIP(city, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := db.Locate("81.2.69.142"); !ok || !strings.Contains(logs.String(), "type=GeoLite2-City") {
		t.Errorf("opened database: located %v, log %q", ok, logs.String())
	}
	_ = db.Close()
	bad := filepath.Join(t.TempDir(), "GeoLite2-City.mmdb")
	if err := os.WriteFile(bad, []byte("<html>not found</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if db, err := OpenGeoIP(bad, log); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a file that is no database: %v, %v", db, err)
	}
}
