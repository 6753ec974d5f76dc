package search

import (
	"context"

	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/propfilter"
)

// WriteEmails writes each written person's email (the text the
// filters compare; not again when the store's row has the same email:
// EmailIndexed), before the persons rows: the table is a superset of
// the emails the persons have (the list tests the newest row).
func (x *Index) WriteEmails(ctx context.Context, persons []fold.PersonRow) error {
	var rows []fold.PersonRow
	for _, p := range persons {
		if _, ok := p.Properties["email"]; ok && !p.EmailIndexed {
			rows = append(rows, p)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	batch, err := x.conn.PrepareBatch(ctx, `INSERT INTO person_emails (project_id, email, id, version)`)
	if err != nil {
		return err
	}
	for _, p := range rows {
		if err := batch.Append(p.ProjectID, propfilter.ValueText(p.Properties["email"]), p.ID, p.Version); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}
