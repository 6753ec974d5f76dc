package controlplane

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // LoadTimezone: the same zones on every machine
	"unicode"
	"unicode/utf8"
)

// Sentinel errors. Errors returned by the Store wrap these with detail; test
// for them with errors.Is.
var (
	// ErrNotFound means the organization, project or key does not exist.
	ErrNotFound = errors.New("controlplane: not found")
	// ErrUnknownKey means a secret does not belong to an active key (unknown
	// or revoked). Callers should answer 401 without saying which.
	ErrUnknownKey = errors.New("controlplane: unknown or revoked API key")
	// ErrInvalidScope means a requested scope is not one of the known scopes.
	ErrInvalidScope = errors.New("controlplane: invalid scope")
	// ErrInvalidName means a name or label is empty (after trimming spaces),
	// too long or not valid text.
	ErrInvalidName = errors.New("controlplane: invalid name")
	// ErrInvalidTimezone means a time zone is not an IANA zone name.
	ErrInvalidTimezone = errors.New("controlplane: invalid time zone")
)

// Organization owns projects and personal API keys.
type Organization struct {
	ID        string    `json:"id"` // UUID
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Project is a PostHog-style project (team) with a small sequential id.
type Project struct {
	ID             uint64    `json:"id"`
	OrganizationID string    `json:"organization_id"`
	Name           string    `json:"name"`
	APIToken       string    `json:"api_token"` // public capture token, "phc_…"
	CreatedAt      time.Time `json:"created_at"`
	// Timezone is the IANA zone analysis buckets and relative dates follow;
	// "" (records written before the field existed) means UTC.
	Timezone string `json:"timezone,omitempty"`
	// AnonymizeIPs (PostHog's anonymize_ips): capture records no client
	// address in the project's events and drops a $ip a client sends.
	AnonymizeIPs bool `json:"anonymize_ips,omitempty"`
	// TimestampedPersonProperties: capture makes every event's $set
	// timestamp-aware ("$set_timestamp": true in the event), so a
	// historical import keeps the value of each person property with the
	// newest event timestamp (docs/events.md, "Timestamp-aware $set").
	TimestampedPersonProperties bool `json:"timestamped_person_properties,omitempty"`
}

// TimezoneName is the project's zone name, "UTC" when unset.
func (p Project) TimezoneName() string {
	if p.Timezone == "" {
		return "UTC"
	}
	return p.Timezone
}

// Location is the project's zone; UTC when unset or (a record edited by
// hand) unknown to this binary.
func (p Project) Location() *time.Location {
	loc, err := LoadTimezone(p.TimezoneName())
	if err != nil {
		return time.UTC
	}
	return loc
}

// LoadTimezone loads an IANA zone by name. "Local" and "" are refused: they
// would mean the server's zone, which differs between machines. The zone
// database is embedded (time/tzdata), so every binary knows the same zones.
func LoadTimezone(name string) (*time.Location, error) {
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, fmt.Errorf("%w: %q", ErrInvalidTimezone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrInvalidTimezone, name)
	}
	return loc, nil
}

// Key is a personal API key. The secret itself is never stored.
type Key struct {
	ID             string     `json:"id"` // public id (UUID)
	OrganizationID string     `json:"organization_id"`
	Label          string     `json:"label"`
	Scopes         []string   `json:"scopes"`
	Hash           string     `json:"hash"`       // hex SHA-256 of the secret
	MaskValue      string     `json:"mask_value"` // "phx_...abcd"
	CreatedAt      time.Time  `json:"created_at"`
	RevokedAt      *time.Time `json:"revoked_at,omitempty"`
}

// Revoked reports whether the key has been revoked.
func (k Key) Revoked() bool { return k.RevokedAt != nil }

func (k Key) clone() Key {
	k.Scopes = append([]string(nil), k.Scopes...)
	if k.RevokedAt != nil {
		t := *k.RevokedAt
		k.RevokedAt = &t
	}
	return k
}

const (
	// SecretPrefix starts every personal API key secret.
	SecretPrefix = "phx_"
	// ProjectTokenPrefix starts every public project token.
	ProjectTokenPrefix = "phc_"
	// randomLen is the number of base62 characters after a prefix
	// (43 × log2(62) ≈ 256 bits).
	randomLen = 43
	// maxNameRunes bounds organization/project names and key labels.
	maxNameRunes = 200
	// maxSecretLen bounds what Authenticate is willing to hash.
	maxSecretLen = 256
)

const base62Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomBase62 returns n characters drawn uniformly from base62Alphabet.
// Bytes >= 248 (= 4×62) are rejected so that b%62 is unbiased.
func randomBase62(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("controlplane: read random: %w", err)
		}
		for _, b := range buf {
			if b >= 248 {
				continue
			}
			out = append(out, base62Alphabet[b%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}

// NewSecret returns a new personal API key secret: "phx_" followed by 43
// uniformly random base62 characters from crypto/rand.
func NewSecret() (string, error) {
	r, err := randomBase62(randomLen)
	if err != nil {
		return "", err
	}
	return SecretPrefix + r, nil
}

// newProjectToken returns a new public project token ("phc_" + 43 base62).
func newProjectToken() (string, error) {
	r, err := randomBase62(randomLen)
	if err != nil {
		return "", err
	}
	return ProjectTokenPrefix + r, nil
}

// HashSecret returns the lowercase hex SHA-256 of secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// maskSecret returns the displayable form of a secret, e.g. "phx_...abcd".
func maskSecret(secret string) string {
	tail := secret
	if len(tail) > 4 {
		tail = tail[len(tail)-4:]
	}
	return SecretPrefix + "..." + tail
}

// ScopeAll grants every scope.
const ScopeAll = "*"

var knownScopes = map[string]struct{}{
	"person:read":        {},
	"person:write":       {},
	"cohort:read":        {},
	"cohort:write":       {},
	"action:read":        {},
	"action:write":       {},
	"activity_log:read":  {},
	"activity_log:write": {},
	"plugin:read":        {},
	"plugin:write":       {},
	"project:read":       {},
	"project:write":      {},
	"organization:read":  {},
	ScopeAll:             {},
}

// ValidScope reports whether s is a known scope (including "*").
func ValidScope(s string) bool {
	_, ok := knownScopes[s]
	return ok
}

// ScopeAllows reports whether the granted scopes permit need: "*" allows
// everything, "x:write" also allows "x:read", otherwise the match is exact.
// An empty need is never allowed.
func ScopeAllows(granted []string, need string) bool {
	if need == "" {
		return false
	}
	readOf, isRead := strings.CutSuffix(need, ":read")
	for _, g := range granted {
		switch {
		case g == ScopeAll, g == need:
			return true
		case isRead && readOf != "" && g == readOf+":write":
			return true
		}
	}
	return false
}

// normalizeScopes validates scopes and removes duplicates, keeping order.
func normalizeScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, fmt.Errorf("%w: at least one scope is required", ErrInvalidScope)
	}
	out := make([]string, 0, len(scopes))
	seen := make(map[string]struct{}, len(scopes))
	for _, s := range scopes {
		if !ValidScope(s) {
			return nil, fmt.Errorf("%w: %q", ErrInvalidScope, s)
		}
		if _, dup := seen[s]; dup {
			continue
		}
		seen[s] = struct{}{}
		out = append(out, s)
	}
	return out, nil
}

// cleanName trims a name and checks that it is non-empty, valid UTF-8,
// free of control characters and at most maxNameRunes long.
func cleanName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", fmt.Errorf("%w: must not be empty", ErrInvalidName)
	case !utf8.ValidString(name):
		return "", fmt.Errorf("%w: not valid UTF-8", ErrInvalidName)
	case utf8.RuneCountInString(name) > maxNameRunes:
		return "", fmt.Errorf("%w: longer than %d characters", ErrInvalidName, maxNameRunes)
	case strings.ContainsFunc(name, unicode.IsControl):
		return "", fmt.Errorf("%w: contains control characters", ErrInvalidName)
	}
	return name, nil
}
