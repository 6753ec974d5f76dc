-- search='s email part (issue #12, G5c): a substring has no key, so it
-- scans person_emails. folded is the email lowered when it is ASCII, else
-- empty: an ASCII term is then found with position(), not the several
-- times slower positionCaseInsensitiveUTF8, and every non-ASCII email is
-- a candidate (pkg/chstore/search.go says why that is exact). MATERIALIZED:
-- a function of email that ClickHouse computes on insert (the ingester's
-- INSERT is unchanged), and on read for parts written before this column.
ALTER TABLE person_emails ADD COLUMN folded String MATERIALIZED if(length(email) = lengthUTF8(email), lower(email), '')
;
-- Writes the column into the old parts, so reads stop computing it from
-- email. One merge of the table, once.
OPTIMIZE TABLE person_emails FINAL
