package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/kvjson"
)

// JetStream names.
const (
	BucketPlugins   = "plugins"          // key: decimal id; value: Plugin
	BucketConfigs   = "plugin_configs"   // key: decimal id; value: Config
	BucketURLs      = "plugin_urls"      // key: sha256 of the URL identity; value: urlClaim
	BucketSequences = "plugin_sequences" // keys "plugins", "plugin_configs": the last id given out
	ObjectSources   = "plugin_sources"   // objects "<plugin id>/<uuid>": a JSON Bundle
)

// maxCASRetries bounds read-modify-write retries on revision conflicts.
const maxCASRetries = 64

// claimGrace is how long a URL claim whose plugin record does not exist
// yet counts as an install in progress; Create writes the record well
// within it (everything slow happens before the claim).
const claimGrace = time.Minute

var errConflict = errors.New("plugin: too many concurrent updates; try again")

type store struct {
	plugins, configs, urls, seqs jetstream.KeyValue
	metrics                      jetstream.KeyValue // BucketConfigMetrics, written by the ingester
	sources                      jetstream.ObjectStore
	attachments                  jetstream.ObjectStore // ObjectAttachments
}

func openStore(ctx context.Context, js jetstream.JetStream) (*store, error) {
	s := &store{}
	var err error
	for _, b := range []struct {
		name string
		kv   *jetstream.KeyValue
	}{{BucketPlugins, &s.plugins}, {BucketConfigs, &s.configs}, {BucketURLs, &s.urls}, {BucketSequences, &s.seqs}} {
		*b.kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b.name, History: 5, Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			*b.kv, err = js.KeyValue(ctx, b.name)
		}
		if err != nil {
			return nil, fmt.Errorf("plugin: open bucket %s: %w", b.name, err)
		}
	}
	if s.metrics, err = OpenConfigMetrics(ctx, js); err != nil {
		return nil, err
	}
	s.sources, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ObjectSources, Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		s.sources, err = js.ObjectStore(ctx, ObjectSources)
	}
	if err != nil {
		return nil, fmt.Errorf("plugin: open object store %s: %w", ObjectSources, err)
	}
	if s.attachments, err = openAttachments(ctx, js); err != nil {
		return nil, err
	}
	return s, nil
}

func idKey(id uint64) string { return strconv.FormatUint(id, 10) }

// nextID gives out the next id of a sequence (compare-and-set on one key).
func (s *store) nextID(ctx context.Context, seq string) (uint64, error) {
	for range maxCASRetries {
		e, err := s.seqs.Get(ctx, seq)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if _, err := s.seqs.Create(ctx, seq, []byte("1")); err == nil {
				return 1, nil
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				return 0, fmt.Errorf("plugin: sequence %s: %w", seq, err)
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("plugin: sequence %s: %w", seq, err)
		}
		n, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("plugin: sequence %s holds %q", seq, e.Value())
		}
		if _, err := s.seqs.Update(ctx, seq, []byte(idKey(n+1)), e.Revision()); err == nil {
			return n + 1, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("plugin: sequence %s: %w", seq, err)
		}
	}
	return 0, errConflict
}

// get reads one record; ErrNotFound when absent.
func get[T any](ctx context.Context, kv jetstream.KeyValue, key string) (T, uint64, error) {
	var v T
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return v, 0, ErrNotFound
	}
	if err != nil {
		return v, 0, fmt.Errorf("plugin: get %s/%s: %w", kv.Bucket(), key, err)
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return v, 0, fmt.Errorf("plugin: decode %s/%s: %w", kv.Bucket(), key, err)
	}
	return v, e.Revision(), nil
}

// put writes a record: created when rev is 0, else only over revision rev.
func put[T any](ctx context.Context, kv jetstream.KeyValue, key string, v T, rev uint64) (uint64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return kv.Create(ctx, key, data)
	}
	return kv.Update(ctx, key, data, rev)
}

// maxRecordBytes keeps a plugin record below JetStream's default message
// size (1 MiB) with room for the subject and headers. Each field has its
// own limit, but together (and with JSON escaping: '<' is written as six
// bytes) they can exceed it, and the write would fail only after the URL
// claim and the source files were stored.
const maxRecordBytes = 960 << 10

// checkRecord refuses a plugin whose record is too large to store.
func checkRecord(p Plugin) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if len(data) > maxRecordBytes {
		return invalid("", "The plugin is too large to store: %d KiB of JSON, at most %d KiB (icon, config_schema, metrics and public_jobs together).", len(data)>>10, maxRecordBytes>>10)
	}
	return nil
}

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// modify is a read-modify-write of one record: fn changes a fresh copy
// read at its latest revision, and the write succeeds only over that
// revision; on a conflict the whole thing runs again, so concurrent
// changes to different fields never overwrite each other. fn returning an
// error stops it. It returns the record before and after.
func modify[T any](ctx context.Context, kv jetstream.KeyValue, key string, fn func(*T) error) (before, after T, rev uint64, err error) {
	for range maxCASRetries {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return before, after, 0, ErrNotFound
		}
		if err != nil {
			return before, after, 0, fmt.Errorf("plugin: get %s/%s: %w", kv.Bucket(), key, err)
		}
		// Decode twice: fn must not share maps or slices with before.
		var cur, next T
		if err := errors.Join(json.Unmarshal(e.Value(), &cur), json.Unmarshal(e.Value(), &next)); err != nil {
			return before, after, 0, fmt.Errorf("plugin: decode %s/%s: %w", kv.Bucket(), key, err)
		}
		r := e.Revision()
		if err := fn(&next); err != nil {
			return before, after, 0, err
		}
		newRev, err := put(ctx, kv, key, next, r)
		if isConflict(err) {
			continue
		}
		if err != nil {
			return before, after, 0, fmt.Errorf("plugin: write %s/%s: %w", kv.Bucket(), key, err)
		}
		return cur, next, newRev, nil
	}
	return before, after, 0, errConflict
}

// list reads every live record of a bucket; one that does not decode is
// an error.
func list[T any](ctx context.Context, kv jetstream.KeyValue) ([]T, error) {
	out, err := kvjson.List[T](ctx, kv, func(key string, err error) error {
		return fmt.Errorf("decode %s/%s: %w", kv.Bucket(), key, err)
	})
	if err != nil {
		return nil, fmt.Errorf("plugin: %w", err)
	}
	return out, nil
}

// urlClaim makes a plugin URL unique: its key is created (never
// overwritten) by the install that owns the URL.
type urlClaim struct {
	PluginID uint64 `json:"plugin_id"`
}

func urlKey(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:])
}

// claimURL takes the URL for plugin id; false when another plugin holds
// it. A claim whose plugin does not exist is stale (an uninstall or
// install that died half way) once older than claimGrace, and is taken
// over.
func (s *store) claimURL(ctx context.Context, identity string, id uint64) (bool, error) {
	key := urlKey(identity)
	data, _ := json.Marshal(urlClaim{PluginID: id})
	for range maxCASRetries {
		if _, err := s.urls.Create(ctx, key, data); err == nil {
			return true, nil
		} else if !isConflict(err) {
			return false, fmt.Errorf("plugin: claim url: %w", err)
		}
		e, err := s.urls.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("plugin: claim url: %w", err)
		}
		var c urlClaim
		_ = json.Unmarshal(e.Value(), &c)
		if _, _, err := get[Plugin](ctx, s.plugins, idKey(c.PluginID)); err == nil || !IsNotFound(err) {
			return false, err
		}
		if time.Since(e.Created()) < claimGrace {
			return false, nil
		}
		if _, err := s.urls.Update(ctx, key, data, e.Revision()); err == nil {
			return true, nil
		} else if !isConflict(err) {
			return false, fmt.Errorf("plugin: claim url: %w", err)
		}
	}
	return false, errConflict
}

// releaseURL drops the claim when plugin id holds it.
func (s *store) releaseURL(ctx context.Context, identity string, id uint64) error {
	key := urlKey(identity)
	e, err := s.urls.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil
	}
	if err != nil {
		return err
	}
	var c urlClaim
	if json.Unmarshal(e.Value(), &c) == nil && c.PluginID == id {
		err = s.urls.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
		if isConflict(err) {
			return nil // re-claimed meanwhile: not ours any more
		}
	}
	return err
}

// putBundle stores a new set of source files and returns its object name.
func (s *store) putBundle(ctx context.Context, pluginID uint64, b Bundle) (string, error) {
	if len(b) == 0 {
		return "", nil
	}
	data, err := json.Marshal(b)
	if err != nil {
		return "", err
	}
	name := idKey(pluginID) + "/" + uuid.NewString()
	if _, err := s.sources.PutBytes(ctx, name, data); err != nil {
		return "", fmt.Errorf("plugin: store source files: %w", err)
	}
	return name, nil
}

// getBundle reads a set of source files; an empty name is the empty set.
func (s *store) getBundle(ctx context.Context, name string) (Bundle, error) {
	if name == "" {
		return Bundle{}, nil
	}
	data, err := s.sources.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("plugin: read source files %s: %w", name, err)
	}
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("plugin: decode source files %s: %w", name, err)
	}
	return b, nil
}

// deleteBundle removes a set that no record points to any more.
func (s *store) deleteBundle(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	err := s.sources.Delete(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	return err
}

// sourceGrace is how long a replaced set of source files stays readable:
// a reader that read the old record may still be fetching it (the object
// store times out, rather than failing, on an object deleted mid-read).
const sourceGrace = time.Minute

// retire deletes a replaced set of source files after sourceGrace. A set
// whose deletion is lost (the process stopped) is removed by SweepSources.
func (s *Service) retire(name string) {
	if name == "" {
		return
	}
	time.AfterFunc(sourceGrace, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.st.deleteBundle(ctx, name); err != nil {
			s.log.Debug("retire source files", "object", name, "err", err)
		}
	})
}

// SweepSources deletes the sets of source files no plugin record points
// to that are older than olderThan, and returns how many it deleted. Open
// runs it once in the background with sourceGrace.
func (s *Service) SweepSources(ctx context.Context, olderThan time.Duration) (int, error) {
	plugins, err := list[Plugin](ctx, s.st.plugins)
	if err != nil {
		return 0, err
	}
	live := map[string]bool{}
	for _, p := range plugins {
		live[p.Sources] = true
	}
	return sweep(ctx, s.st.sources, live, olderThan)
}

// sweep deletes the objects of obj that live does not name and that are
// older than olderThan, and returns how many it deleted.
func sweep(ctx context.Context, obj jetstream.ObjectStore, live map[string]bool, olderThan time.Duration) (int, error) {
	objs, err := obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objs {
		if live[o.Name] || o.Deleted || time.Since(o.ModTime) < olderThan {
			continue
		}
		if err := obj.Delete(ctx, o.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}
