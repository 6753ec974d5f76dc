-- search='s email part by key (issue #12, G5c): the trigrams of every
-- email person_emails holds, so an email containing a term is found from
-- the persons having the term's rarest trigrams instead of a scan of
-- every email of the project (pkg/chstore/grams.go). gram is three bytes
-- of the email lowered (ASCII), or '' for an email the trigrams cannot
-- serve (one with a byte outside ASCII, whose case folding is Unicode's,
-- or longer than 254 bytes): those are candidates of every search. Like
-- person_emails a superset (old emails' grams stay; readers test the
-- newest person row), written by the ingester in the same stage, before
-- the persons rows.
CREATE TABLE IF NOT EXISTS person_email_grams (
    project_id UInt64,
    gram       String,
    id         UInt64,
    version    UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, gram, id)
SETTINGS index_granularity = 1024
;
-- Upgrade: the grams of every email already in person_emails, as the
-- ingester computes them (TestEmailGramsMigrationMatchesTheIngester).
-- Idempotent.
INSERT INTO person_email_grams (project_id, gram, id, version)
SELECT project_id, arrayJoin(
    if(length(email) > 254 OR arrayExists(i -> reinterpretAsUInt8(substring(email, i + 1, 1)) >= 128, range(length(email))),
       [''],
       arrayMap(i -> substring(lower(email), i + 1, 3), range(toUInt64(greatest(length(email), 2) - 2))))
  ) AS gram, id, version
FROM person_emails
