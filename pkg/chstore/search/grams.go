package search

import (
	"context"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/propfilter"
)

// search='s email part by key (schema 0012). An email contains a term
// only if it contains each of the term's trigrams, so the persons having
// the term's rarest trigrams are a superset of those whose email contains
// it: read by key from person_email_grams, not by scanning every email of
// the project. Case: the grams are of the email lowered, and an ASCII
// email contains an ASCII term case-insensitively exactly when the
// lowered forms contain each other (search.go says why UTF-8 keeps that
// exact). An email with any other byte, or too long to index, has the one
// gram "": a candidate of every search, as in the scan's fold.

// maxGramEmail is the longest email indexed by its trigrams (RFC 5321's
// limit on a path); a longer one (the fold allows properties of 512 KiB)
// would write a row per byte.
const maxGramEmail = 254

// emailGrams are the distinct index terms of an email: its lowered
// trigrams, none for one shorter than three bytes (no term of three or
// more is in it), or "" alone for one the trigrams cannot serve. Migration
// 0012 computes the same in SQL.
func emailGrams(email string) []string {
	if len(email) > maxGramEmail || !isASCII(email) {
		return []string{""}
	}
	return trigrams(email)
}

// trigrams are the distinct trigrams of ASCII text lowered, sorted.
func trigrams(s string) []string {
	folded := strings.ToLower(s)
	grams := make([]string, 0, max(len(folded)-2, 0))
	for i := 0; i+3 <= len(folded); i++ {
		grams = append(grams, folded[i:i+3])
	}
	slices.Sort(grams)
	return slices.Compact(grams)
}

// WriteGrams writes the grams of each written person's email
// (but of those whose email the store's rows already index: EmailIndexed),
// in the stage of person_emails (before the persons rows): like it, a
// superset of the grams of the emails persons have. Each row carries the
// email lowered (schema 0016; empty with gram ""), which a search tests
// on the rows of its rarest gram. Columns are appended whole: a person has
// about twenty grams, and a row-by-row Append costs the ingester a call
// per value.
func (x *Index) WriteGrams(ctx context.Context, persons []fold.PersonRow) error {
	// The grams first, so the columns are allocated once at their size
	// (some twenty rows a person: grown by append, they were a few
	// percent of the ingester's CPU in the ingest benchmark's profile,
	// with the GC's share).
	type emailRows struct {
		at     int // in persons
		grams  []string
		folded string
	}
	var each []emailRows
	n := 0
	for k, p := range persons {
		v, ok := p.Properties["email"]
		if !ok || p.EmailIndexed {
			continue
		}
		email := propfilter.ValueText(v)
		gs := emailGrams(email)
		folded := ""
		if len(gs) > 0 && gs[0] != "" {
			folded = strings.ToLower(email)
		}
		each = append(each, emailRows{k, gs, folded})
		n += len(gs)
	}
	if n == 0 {
		return nil
	}
	projects, ids, versions := make([]uint64, 0, n), make([]uint64, 0, n), make([]uint64, 0, n)
	grams, emails := make([]string, 0, n), make([]string, 0, n)
	gramBytes, emailBytes := 0, 0
	for _, e := range each {
		p := &persons[e.at]
		for _, g := range e.grams {
			projects, ids, versions = append(projects, p.ProjectID), append(ids, p.ID), append(versions, p.Version)
			grams, emails = append(grams, g), append(emails, e.folded)
			gramBytes, emailBytes = gramBytes+len(g), emailBytes+len(e.folded)
		}
	}
	batch, err := x.conn.PrepareBatch(ctx, `INSERT INTO person_email_grams (project_id, gram, id, version, email)`)
	if err != nil {
		return err
	}
	// The driver would grow both string columns by doubling (they were
	// half of the grams' allocation in the ingest benchmark).
	statement.ReserveStrings(batch, 1, n, gramBytes)
	statement.ReserveStrings(batch, 4, n, emailBytes)
	for i, col := range []any{projects, grams, ids, versions, emails} {
		if err := batch.Column(i).Append(col); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

// Choosing the gram to read. A common gram (`use`, `@ex`, `com`) names
// nearly every person and costs as much as the scan it replaces; the
// term's rarest gram names few, and the test of its rows' emails leaves
// the persons whose email contains the term (or did: old emails' rows
// stay). The sizes are found by counting each probed gram's key range up
// to a cap (the count stops there), so the probe costs at most
// probedGrams x cap key rows, and are kept a while (gramsizes.go): a
// gram's size changes slowly, and which gram is read changes the cost of
// a search, never its result. When every probed gram reaches the cap,
// the one read is chosen by name among them: at worst a range as long as
// the scan of person_emails it replaces.
const (
	probedGrams = 6 // grams of a long term probed (spread over it)
	minGramCap  = 1024
	maxGramCap  = 8192
	// A gram above 1/256 of the project's persons is not rare. The
	// probe's cost is about the rows it counts (~0.1 ms per 1,000 at 1M
	// persons), so the cap is set low: every probed gram at
	// the cap is rare enough to read as often as not.
	gramCapShare = 256
)

// Probe is search='s choice of gram: the grams weighed (all of the
// term's with the census, a spread few when probed), the cap of each
// probe's count (0 with the census), and the rarest of them, the one read.
type Probe struct {
	grams  []string
	limit  uint64
	rarest string
}

// Probe is the probe of a project's search term, or none when the email
// part must scan: no term, a term shorter than a gram or not ASCII (its
// case folding is Unicode's).
func (x *Index) Probe(ctx context.Context, project uint64, term string) (Probe, error) {
	if len(term) < 3 || !isASCII(term) {
		return Probe{}, nil
	}
	// The census knows every gram, so every gram of the term is a
	// choice, and no cap applies; the probe counts a spread few.
	all := trigrams(term)
	p := Probe{grams: all}
	sizes, ok := x.sizes.fromCensus(project, all)
	if !ok {
		p = Probe{grams: spread(all, probedGrams), limit: maxGramCap}
		if live, ok, err := x.live(ctx, project); err != nil {
			return Probe{}, err
		} else if ok {
			p.limit = min(max(live/gramCapShare, minGramCap), maxGramCap)
		}
		var err error
		if sizes, err = x.sizesOf(ctx, project, p); err != nil {
			return Probe{}, err
		}
	}
	// The smallest count, then the first by name (among grams at the
	// cap, an arbitrary but stable choice).
	p.rarest = p.grams[0]
	for _, g := range p.grams[1:] {
		if n, r := sizes[g], sizes[p.rarest]; n < r || (n == r && g < p.rarest) {
			p.rarest = g
		}
	}
	return p, nil
}

// sizesOf returns the capped count of each of p's grams in project's
// person_email_grams: those kept (gramsizes.go), and the others counted in
// one statement.
func (x *Index) sizesOf(ctx context.Context, project uint64, p Probe) (map[string]uint64, error) {
	sizes, missing := x.sizes.get(project, p.grams, p.limit)
	if len(missing) == 0 {
		return sizes, nil
	}
	x.sizes.mu.Lock()
	x.sizes.probes++
	x.sizes.mu.Unlock()
	parts := make([]string, len(missing))
	args := make([]any, 0, 3*len(missing))
	for i, g := range missing {
		parts[i] = "SELECT ? AS gram, count() AS n FROM (SELECT 1 FROM person_email_grams WHERE project_id = ? AND gram = ? LIMIT ?)"
		args = append(args, g, project, g, p.limit)
	}
	rows, err := x.conn.Query(p.Ctx(ctx), strings.Join(parts, " UNION ALL "), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var g string
		var n uint64
		if err := rows.Scan(&g, &n); err != nil {
			return nil, err
		}
		sizes[g] = n
		x.sizes.put(project, g, n, p.limit)
	}
	return sizes, rows.Err()
}

// Ctx is statement.Read for the probe's counts and the search's candidates:
// blocks of a granule, one stream. A count stops at its LIMIT only between
// blocks, and the default block (65,536 rows) or streams reading ahead
// would read the common grams far past the cap. The candidates' statement
// reads a gram's key range and the candidates' granules of persons, small
// reads that one stream serves best. Its settings replace the caller's,
// so it keeps statement.KeyRead's priority itself: a user waits for these as for
// any list page (an export's few candidates share it).
func (p Probe) Ctx(ctx context.Context) context.Context {
	if len(p.grams) == 0 {
		return ctx
	}
	return statement.Bound(ctx, clickhouse.Settings{"optimize_move_to_prewhere": 0, "max_block_size": minGramCap, "max_threads": 1, "priority": statement.KeyReadPriority})
}

// spread is at most n of grams, evenly spaced, the first and last kept
// (which grams are probed changes the cost, never the result).
func spread(grams []string, n int) []string {
	if len(grams) <= n {
		return grams
	}
	out := make([]string, n)
	for i := range n {
		out[i] = grams[i*(len(grams)-1)/(n-1)]
	}
	return out
}
