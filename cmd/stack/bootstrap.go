package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/personhub/personhub/pkg/controlplane"
)

// bootstrapState is the local organization, project and key. It is kept in
// the data folder (mode 0600) so that every `make run` can print a working
// key: a convenience for a local stack only; production keys are shown once
// by `api admin create-key` and never stored.
type bootstrapState struct {
	OrganizationID string `json:"organization_id"`
	ProjectID      uint64 `json:"project_id"`
	ProjectToken   string `json:"project_token"`
	KeyID          string `json:"key_id"`
	Secret         string `json:"secret"`
}

func bootstrap(ctx context.Context, cp *controlplane.Store, path string) (bootstrapState, error) {
	var b bootstrapState
	if raw, err := os.ReadFile(path); err == nil {
		if json.Unmarshal(raw, &b) == nil {
			if _, err := cp.Authenticate(b.Secret); err == nil {
				if p, ok := cp.ProjectByID(b.ProjectID); ok {
					b.ProjectToken = p.APIToken
					return b, nil
				}
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return b, err
	}
	org, err := cp.CreateOrganization(ctx, "Local")
	if err != nil {
		return b, err
	}
	proj, err := cp.CreateProject(ctx, org.ID, "Default project")
	if err != nil {
		return b, err
	}
	secret, key, err := cp.CreateKey(ctx, org.ID, "make run", []string{"*"})
	if err != nil {
		return b, err
	}
	b = bootstrapState{OrganizationID: org.ID, ProjectID: proj.ID, ProjectToken: proj.APIToken, KeyID: key.ID, Secret: secret}
	raw, _ := json.MarshalIndent(b, "", "  ")
	return b, os.WriteFile(path, raw, 0o600)
}
