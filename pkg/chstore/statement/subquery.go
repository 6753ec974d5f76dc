package statement

// Subquery is a SELECT with its bound arguments, built by the package
// that owns the tables it reads, for a statement of another owner to read:
// of one column inside an IN (the persons list's key conditions read the
// search index's candidates so), or as the rows a statement selects from
// (Text; the analysis reads the events attributed to persons so). A
// caller combines subqueries and places them; it does not edit their
// text.
type Subquery struct {
	sql  string
	args []any
}

// NewSubquery is the SELECT sql, its placeholders bound to args in order.
func NewSubquery(sql string, args ...any) Subquery { return Subquery{sql: sql, args: args} }

// Union is the rows of q then of others (UNION ALL), their arguments in
// that order.
func (q Subquery) Union(others ...Subquery) Subquery {
	out := Subquery{sql: q.sql, args: append([]any(nil), q.args...)}
	for _, o := range others {
		out.sql += " UNION ALL " + o.sql
		out.args = append(out.args, o.args...)
	}
	return out
}

// In is the condition that column is among the subquery's rows, and its
// arguments.
func (q Subquery) In(column string) (string, []any) {
	return column + " IN (" + q.sql + ")", q.args
}

// IsZero reports whether q is the zero Subquery, no SELECT at all.
func (q Subquery) IsZero() bool { return q.sql == "" }

// Text is the subquery as a statement of its own, and its arguments: run
// alone, its reads show in the progress a client receives, which they do
// not inside an IN (18.16); the tests of the search index count them so.
func (q Subquery) Text() (string, []any) { return q.sql, q.args }
