package controlplane

import (
	"sync"
)

// rec is one KV record as last seen by the index. Deleted records are kept as
// tombstones so that an older put delivered late cannot resurrect them.
type rec[T any] struct {
	rev     uint64
	val     T
	deleted bool
}

// index is the in-memory view of the projects and keys buckets. It is fed by
// the watchers and by the Store's own successful writes; both go through the
// put methods, which ignore anything not newer than what is already held.
type index struct {
	mu         sync.RWMutex
	projects   map[uint64]rec[Project]
	byToken    map[string]uint64 // APIToken -> project id
	maxProject uint64            // highest project id ever seen (incl. deleted)
	keys       map[string]rec[Key]
	byHash     map[string]string // Hash -> key id
}

func newIndex() *index {
	return &index{
		projects: make(map[uint64]rec[Project]),
		byToken:  make(map[string]uint64),
		keys:     make(map[string]rec[Key]),
		byHash:   make(map[string]string),
	}
}

// putProject records project id at revision rev. For a delete, p is ignored.
func (ix *index) putProject(id, rev uint64, p Project, deleted bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	cur, ok := ix.projects[id]
	if ok && cur.rev >= rev {
		return
	}
	if ok && !cur.deleted && ix.byToken[cur.val.APIToken] == id {
		delete(ix.byToken, cur.val.APIToken)
	}
	if deleted {
		p = Project{}
	} else {
		p.ID = id
		if p.APIToken != "" {
			ix.byToken[p.APIToken] = id
		}
	}
	ix.projects[id] = rec[Project]{rev: rev, val: p, deleted: deleted}
	ix.maxProject = max(ix.maxProject, id)
}

func (ix *index) projectByToken(token string) (Project, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	id, ok := ix.byToken[token]
	if !ok {
		return Project{}, false
	}
	r := ix.projects[id]
	return r.val, !r.deleted
}

func (ix *index) projectByID(id uint64) (Project, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	r, ok := ix.projects[id]
	if !ok || r.deleted {
		return Project{}, false
	}
	return r.val, true
}

func (ix *index) maxProjectID() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.maxProject
}

// putKey records key id at revision rev. For a delete, k is ignored.
func (ix *index) putKey(id string, rev uint64, k Key, deleted bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	cur, ok := ix.keys[id]
	if ok && cur.rev >= rev {
		return
	}
	if ok && !cur.deleted && ix.byHash[cur.val.Hash] == id {
		delete(ix.byHash, cur.val.Hash)
	}
	if deleted {
		k = Key{}
	} else {
		k = k.clone()
		k.ID = id
		if k.Hash != "" {
			ix.byHash[k.Hash] = id
		}
	}
	ix.keys[id] = rec[Key]{rev: rev, val: k, deleted: deleted}
}

func (ix *index) keyByHash(hash string) (Key, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	id, ok := ix.byHash[hash]
	if !ok {
		return Key{}, false
	}
	r := ix.keys[id]
	if r.deleted {
		return Key{}, false
	}
	return r.val.clone(), true
}
