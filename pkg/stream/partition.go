package stream

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Partitions (docs/operations.md, "More than one ingester"). With n > 1
// the EVENTS stream carries a subject transform that inserts a partition
// token computed from the project: a message published on events.<p> or
// commands.<p> is stored as events.<k>.<p> or commands.<k>.<p>, k =
// partition(n, p). Publishers do not change. The token depends on the
// project only, so every message of a project lands in one partition and
// one ingester folds it: merges never cross partitions.
//
// Messages stored before the transform existed (a stream upgraded in
// place from one partition) keep their two-token subjects; each
// partition's consumer also reads those and takes the ones whose project
// maps to it (PartitionOf computes the server's mapping), so a replay
// from the start folds them in the right partition too.

// MaxPartitions bounds the partition count: each partition is a durable
// consumer and an ingester.
const MaxPartitions = 256

// PartitionOf is the partition of a project token (the subject's last
// token, e.g. "42") among n, as the server's {{partition(n,...)}} mapping
// computes it: FNV-1a (32 bits) of the token's text, modulo n.
func PartitionOf(projectToken string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(projectToken))
	return int(h.Sum32() % uint32(n))
}

// partitionSource matches the subjects the transform rewrites: every
// two-token subject the stream receives (events.<p>, commands.<p>).
const partitionSource = "*.*"

// PartitionTransform is the stream's subject transform for n partitions
// (nil for one: subjects are stored as published).
func PartitionTransform(n int) *jetstream.SubjectTransformConfig {
	if n <= 1 {
		return nil
	}
	return &jetstream.SubjectTransformConfig{
		Source:      partitionSource,
		Destination: fmt.Sprintf("{{wildcard(1)}}.{{partition(%d,2)}}.{{wildcard(2)}}", n),
	}
}

var transformDest = regexp.MustCompile(`^\{\{wildcard\(1\)\}\}\.\{\{partition\((\d+),2\)\}\}\.\{\{wildcard\(2\)\}\}$`)

// PartitionsOf reads the partition count from a stream's configuration:
// 1 without a transform; an error for a transform this contract did not
// make (an operator's own mapping, which the ingesters cannot follow).
func PartitionsOf(cfg jetstream.StreamConfig) (int, error) {
	tr := cfg.SubjectTransform
	if tr == nil || tr.Source == "" && tr.Destination == "" {
		return 1, nil
	}
	m := transformDest.FindStringSubmatch(strings.ReplaceAll(tr.Destination, " ", ""))
	if tr.Source != partitionSource || m == nil {
		return 0, fmt.Errorf("stream %s has a subject transform %q -> %q that is not the partition mapping", cfg.Name, tr.Source, tr.Destination)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 2 || n > MaxPartitions {
		return 0, fmt.Errorf("stream %s: partition count %q out of range 2..%d", cfg.Name, m[1], MaxPartitions)
	}
	return n, nil
}

// ValidatePartition checks a partition count and one partition of it.
func ValidatePartition(partition, n int) error {
	switch {
	case n < 1 || n > MaxPartitions:
		return fmt.Errorf("partitions %d out of range 1..%d", n, MaxPartitions)
	case partition < 0 || partition >= n:
		return fmt.Errorf("partition %d out of range 0..%d", partition, n-1)
	}
	return nil
}

// ConsumerName is the durable consumer (and commit marker, intent and
// watermark key) of one partition: base itself for one partition, so a
// single ingester keeps today's name, and base-<k>-of-<n> otherwise, so a
// consumer of another partition count never reads these markers.
func ConsumerName(base string, partition, n int) string {
	if n <= 1 {
		return base
	}
	return fmt.Sprintf("%s-%d-of-%d", base, partition, n)
}

// PartitionFilter is what the consumer of a partition reads: its own
// partitioned subjects and, when legacy, the two-token subjects of
// messages stored before the transform (of every partition: Route picks
// its own).
//
// The server reads the messages of a consumer with one filter subject (or
// none) in sequence, skipping blocks without a match; given several, it
// intersects its subject tree with them for every message (22% of the
// NATS server's CPU in the bench's ingest with two,
// docs/performance-history.md). So
// unpartitioned it is nil, the whole stream (which holds EventsSubjects
// only), and a partition's subjects of both kinds are one filter,
// *.<k>.*; the four filters of the legacy form are for a consumer that
// starts at or below the last two-token message (LegacyFrom).
func PartitionFilter(partition, n int, legacy bool) []string {
	if n <= 1 {
		return nil
	}
	k := strconv.Itoa(partition)
	if !legacy {
		return []string{"*." + k + ".*"}
	}
	return []string{EventsPrefix + k + ".*", CommandsPrefix + k + ".*", EventsPrefix + "*", CommandsPrefix + "*"}
}

// LegacyFrom reports whether the stream holds a message stored before the
// partition transform (a two-token subject) at sequence from or above.
// Two-token subjects are stored only before the transform exists, so the
// answer never turns from false to true.
func LegacyFrom(ctx context.Context, s jetstream.Stream, from uint64) (bool, error) {
	m, err := s.GetLastMsgForSubject(ctx, partitionSource)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("last message stored before the partitions: %w", err)
	}
	return m.Sequence >= from, nil
}

// Route reads a stored subject for the consumer of partition k of n: mine
// says whether that consumer folds (or dead-letters) the message; a
// message of another partition is only acknowledged. err is the reason a
// message of its own can never be folded (a dead letter).
func Route(subject string, partition, n int) (mine bool, project uint64, command bool, err error) {
	if n <= 1 {
		project, command, err = ParseSubject(subject)
		return true, project, command, err
	}
	toks := strings.Split(subject, ".")
	switch len(toks) {
	case 2: // stored before the transform
		if PartitionOf(toks[1], n) != partition {
			return false, 0, false, nil
		}
		project, command, err = ParseSubject(subject)
		return true, project, command, err
	case 3:
		if toks[1] != strconv.Itoa(partition) {
			return false, 0, false, nil
		}
		project, command, err = ParseSubject(toks[0] + "." + toks[2])
		if err == nil && PartitionOf(toks[2], n) != partition {
			// Published on a partitioned subject directly: folding it
			// here would split the project over two ingesters.
			err = fmt.Errorf("subject %q: project %d belongs to partition %d of %d; publish on %s<project_id>",
				subject, project, PartitionOf(toks[2], n), n, toks[0]+".")
		}
		return true, project, command, err
	}
	return true, 0, false, fmt.Errorf("subject %q: want events.<project id> or commands.<project id>", subject)
}

// DeadLetterSubject is where a stored message goes when it can never be
// folded: dlq.<kind>.<project> without the partition token, so dead
// letters read the same at every partition count, or
// dlq.events.invalid for a subject without a project.
func DeadLetterSubject(subject string) string {
	toks := strings.Split(subject, ".")
	if len(toks) == 3 {
		subject = toks[0] + "." + toks[2]
	}
	if _, err := ProjectOf(subject); err != nil {
		return DeadLetterPrefix + EventsPrefix + "invalid"
	}
	return DeadLetterPrefix + subject
}
