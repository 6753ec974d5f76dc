package chstore

import (
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// distinctIDOwners names every person that has owned a distinct id
// (arguments: project, distinct id), read by key without FINAL: a superset
// of its live owner, for a list's key condition. The list's test on the
// newest row, has(distinct_ids, ?), decides, as the person shown does:
// its distinct_ids are the ones the API returns.
const distinctIDOwners = "SELECT person_id FROM person_distinct_ids WHERE project_id = ? AND distinct_id = ?"

// searchCandidates is a statement naming a superset of the persons that
// search= matches (an email containing the term, case-insensitively; the
// term as a distinct id; the term as a uuid), by id, and its arguments.
//
// The email part reads, when a probe is given (grams.go), the rows of the
// term's rarest gram in person_email_grams whose email (lowered) contains
// the term lowered, or is unknown (a row written before schema 0016), and
// the persons whose email the grams cannot serve (gram ""), by key.
// Otherwise (a term too short or not ASCII) it scans person_emails. For a
// term in ASCII that scan compares the column folded (schema 0011: the
// email lowered when it is ASCII, else empty) with position(), several
// times cheaper than positionCaseInsensitiveUTF8 over the email (G5c): for
// ASCII text, a case-insensitive match is exactly a match of the ASCII
// lowercase forms, and UTF-8 never encodes another character with ASCII
// bytes. A non-ASCII email (folded empty, gram "") is always a candidate,
// since Unicode case folding could map its characters onto the term's
// (the Kelvin sign onto k); the caller tests the newest row anyway, so
// candidates are only ever too many, never too few.
func searchCandidates(projectID uint64, term string, p gramProbe) (string, []any) {
	email := "SELECT id FROM person_emails WHERE project_id = ? AND positionCaseInsensitiveUTF8(email, ?) > 0"
	args := []any{projectID, term}
	switch {
	case len(p.grams) > 0:
		email = `SELECT id FROM person_email_grams WHERE project_id = ? AND gram = ? AND (email = '' OR position(email, ?) > 0)
			UNION ALL SELECT id FROM person_email_grams WHERE project_id = ? AND gram = ''`
		args = []any{projectID, p.rarest, strings.ToLower(term), projectID}
	case isASCII(term):
		email = "SELECT id FROM person_emails WHERE project_id = ? AND (position(folded, ?) > 0 OR folded = '')"
		args = []any{projectID, strings.ToLower(term)}
	}
	sql := email + " UNION ALL " + distinctIDOwners
	args = append(args, projectID, term)
	if u, err := uuid.Parse(term); err == nil {
		// uuid never changes between versions: any row names the id.
		sql += " UNION ALL SELECT id FROM persons WHERE project_id = ? AND uuid = ?"
		args = append(args, projectID, u)
	}
	return sql, args
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
