package chstore

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/propfilter"
)

// search='s email part by key (schema 0012, G5c). An email contains a term
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
	var grams []string
	for i := 0; i+3 <= len(folded); i++ {
		grams = append(grams, folded[i:i+3])
	}
	slices.Sort(grams)
	return slices.Compact(grams)
}

// writePersonEmailGrams writes the grams of each written person's email,
// in the stage of person_emails (before the persons rows): like it, a
// superset of the grams of the emails persons have. Columns are appended
// whole: a person has about twenty grams, and a row-by-row Append costs
// the ingester a call per value.
func (s *Store) writePersonEmailGrams(ctx context.Context, persons []fold.PersonRow) error {
	var projects, ids, versions []uint64
	var grams []string
	for _, p := range persons {
		v, ok := p.Properties["email"]
		if !ok {
			continue
		}
		for _, g := range emailGrams(propfilter.ValueText(v)) {
			projects, ids, versions = append(projects, p.ProjectID), append(ids, p.ID), append(versions, p.Version)
			grams = append(grams, g)
		}
	}
	if len(grams) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO person_email_grams (project_id, gram, id, version)`)
	if err != nil {
		return err
	}
	for i, col := range []any{projects, grams, ids, versions} {
		if err := batch.Column(i).Append(col); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

// Choosing the grams to read. A common gram (`use`, `@ex`, `com`) names
// nearly every person and costs as much as the scan it replaces; the
// term's rare grams name few, and their intersection fewer. Their sizes
// are found by counting each gram's key range up to a cap (the count stops
// there), so the probe reads at most probedGrams x cap key rows.
const (
	probedGrams  = 6 // grams of a long term probed (spread over it)
	chosenGrams  = 4 // rarest grams intersected
	minGramCap   = 1024
	maxGramCap   = 16384
	gramCapShare = 64 // a gram above 1/64 of the project's persons is not rare
)

// searchGrams are the rare grams of q's search term to intersect, or nil
// when the email part must scan: a term shorter than a gram or not ASCII
// (its case folding is Unicode's), or one whose every gram is common.
func (s *Store) searchGrams(ctx context.Context, q ListQuery) ([]string, error) {
	if len(q.Search) < 3 || !isASCII(q.Search) {
		return nil, nil
	}
	grams := spread(trigrams(q.Search), probedGrams)
	limit := uint64(maxGramCap)
	if live, _, ok, err := s.LiveCount(ctx, q.ProjectID); err != nil {
		return nil, err
	} else if ok {
		limit = min(max(live/gramCapShare, minGramCap), maxGramCap)
	}
	parts := make([]string, len(grams))
	args := make([]any, 0, 3*len(grams))
	for i, g := range grams {
		parts[i] = "SELECT ? AS gram, count() AS n FROM (SELECT 1 FROM person_email_grams WHERE project_id = ? AND gram = ? LIMIT ?)"
		args = append(args, g, q.ProjectID, g, limit)
	}
	// Blocks of a granule, one stream: a count stops at its LIMIT only
	// between blocks, and the default block (65,536 rows) or streams
	// reading ahead would read the common grams far past the cap.
	settings := clickhouse.Settings{"max_block_size": minGramCap, "max_threads": 1}
	rows, err := s.conn.Query(boundCtx(ctx, settings), strings.Join(parts, " UNION ALL "), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type sized struct {
		gram string
		n    uint64
	}
	var rare []sized
	for rows.Next() {
		var g sized
		if err := rows.Scan(&g.gram, &g.n); err != nil {
			return nil, err
		}
		if g.n < limit {
			rare = append(rare, g)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(rare, func(a, b sized) int { return cmp.Or(cmp.Compare(a.n, b.n), strings.Compare(a.gram, b.gram)) })
	var out []string
	for _, g := range rare[:min(len(rare), chosenGrams)] {
		out = append(out, g.gram)
	}
	return out, nil
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
