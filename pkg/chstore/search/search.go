// Package search owns the index behind the persons list's search= and
// email= filters: person_emails and person_email_grams (schemas 0011,
// 0012, 0016). The ingester writes a batch's emails and grams through it
// (before the persons rows, which the index may run ahead of), and the
// list reads from it the candidates of a term, choosing the term's
// rarest gram by probing the grams' sizes or from a census of them.
package search

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Index is the search index of persons' emails: person_emails (each
// person's email as written, and folded) and person_email_grams (its
// trigrams), on a store's pool.
type Index struct {
	conn  driver.Conn
	sizes *gramSizes // the probed grams' sizes and the census (gramsizes.go)
	// live is the project's live persons as the ingester counts them (ok
	// false: none counted), which caps a probe's counts.
	live func(ctx context.Context, project uint64) (n uint64, ok bool, err error)
}

// New returns the index on conn; live gives a project's live persons.
func New(conn driver.Conn, live func(ctx context.Context, project uint64) (uint64, bool, error)) *Index {
	x := &Index{conn: conn, live: live}
	x.sizes = newGramSizes(x.readCensus)
	return x
}

// EmailOwners names the persons that have had the email (arguments
// bound), a superset of those who have it now: the index keeps old
// emails too, so the caller tests the newest row.
func EmailOwners(projectID uint64, email string) statement.Subquery {
	return statement.NewSubquery("SELECT id FROM person_emails WHERE project_id = ? AND email = ?", projectID, email)
}

// Candidates names, by id, a superset of the persons whose email contains
// term case-insensitively (search='s email part).
//
// It reads, when the probe found grams (grams.go), the rows of the
// term's rarest gram in person_email_grams whose email (lowered) contains
// the term lowered, or is unknown (a row written before schema 0016), and
// the persons whose email the grams cannot serve (gram ""), by key.
// Otherwise (a term too short or not ASCII) it scans person_emails. For a
// term in ASCII that scan compares the column folded (schema 0011: the
// email lowered when it is ASCII, else empty) with position(), several
// times cheaper than positionCaseInsensitiveUTF8 over the email: for
// ASCII text, a case-insensitive match is exactly a match of the ASCII
// lowercase forms, and UTF-8 never encodes another character with ASCII
// bytes. A non-ASCII email (folded empty, gram "") is always a candidate,
// since Unicode case folding could map its characters onto the term's
// (the Kelvin sign onto k); the caller tests the newest row anyway, so
// candidates are only ever too many, never too few.
func (p Probe) Candidates(projectID uint64, term string) statement.Subquery {
	switch {
	case len(p.grams) > 0:
		return statement.NewSubquery(`SELECT id FROM person_email_grams WHERE project_id = ? AND gram = ? AND (email = '' OR position(email, ?) > 0)
			UNION ALL SELECT id FROM person_email_grams WHERE project_id = ? AND gram = ''`, projectID, p.rarest, strings.ToLower(term), projectID)
	case isASCII(term):
		return statement.NewSubquery("SELECT id FROM person_emails WHERE project_id = ? AND (position(folded, ?) > 0 OR folded = '')", projectID, strings.ToLower(term))
	}
	return statement.NewSubquery("SELECT id FROM person_emails WHERE project_id = ? AND positionCaseInsensitiveUTF8(email, ?) > 0", projectID, term)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
