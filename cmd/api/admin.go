package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/personhub/personhub/cmd/internal/appconfig"
	"github.com/personhub/personhub/pkg/controlplane"
)

const adminUsage = `usage: api admin COMMAND [flags]

commands:
  create-org -name NAME
  create-project -org ORG_ID -name NAME
  create-key -org ORG_ID -label LABEL -scopes person:read,person:write   (prints the secret once)
  revoke-key -id KEY_ID
  set-timezone -project PROJECT_ID -timezone IANA_NAME   (e.g. Europe/Berlin; default of a project: UTC)
  list-orgs
  list-projects [-org ORG_ID]
  list-keys -org ORG_ID
`

// admin runs one control-plane command against NATS and prints JSON.
func admin(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, adminUsage)
		return errors.New("admin needs a command")
	}
	cmd, args := args[0], args[1:]
	var common appconfig.Common
	fs := flag.NewFlagSet("api admin "+cmd, flag.ContinueOnError)
	common.Bind(fs)
	name := fs.String("name", "", "name")
	org := fs.String("org", "", "organization id")
	label := fs.String("label", "", "key label")
	scopes := fs.String("scopes", "", "comma-separated scopes, or *")
	id := fs.String("id", "", "key id")
	project := fs.Uint64("project", 0, "project id")
	timezone := fs.String("timezone", "", "IANA time zone name, e.g. Europe/Berlin")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nc, js, err := common.NATS("api-admin")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := controlplane.Open(ctx, js, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer store.Close()

	var out any
	switch cmd {
	case "create-org":
		out, err = store.CreateOrganization(ctx, *name)
	case "create-project":
		out, err = store.CreateProject(ctx, *org, *name)
	case "create-key":
		var secret string
		var key controlplane.Key
		secret, key, err = store.CreateKey(ctx, *org, *label, appconfig.SplitList(*scopes))
		out = map[string]any{"key": key, "secret": secret, "note": "the secret is shown once; only its hash is stored"}
	case "revoke-key":
		err = store.RevokeKey(ctx, *id)
		out = map[string]any{"revoked": *id}
	case "set-timezone":
		out, err = store.SetProjectTimezone(ctx, *project, *timezone)
	case "list-orgs":
		out, err = store.ListOrganizations(ctx)
	case "list-projects":
		out, err = store.ListProjects(ctx, *org)
	case "list-keys":
		out, err = store.ListKeys(ctx, *org)
	default:
		fmt.Fprint(os.Stderr, adminUsage)
		return fmt.Errorf("unknown admin command %q", cmd)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
