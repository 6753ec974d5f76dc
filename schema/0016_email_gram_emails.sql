-- search='s email part checked on the gram rows (issue #12, G5c): each row
-- of person_email_grams carries the email it was cut from, lowered (ASCII
-- only; '' on the rows of gram '', whose emails the grams cannot serve),
-- so a search reads the key range of its one rarest gram and keeps the
-- rows whose email contains the term, instead of intersecting several
-- grams' ranges into candidates that persons FINAL then reads granule by
-- granule (pkg/chstore/grams.go). A row written before this column has
-- email '': a candidate of its gram's every search, as before.
ALTER TABLE person_email_grams ADD COLUMN email String DEFAULT ''
;
-- Upgrade: the rows again, with their emails (same key and version; the
-- merge keeps the later insert, and readers take either). Idempotent.
INSERT INTO person_email_grams (project_id, gram, id, version, email)
SELECT project_id, arrayJoin(
    if(length(email) > 254 OR arrayExists(i -> reinterpretAsUInt8(substring(email, i + 1, 1)) >= 128, range(length(email))),
       [''],
       arrayMap(i -> substring(lower(email), i + 1, 3), range(toUInt64(greatest(length(email), 2) - 2))))
  ) AS gram, id, version,
  if(gram = '', '', lower(email))
FROM person_emails
