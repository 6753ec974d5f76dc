package kvjson

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound: no record under that key.
var ErrNotFound = errors.New("kvjson: not found")

// ErrConflict: a read-modify-write lost to concurrent writers too often.
var ErrConflict = errors.New("kvjson: too many concurrent updates; try again")

// maxCASRetries bounds optimistic-concurrency retries.
const maxCASRetries = 64

// seqKey holds a bucket's id sequence: the last id given out. Record keys
// are "<project>.<id>", so a watch on "<project>.*" never sees it.
const seqKey = "seq"

// Records are the per-project JSON records of one bucket (actions,
// cohorts): key "<project>.<id>", ids from one sequence per bucket.
type Records[T any] struct {
	KV jetstream.KeyValue
}

// OpenRecords creates (or binds to) the bucket.
func OpenRecords[T any](ctx context.Context, js jetstream.JetStream, bucket, desc string) (*Records[T], error) {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Description: desc, History: 5, Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	return &Records[T]{KV: kv}, nil
}

func recordKey(project, id uint64) string {
	return strconv.FormatUint(project, 10) + "." + strconv.FormatUint(id, 10)
}

// NextID gives out the next id of the bucket's sequence: a compare-and-set
// on one key, so concurrent API instances never give out the same id, and
// ids are never reused (records are soft-deleted, never removed).
func (s *Records[T]) NextID(ctx context.Context) (uint64, error) {
	for range maxCASRetries {
		e, err := s.KV.Get(ctx, seqKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if _, err := s.KV.Create(ctx, seqKey, []byte("1")); err == nil {
				return 1, nil
			} else if !isConflict(err) {
				return 0, fmt.Errorf("%s sequence: %w", s.KV.Bucket(), err)
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("%s sequence: %w", s.KV.Bucket(), err)
		}
		n, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s sequence holds %q", s.KV.Bucket(), e.Value())
		}
		next := strconv.FormatUint(n+1, 10)
		if _, err := s.KV.Update(ctx, seqKey, []byte(next), e.Revision()); err == nil {
			return n + 1, nil
		} else if !isConflict(err) {
			return 0, fmt.Errorf("%s sequence: %w", s.KV.Bucket(), err)
		}
	}
	return 0, ErrConflict
}

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// Create stores a new record; the key must not exist.
func (s *Records[T]) Create(ctx context.Context, project, id uint64, v T) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := s.KV.Create(ctx, recordKey(project, id), data); err != nil {
		return fmt.Errorf("create %s/%d: %w", s.KV.Bucket(), id, err)
	}
	return nil
}

// Get reads one record, or ErrNotFound.
func (s *Records[T]) Get(ctx context.Context, project, id uint64) (T, error) {
	var v T
	e, err := s.KV.Get(ctx, recordKey(project, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return v, ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("get %s/%d: %w", s.KV.Bucket(), id, err)
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return v, fmt.Errorf("decode %s/%d: %w", s.KV.Bucket(), id, err)
	}
	return v, nil
}

// Modify is a read-modify-write of one record: fn changes a copy read at
// the latest revision, written only over that revision, retried on a
// conflict, so concurrent changes never overwrite each other. An error
// from fn stops it. It returns the record after the change.
func (s *Records[T]) Modify(ctx context.Context, project, id uint64, fn func(*T) error) (T, error) {
	key := recordKey(project, id)
	var zero T
	for range maxCASRetries {
		e, err := s.KV.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return zero, ErrNotFound
		}
		if err != nil {
			return zero, fmt.Errorf("get %s/%d: %w", s.KV.Bucket(), id, err)
		}
		var v T
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			return zero, fmt.Errorf("decode %s/%d: %w", s.KV.Bucket(), id, err)
		}
		if err := fn(&v); err != nil {
			return zero, err
		}
		data, err := json.Marshal(v)
		if err != nil {
			return zero, err
		}
		_, err = s.KV.Update(ctx, key, data, e.Revision())
		if isConflict(err) {
			continue
		}
		if err != nil {
			return zero, fmt.Errorf("write %s/%d: %w", s.KV.Bucket(), id, err)
		}
		return v, nil
	}
	return zero, ErrConflict
}

// List returns every record of a project (soft-deleted ones included), in
// no particular order; one that does not decode is an error.
func (s *Records[T]) List(ctx context.Context, project uint64) ([]T, error) {
	return listWatch[T](ctx, s.KV, strconv.FormatUint(project, 10)+".*", func(key string, err error) error {
		return fmt.Errorf("decode %s/%s: %w", s.KV.Bucket(), key, err)
	})
}

// Version is the bucket's last stream sequence: it changes with every
// write to any of its keys, so a listing made after reading a version is
// current for as long as the version is (one request to the server; a
// listing is a consumer's creation, delivery and deletion).
func (s *Records[T]) Version(ctx context.Context) (uint64, error) {
	st, err := s.KV.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s status: %w", s.KV.Bucket(), err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return 0, fmt.Errorf("%s status: no stream info", s.KV.Bucket())
	}
	return bs.StreamInfo().State.LastSeq, nil
}
