package appconfig

import (
	"flag"
	"log/slog"

	"github.com/personhub/personhub/pkg/geoip"
)

// BindGeoIP registers -geoip-db, the MaxMind City database of
// transformations' meta.geoip.locate, on the binaries that run
// transformations: the ingester, and the API for dry runs (give both the
// same file). One name for both, so that one setting serves the stack.
func BindGeoIP(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "geoip-db", Env("GEOIP_DB", ""), "MaxMind City database (.mmdb, e.g. GeoLite2-City.mmdb) for transformations' meta.geoip.locate; empty: locate answers null (docs/plugins.md, \"meta.geoip\") (env GEOIP_DB)")
}

// OpenGeoIP opens the database at path once for the process; an empty path
// is none (nil, and a log line saying what that means). A file that cannot
// be read as a City database stops the start, naming it.
func OpenGeoIP(path string, log *slog.Logger) (*geoip.DB, error) {
	if path == "" {
		log.Info("no geoip database (-geoip-db, GEOIP_DB): meta.geoip.locate answers null")
		return nil, nil
	}
	db, err := geoip.Open(path)
	if err != nil {
		return nil, err
	}
	log.Info("geoip database opened", "path", path, "type", db.Type(), "built", db.Built())
	return db, nil
}
