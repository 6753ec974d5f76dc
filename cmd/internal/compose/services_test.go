package compose_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// service is what the test reads of a docker-compose.yml service.
type service struct {
	entrypoint string            // the binary, e.g. /usr/local/bin/ingester
	command    string            // its subcommand
	env        map[string]string // environment, anchors merged
	image      string
}

// readCompose reads the services of docker-compose.yml. It understands
// the file's own shape only (flow lists for entrypoint and command, an
// environment mapping that may merge an x- anchor) and fails on lines of
// those blocks it does not understand, so a change of shape is noticed
// rather than skipped.
func readCompose(t *testing.T, path string) map[string]*service {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors := map[string]map[string]string{}
	services := map[string]*service{}
	var (
		section string            // top-level key
		anchor  map[string]string // the x- mapping being read
		svc     *service
		inEnv   bool
	)
	flow := regexp.MustCompile(`^\[\s*"([^"]+)"`)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(text) - len(strings.TrimLeft(text, " "))
		key, value, _ := strings.Cut(trimmed, ":")
		value = strings.TrimSpace(value)
		if i := strings.Index(value, " #"); i >= 0 {
			value = strings.TrimSpace(value[:i])
		}
		switch {
		case indent == 0:
			section, anchor, svc, inEnv = key, nil, nil, false
			if name, ok := strings.CutPrefix(value, "&"); ok && strings.HasPrefix(key, "x-") {
				anchor = map[string]string{}
				anchors[name] = anchor
			}
		case anchor != nil && indent == 2:
			anchor[key] = value
		case section == "services" && indent == 2:
			svc = &service{env: map[string]string{}}
			services[key] = svc
			inEnv = false
		case svc != nil && indent == 4:
			inEnv = key == "environment"
			if key == "image" {
				svc.image = value
			}
			if m := flow.FindStringSubmatch(value); m != nil && key == "entrypoint" {
				svc.entrypoint = m[1]
			} else if m != nil && key == "command" {
				svc.command = m[1]
			}
		case svc != nil && inEnv && indent == 6:
			if key == "<<" {
				merged, ok := anchors[strings.TrimPrefix(value, "*")]
				if !ok {
					t.Fatalf("%s:%d: unknown anchor %s", path, line, value)
				}
				for k, v := range merged {
					svc.env[k] = v
				}
				continue
			}
			if !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(key) {
				t.Fatalf("%s:%d: environment entry %q not understood", path, line, trimmed)
			}
			svc.env[key] = value
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return services
}

// envOf lists the environment variables `bin command -h` documents: every
// flag of the binaries names its variable as "(env NAME)".
func envOf(t *testing.T, bin, command string) []string {
	t.Helper()
	out, _ := exec.Command(bin, command, "-h").CombinedOutput()
	var names []string
	for _, m := range regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)\)`).FindAllStringSubmatch(string(out), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("%s %s -h documents no environment variables:\n%s", bin, command, out)
	}
	return names
}

// TestComposeServicesMatchTheBinaries checks docker-compose.yml against
// the binaries as built now: each personhub service runs a subcommand that
// exists, sets only environment variables that subcommand reads (a
// renamed flag would otherwise be ignored silently), connects to NATS as
// the user of its binary, and the services that must agree on the
// partition count (api, ingester, deleter) are given the same; the nats
// service passes every password nats.conf reads.
func TestComposeServicesMatchTheBinaries(t *testing.T) {
	services := readCompose(t, "../../../docker-compose.yml")
	bins := map[string]string{}
	users := map[string]string{"api": "api", "ingester": "ingester"} // binary -> NATS user
	partitions := map[string]string{}
	for name, svc := range services {
		bin, ok := strings.CutPrefix(svc.entrypoint, "/usr/local/bin/")
		if !ok {
			continue
		}
		if bins[bin] == "" {
			bins[bin] = testenv.Build(t, "github.com/personhub/personhub/cmd/"+bin)
		}
		known := envOf(t, bins[bin], svc.command)
		for k := range svc.env {
			if !slices.Contains(known, k) {
				t.Errorf("service %s sets %s, which `%s %s` does not read", name, k, bin, svc.command)
			}
		}
		if svc.command == "run" && slices.Contains(known, "INGEST_PARTITIONS") {
			partitions[name] = svc.env["INGEST_PARTITIONS"]
		}
		if user, ok := users[bin]; ok && svc.command == "run" && !strings.HasPrefix(svc.env["NATS_URL"], "nats://"+user+":") {
			t.Errorf("service %s connects as %q, want the %s user", name, svc.env["NATS_URL"], user)
		}
	}
	if len(bins) != 3 {
		t.Fatalf("services run binaries %v, want api, ingester and deleter", bins)
	}
	for _, v := range partitions {
		if v == "" || v != partitions["ingester"] {
			t.Errorf("services are given partitions %v: the api and the deleter must be given the ingester's (docs/operations.md)", partitions)
			break
		}
	}
	conf, err := os.ReadFile("../../../deploy/nats/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$(NATS_[A-Z_]+_PASSWORD)`).FindAllStringSubmatch(string(conf), -1) {
		if services["nats"] == nil || services["nats"].env[m[1]] == "" {
			t.Errorf("nats.conf reads %s; the nats service does not pass it", m[1])
		}
	}
}

// TestComposeClickHouseIsSupported: the ClickHouse image docker-compose.yml
// pins is a release in the range every statement is proven on
// (docs/operations.md, "Supported ClickHouse").
func TestComposeClickHouseIsSupported(t *testing.T) {
	ch := readCompose(t, "../../../docker-compose.yml")["clickhouse"]
	if ch == nil {
		t.Fatal("docker-compose.yml has no clickhouse service")
	}
	tag, ok := strings.CutPrefix(ch.image, "clickhouse/clickhouse-server:")
	if !ok {
		t.Fatalf("clickhouse image %q: not clickhouse/clickhouse-server:<version>", ch.image)
	}
	v, err := chstore.ParseVersion(tag)
	if err != nil {
		t.Fatalf("clickhouse image %q: pin a version, not %q: %v", ch.image, tag, err)
	}
	lo, hi := chstore.MinVersion, chstore.NewestTested
	if !v.AtLeast(lo.Major, lo.Minor) || v.AtLeast(hi.Major, hi.Minor+1) {
		t.Errorf("clickhouse image %s: outside the supported %d.%d to %d.%d", tag, lo.Major, lo.Minor, hi.Major, hi.Minor)
	}
}
