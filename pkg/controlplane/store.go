package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/kvjson"
)

// Bucket names.
const (
	BucketOrganizations = "cp_organizations"
	BucketProjects      = "cp_projects"
	BucketKeys          = "cp_api_keys"
)

const bucketHistory = 5

// Store is the control-plane store. It is safe for concurrent use. Create it
// with Open and release it with Close.
type Store struct {
	logger   *slog.Logger
	orgs     jetstream.KeyValue
	projects jetstream.KeyValue
	keys     jetstream.KeyValue

	ix *index
	// projectHint is a lower bound for the next free project id, shared by
	// concurrent CreateProject calls in this process to avoid re-probing ids
	// that were just taken.
	projectHint atomic.Uint64

	cancel        context.CancelFunc
	wg            sync.WaitGroup
	closeOnce     sync.Once
	projectsReady chan struct{}
	keysReady     chan struct{}
}

// Open creates (or binds to) the control-plane buckets, starts the watchers
// that keep the in-memory index fresh, and waits until they have delivered
// the current contents (see WaitSynced). ctx bounds only the opening; the
// watchers run until Close. A nil logger discards logs.
func Open(ctx context.Context, js jetstream.JetStream, logger *slog.Logger) (*Store, error) {
	if js == nil {
		return nil, errors.New("controlplane: nil JetStream")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		logger:        logger.With(slog.String("component", "controlplane")),
		ix:            newIndex(),
		projectsReady: make(chan struct{}),
		keysReady:     make(chan struct{}),
	}
	var err error
	if s.orgs, err = ensureBucket(ctx, js, BucketOrganizations, "organizations"); err != nil {
		return nil, err
	}
	if s.projects, err = ensureBucket(ctx, js, BucketProjects, "projects by id"); err != nil {
		return nil, err
	}
	if s.keys, err = ensureBucket(ctx, js, BucketKeys, "personal API keys by id"); err != nil {
		return nil, err
	}

	// The watchers outlive ctx: they stop on Close.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Add(2)
	go s.runWatcher(wctx, s.projects, s.projectsReady, s.applyProject)
	go s.runWatcher(wctx, s.keys, s.keysReady, s.applyKey)

	if err := s.WaitSynced(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("controlplane: initial sync: %w", err)
	}
	return s, nil
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, name, desc string) (jetstream.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      name,
		Description: "personhub control plane: " + desc,
		History:     bucketHistory,
		Storage:     jetstream.FileStorage,
		// Replicas unset: NATS_REPLICAS decides (stream.Replicated).
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Exists with a different configuration (e.g. tuned by an
		// operator): bind to it as is.
		kv, err = js.KeyValue(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("controlplane: open bucket %s: %w", name, err)
	}
	return kv, nil
}

// Close stops the watchers. It does not close the NATS connection. After
// Close the index is no longer updated; Close is idempotent.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.wg.Wait()
	})
}

// WaitSynced blocks until both watchers have delivered the bucket contents
// that existed when they started, or ctx is done. Open already waits for
// this; it is exported for callers that want to assert it again.
func (s *Store) WaitSynced(ctx context.Context) error {
	for _, ch := range []chan struct{}{s.projectsReady, s.keysReady} {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// runWatcher feeds one bucket into the index until ctx is cancelled. If the
// watch ends for any other reason (e.g. the connection closed) it is
// restarted with backoff; a restarted watch replays the latest value of
// every key, which the revision check in the index makes harmless.
func (s *Store) runWatcher(ctx context.Context, kv jetstream.KeyValue, ready chan struct{}, apply func(jetstream.KeyValueEntry)) {
	defer s.wg.Done()
	var readyOnce sync.Once
	log := s.logger.With(slog.String("bucket", kv.Bucket()))
	const minBackoff, maxBackoff = 50 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for {
		w, err := kv.WatchAll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.WarnContext(ctx, "kv watch failed; retrying", slog.Any("error", err), slog.Duration("backoff", backoff))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		backoff = minBackoff
		// Drain until the watcher closes (on ctx cancel or connection
		// close); never stop reading early, the producer blocks on a full
		// channel.
		for e := range w.Updates() {
			if e == nil {
				readyOnce.Do(func() { close(ready) })
				log.DebugContext(ctx, "kv watcher synced")
				continue
			}
			apply(e)
		}
		_ = w.Stop()
		if ctx.Err() != nil {
			return
		}
		log.WarnContext(ctx, "kv watcher closed unexpectedly; restarting")
	}
}

func isDelete(e jetstream.KeyValueEntry) bool {
	op := e.Operation()
	return op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge
}

func (s *Store) applyProject(e jetstream.KeyValueEntry) {
	id, err := strconv.ParseUint(e.Key(), 10, 64)
	if err != nil || id == 0 {
		s.logger.Warn("ignoring unexpected key in projects bucket", slog.String("key", e.Key()))
		return
	}
	if isDelete(e) {
		s.ix.putProject(id, e.Revision(), Project{}, true)
		return
	}
	var p Project
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		s.logger.Warn("ignoring undecodable project", slog.String("key", e.Key()), slog.Any("error", err))
		return
	}
	s.ix.putProject(id, e.Revision(), p, false)
}

func (s *Store) applyKey(e jetstream.KeyValueEntry) {
	if isDelete(e) {
		s.ix.putKey(e.Key(), e.Revision(), Key{}, true)
		return
	}
	var k Key
	if err := json.Unmarshal(e.Value(), &k); err != nil {
		s.logger.Warn("ignoring undecodable API key", slog.String("key", e.Key()), slog.Any("error", err))
		return
	}
	s.ix.putKey(e.Key(), e.Revision(), k, false)
}

// getJSON reads and decodes one record, mapping absence to ErrNotFound.
func getJSON[T any](ctx context.Context, kv jetstream.KeyValue, key, what string) (T, uint64, error) {
	var v T
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return v, 0, fmt.Errorf("%w: %s %q", ErrNotFound, what, key)
	}
	if err != nil {
		return v, 0, fmt.Errorf("controlplane: get %s %q: %w", what, key, err)
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return v, 0, fmt.Errorf("controlplane: decode %s %q: %w", what, key, err)
	}
	return v, e.Revision(), nil
}

// listAll reads every live record of kv, logging and skipping any that
// does not decode.
func listAll[T any](ctx context.Context, kv jetstream.KeyValue, logger *slog.Logger) ([]T, error) {
	list, err := kvjson.List[T](ctx, kv, func(key string, err error) error {
		logger.WarnContext(ctx, "ignoring undecodable record",
			slog.String("bucket", kv.Bucket()), slog.String("key", key), slog.Any("error", err))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	return list, nil
}
