// Package person holds the person model shared by the ingester and the API:
// the deterministic uuid rule, the display name rule, the illegal distinct
// id list and the order in which distinct ids are shown.
package person

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Namespace is the uuid5 namespace for person uuids: a person created from
// distinct id D in project T has uuid5(Namespace, "T:D"), so a replay of the
// log gives every person the same uuid.
var Namespace = uuid.MustParse("932979b4-65c3-4424-8467-0b66ec27bc22")

// UUIDFor returns the uuid of the person created from distinctID the first
// time the id is seen (PostHog's uuidFromDistinctId).
func UUIDFor(projectID uint64, distinctID string) uuid.UUID {
	return uuid.NewSHA1(Namespace, []byte(fmt.Sprintf("%d:%s", projectID, distinctID)))
}

// ReuseNamespace is the uuid5 namespace for persons created from a distinct
// id that had an owner before (after a reset, or after its person was
// deleted) and for persons a split creates: UUIDFor would give them a uuid
// a person already has. A namespace of its own, because the text alone is
// ambiguous: "T:D:S" of id D at sequence S is also "T:D'" of id D' = "D:S".
var ReuseNamespace = uuid.MustParse("bf236636-99cf-4203-8383-47a78bae0f6d")

// UUIDForReuse returns the uuid of the person created from distinctID by
// the event at stream sequence seq when UUIDFor may be taken:
// uuid5(ReuseNamespace, "T:D:S"). An event creates at most one person per
// distinct id, so the pair (id, sequence) is unique, and a replay gives the
// same uuid.
func UUIDForReuse(projectID uint64, distinctID string, seq uint64) uuid.UUID {
	return uuid.NewSHA1(ReuseNamespace, []byte(fmt.Sprintf("%d:%s:%d", projectID, distinctID, seq)))
}

// Person is the API's view of a person.
type Person struct {
	ID           uint64         `json:"id"`
	UUID         uuid.UUID      `json:"uuid"`
	Name         string         `json:"name"`
	DistinctIDs  []string       `json:"distinct_ids"`
	Properties   map[string]any `json:"properties"`
	CreatedAt    time.Time      `json:"created_at"`
	IsIdentified bool           `json:"is_identified"`
	// LastSeenAt is the time of the person's newest behaviour event
	// (LastSeenLayout, UTC), null when it has none.
	LastSeenAt *string `json:"last_seen_at"`
}

// LastSeenLayout renders Person.LastSeenAt: RFC 3339 in UTC, always with
// milliseconds (events keep their time to the millisecond).
const LastSeenLayout = "2006-01-02T15:04:05.000Z"

// displayKeys are the properties that name a person, in priority order.
var displayKeys = []string{"email", "Email", "$email", "name", "Name", "username", "Username", "UserName"}

// DisplayName is the first non-empty display property; else the first
// distinct id that does not look anonymous; else the id.
func DisplayName(props map[string]any, distinctIDs []string, id uint64) string {
	for _, k := range displayKeys {
		switch v := props[k].(type) {
		case string:
			if strings.TrimSpace(v) != "" {
				return v
			}
		case nil:
		default:
			if s := fmt.Sprint(v); s != "" {
				return s
			}
		}
	}
	for _, d := range distinctIDs {
		if !LooksAnonymous(d) {
			return d
		}
	}
	return fmt.Sprint(id)
}

var anonymousRE = regexp.MustCompile(`^[a-z0-9]+-[a-z0-9]+-[a-z0-9]+-[a-z0-9]+-[a-z0-9]+$`)

// LooksAnonymous reports whether a distinct id looks generated (five
// dash-separated lowercase alphanumeric groups, as SDK anonymous ids do).
func LooksAnonymous(distinctID string) bool { return anonymousRE.MatchString(distinctID) }

// SortDistinctIDs orders ids for display: ids that do not look anonymous
// first; within each group the given order (oldest first) is kept.
func SortDistinctIDs(ids []string) {
	sort.SliceStable(ids, func(i, j int) bool {
		return !LooksAnonymous(ids[i]) && LooksAnonymous(ids[j])
	})
}

var illegalFolded = map[string]bool{
	"anonymous": true, "guest": true, "distinctid": true, "distinct_id": true, "id": true,
	"not_authenticated": true, "email": true, "undefined": true, "true": true, "false": true,
}

var illegalExact = map[string]bool{
	"[object Object]": true, "NaN": true, "None": true, "none": true, "null": true, "0": true,
}

// IllegalDistinctID reports whether id must never take part in a merge.
// Quoted variants ("null" with the quotes, or single quotes) count too.
func IllegalDistinctID(id string) bool {
	s := strings.TrimSpace(id)
	if s == "" {
		return true
	}
	for _, q := range []string{`"`, `'`} {
		if len(s) >= 2 && strings.HasPrefix(s, q) && strings.HasSuffix(s, q) {
			s = strings.TrimSpace(s[1 : len(s)-1])
		}
	}
	return s == "" || illegalExact[s] || illegalFolded[strings.ToLower(s)]
}
