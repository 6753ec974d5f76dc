package controlplane

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// maxCASRetries bounds optimistic-concurrency retries for read-modify-write.
const maxCASRetries = 32

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// canonicalUUID reports whether id is a UUID in canonical lowercase form,
// which is how this package writes ids (and so a valid KV key).
func canonicalUUID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// CreateOrganization stores a new organization with a random UUID.
func (s *Store) CreateOrganization(ctx context.Context, name string) (Organization, error) {
	name, err := cleanName(name)
	if err != nil {
		return Organization{}, err
	}
	org := Organization{ID: uuid.NewString(), Name: name, CreatedAt: now()}
	data, err := json.Marshal(org)
	if err != nil {
		return Organization{}, fmt.Errorf("controlplane: encode organization: %w", err)
	}
	if _, err := s.orgs.Create(ctx, org.ID, data); err != nil {
		return Organization{}, fmt.Errorf("controlplane: create organization: %w", err)
	}
	s.logger.InfoContext(ctx, "organization created", slog.String("organization_id", org.ID))
	return org, nil
}

// GetOrganization reads an organization from KV.
func (s *Store) GetOrganization(ctx context.Context, id string) (Organization, error) {
	if !canonicalUUID(id) {
		return Organization{}, fmt.Errorf("%w: organization %q", ErrNotFound, id)
	}
	org, _, err := getJSON[Organization](ctx, s.orgs, id, "organization")
	return org, err
}

// ListOrganizations returns all organizations, oldest first.
func (s *Store) ListOrganizations(ctx context.Context) ([]Organization, error) {
	orgs, err := listAll[Organization](ctx, s.orgs, s.logger)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(orgs, func(a, b Organization) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return orgs, nil
}

func projectKey(id uint64) string { return strconv.FormatUint(id, 10) }

// CreateProject stores a new project in an existing organization and gives
// it the next free integer id and a fresh public token.
//
// Id allocation: key N is written with an expected last revision of 0, which
// JetStream accepts only if subject N has no message at all (not even a
// delete marker). On conflict N+1 is tried. Probing starts above the highest
// id this process knows of, so it is cheap in the common case and correct
// when the index lags behind other writers.
func (s *Store) CreateProject(ctx context.Context, orgID, name string) (Project, error) {
	name, err := cleanName(name)
	if err != nil {
		return Project{}, err
	}
	if _, err := s.GetOrganization(ctx, orgID); err != nil {
		return Project{}, err
	}
	token, err := newProjectToken()
	if err != nil {
		return Project{}, err
	}
	p := Project{OrganizationID: orgID, Name: name, APIToken: token, CreatedAt: now()}
	id := max(s.ix.maxProjectID()+1, s.projectHint.Load(), 1)
	for {
		if err := ctx.Err(); err != nil {
			return Project{}, fmt.Errorf("controlplane: create project: %w", err)
		}
		p.ID = id
		data, err := json.Marshal(p)
		if err != nil {
			return Project{}, fmt.Errorf("controlplane: encode project: %w", err)
		}
		rev, err := s.projects.Update(ctx, projectKey(id), data, 0)
		if err == nil {
			s.raiseProjectHint(id + 1)
			s.ix.putProject(id, rev, p, false)
			s.logger.InfoContext(ctx, "project created",
				slog.Uint64("project_id", id), slog.String("organization_id", orgID))
			return p, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return Project{}, fmt.Errorf("controlplane: create project %d: %w", id, err)
		}
		s.raiseProjectHint(id + 1)
		id = max(id+1, s.projectHint.Load())
	}
}

func (s *Store) raiseProjectHint(v uint64) {
	for {
		cur := s.projectHint.Load()
		if cur >= v || s.projectHint.CompareAndSwap(cur, v) {
			return
		}
	}
}

// GetProject reads a project from KV.
func (s *Store) GetProject(ctx context.Context, id uint64) (Project, error) {
	if id == 0 {
		return Project{}, fmt.Errorf("%w: project 0", ErrNotFound)
	}
	p, _, err := getJSON[Project](ctx, s.projects, projectKey(id), "project")
	return p, err
}

// ListProjects returns the projects of an organization sorted by id. An
// empty orgID lists the projects of all organizations.
func (s *Store) ListProjects(ctx context.Context, orgID string) ([]Project, error) {
	all, err := listAll[Project](ctx, s.projects, s.logger)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, p := range all {
		if orgID == "" || p.OrganizationID == orgID {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Project) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// ProjectUpdate is a change of a project's settings: each non-nil field
// is set.
type ProjectUpdate struct {
	// Timezone is an IANA name, checked by LoadTimezone.
	Timezone *string
	// AnonymizeIPs: capture stores no client address for the project.
	AnonymizeIPs *bool
	// TimestampedPersonProperties: capture makes the project's $set
	// timestamp-aware.
	TimestampedPersonProperties *bool
}

// SetProjectTimezone sets a project's time zone (an IANA name, checked by
// LoadTimezone) and returns the project as stored.
func (s *Store) SetProjectTimezone(ctx context.Context, id uint64, tz string) (Project, error) {
	return s.UpdateProject(ctx, id, ProjectUpdate{Timezone: &tz})
}

// UpdateProject applies u to a project in one write and returns the
// project as stored.
func (s *Store) UpdateProject(ctx context.Context, id uint64, u ProjectUpdate) (Project, error) {
	if u.Timezone != nil {
		if _, err := LoadTimezone(*u.Timezone); err != nil {
			return Project{}, err
		}
	}
	if id == 0 {
		return Project{}, fmt.Errorf("%w: project 0", ErrNotFound)
	}
	for range maxCASRetries {
		p, rev, err := getJSON[Project](ctx, s.projects, projectKey(id), "project")
		if err != nil {
			return Project{}, err
		}
		attrs := []any{slog.Uint64("project_id", id)}
		if u.Timezone != nil {
			p.Timezone = *u.Timezone
			attrs = append(attrs, slog.String("timezone", p.Timezone))
		}
		if u.AnonymizeIPs != nil {
			p.AnonymizeIPs = *u.AnonymizeIPs
			attrs = append(attrs, slog.Bool("anonymize_ips", p.AnonymizeIPs))
		}
		if u.TimestampedPersonProperties != nil {
			p.TimestampedPersonProperties = *u.TimestampedPersonProperties
			attrs = append(attrs, slog.Bool("timestamped_person_properties", p.TimestampedPersonProperties))
		}
		data, err := json.Marshal(p)
		if err != nil {
			return Project{}, fmt.Errorf("controlplane: encode project: %w", err)
		}
		newRev, err := s.projects.Update(ctx, projectKey(id), data, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // concurrent writer; re-read
		}
		if err != nil {
			return Project{}, fmt.Errorf("controlplane: update project %d: %w", id, err)
		}
		s.ix.putProject(id, newRev, p, false)
		s.logger.InfoContext(ctx, "project updated", attrs...)
		return p, nil
	}
	return Project{}, fmt.Errorf("controlplane: update project %d: too many concurrent updates", id)
}

// ProjectByToken looks a project up by its public token in the in-memory
// index. It does no I/O.
func (s *Store) ProjectByToken(token string) (Project, bool) {
	return s.ix.projectByToken(token)
}

// ProjectByID looks a project up by id in the in-memory index. It does no
// I/O; use GetProject for an authoritative read.
func (s *Store) ProjectByID(id uint64) (Project, bool) {
	return s.ix.projectByID(id)
}

// CreateKey creates a personal API key for an existing organization and
// returns its secret, which is not stored and cannot be recovered.
func (s *Store) CreateKey(ctx context.Context, orgID, label string, scopes []string) (string, Key, error) {
	label, err := cleanName(label)
	if err != nil {
		return "", Key{}, err
	}
	scopes, err = normalizeScopes(scopes)
	if err != nil {
		return "", Key{}, err
	}
	if _, err := s.GetOrganization(ctx, orgID); err != nil {
		return "", Key{}, err
	}
	secret, err := NewSecret()
	if err != nil {
		return "", Key{}, err
	}
	k := Key{
		ID:             uuid.NewString(),
		OrganizationID: orgID,
		Label:          label,
		Scopes:         scopes,
		Hash:           HashSecret(secret),
		MaskValue:      maskSecret(secret),
		CreatedAt:      now(),
	}
	data, err := json.Marshal(k)
	if err != nil {
		return "", Key{}, fmt.Errorf("controlplane: encode key: %w", err)
	}
	rev, err := s.keys.Create(ctx, k.ID, data)
	if err != nil {
		return "", Key{}, fmt.Errorf("controlplane: create key: %w", err)
	}
	s.ix.putKey(k.ID, rev, k, false)
	s.logger.InfoContext(ctx, "API key created",
		slog.String("key_id", k.ID), slog.String("organization_id", orgID), slog.Any("scopes", scopes))
	return secret, k.clone(), nil
}

// GetKey reads a key from KV.
func (s *Store) GetKey(ctx context.Context, id string) (Key, error) {
	if !canonicalUUID(id) {
		return Key{}, fmt.Errorf("%w: key %q", ErrNotFound, id)
	}
	k, _, err := getJSON[Key](ctx, s.keys, id, "key")
	return k, err
}

// RevokeKey marks a key revoked. Revoking an already revoked key succeeds
// and keeps the original RevokedAt. Every Store watching the bucket rejects
// the key once the update reaches it.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	if !canonicalUUID(id) {
		return fmt.Errorf("%w: key %q", ErrNotFound, id)
	}
	for range maxCASRetries {
		k, rev, err := getJSON[Key](ctx, s.keys, id, "key")
		if err != nil {
			return err
		}
		if k.RevokedAt != nil {
			s.ix.putKey(id, rev, k, false)
			return nil
		}
		t := now()
		k.RevokedAt = &t
		data, err := json.Marshal(k)
		if err != nil {
			return fmt.Errorf("controlplane: encode key: %w", err)
		}
		newRev, err := s.keys.Update(ctx, id, data, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // concurrent writer; re-read
		}
		if err != nil {
			return fmt.Errorf("controlplane: revoke key %q: %w", id, err)
		}
		s.ix.putKey(id, newRev, k, false)
		s.logger.InfoContext(ctx, "API key revoked",
			slog.String("key_id", id), slog.String("organization_id", k.OrganizationID))
		return nil
	}
	return fmt.Errorf("controlplane: revoke key %q: too many concurrent updates", id)
}

// ListKeys returns the keys (including revoked ones) of an organization,
// oldest first.
func (s *Store) ListKeys(ctx context.Context, orgID string) ([]Key, error) {
	all, err := listAll[Key](ctx, s.keys, s.logger)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, k := range all {
		if k.OrganizationID == orgID {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Authenticate resolves a secret to its active key using only the in-memory
// index. Unknown, malformed and revoked secrets all yield ErrUnknownKey.
func (s *Store) Authenticate(secret string) (Key, error) {
	if len(secret) == 0 || len(secret) > maxSecretLen {
		return Key{}, ErrUnknownKey
	}
	hash := HashSecret(secret)
	k, ok := s.ix.keyByHash(hash)
	if !ok || subtle.ConstantTimeCompare([]byte(k.Hash), []byte(hash)) != 1 || k.Revoked() {
		return Key{}, ErrUnknownKey
	}
	return k, nil
}
