package controlplane

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openStore(t testing.TB, js jetstream.JetStream) *Store {
	t.Helper()
	s, err := Open(testCtx(t), js, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestOrganizations(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectJetStream(t, startJetStream(t, "")))

	if _, err := s.CreateOrganization(ctx, "  "); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("empty name: err = %v", err)
	}
	a, err := s.CreateOrganization(ctx, " Acme ")
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "Acme" || !canonicalUUID(a.ID) || a.CreatedAt.IsZero() {
		t.Fatalf("org = %+v", a)
	}
	b, err := s.CreateOrganization(ctx, "Beta")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetOrganization(ctx, a.ID)
	if err != nil || got != a {
		t.Fatalf("GetOrganization = %+v, %v; want %+v", got, err, a)
	}
	for _, id := range []string{"", "nope", "*", "a.b", "00000000-0000-0000-0000-000000000000"} {
		if _, err := s.GetOrganization(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetOrganization(%q) err = %v", id, err)
		}
	}
	list, err := s.ListOrganizations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(list, []Organization{a, b}) {
		t.Fatalf("ListOrganizations = %+v", list)
	}
}

func TestProjects(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectJetStream(t, startJetStream(t, "")))
	org, err := s.CreateOrganization(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateOrganization(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateProject(ctx, "3f0f4a1e-0000-4000-8000-000000000000", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown org: err = %v", err)
	}
	if _, err := s.CreateProject(ctx, org.ID, ""); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("empty name: err = %v", err)
	}
	p1, err := s.CreateProject(ctx, org.ID, "Web")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.CreateProject(ctx, other.ID, "Other web")
	if err != nil {
		t.Fatal(err)
	}
	p3, err := s.CreateProject(ctx, org.ID, "App")
	if err != nil {
		t.Fatal(err)
	}
	if p1.ID != 1 || p2.ID != 2 || p3.ID != 3 {
		t.Fatalf("ids = %d, %d, %d", p1.ID, p2.ID, p3.ID)
	}
	if len(p1.APIToken) != 47 || p1.APIToken[:4] != ProjectTokenPrefix || p1.APIToken == p3.APIToken {
		t.Fatalf("tokens %q %q", p1.APIToken, p3.APIToken)
	}
	got, err := s.GetProject(ctx, 3)
	if err != nil || got != p3 {
		t.Fatalf("GetProject = %+v, %v", got, err)
	}
	if _, err := s.GetProject(ctx, 99); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetProject(99) err = %v", err)
	}
	list, err := s.ListProjects(ctx, org.ID)
	if err != nil || !slices.Equal(list, []Project{p1, p3}) {
		t.Fatalf("ListProjects = %+v, %v", list, err)
	}
	all, err := s.ListProjects(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("ListProjects(all) = %+v, %v", all, err)
	}

	// ProjectByToken reads the index: own writes are visible immediately.
	if p, ok := s.ProjectByToken(p3.APIToken); !ok || p != p3 {
		t.Fatalf("ProjectByToken = %+v, %v", p, ok)
	}
	if _, ok := s.ProjectByToken("phc_unknown"); ok {
		t.Fatal("unknown token found")
	}
	if p, ok := s.ProjectByID(2); !ok || p != p2 {
		t.Fatalf("ProjectByID = %+v, %v", p, ok)
	}
}

func TestConcurrentProjectIDs(t *testing.T) {
	ctx := testCtx(t)
	srv := startJetStream(t, "")
	// Two stores on separate connections compete, as two API instances would.
	s1 := openStore(t, connectJetStream(t, srv))
	s2 := openStore(t, connectJetStream(t, srv))
	org, err := s1.CreateOrganization(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	ids := make([]uint64, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		s := s1
		if i%2 == 1 {
			s = s2
		}
		wg.Go(func() {
			p, err := s.CreateProject(ctx, org.ID, "p")
			if err != nil {
				errs <- err
				return
			}
			ids[i] = p.ID
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != uint64(i+1) {
			t.Fatalf("ids = %v, want 1..%d", ids, n)
		}
	}
	list, err := s2.ListProjects(ctx, org.ID)
	if err != nil || len(list) != n {
		t.Fatalf("ListProjects: %d projects, %v", len(list), err)
	}
	// Both instances' indexes converge on every token.
	for _, p := range list {
		eventually(t, 5*time.Second, "token indexed", func() bool {
			_, ok1 := s1.ProjectByToken(p.APIToken)
			_, ok2 := s2.ProjectByToken(p.APIToken)
			return ok1 && ok2
		})
	}
}

func TestKeysAndAuthenticate(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectJetStream(t, startJetStream(t, "")))
	org, err := s.CreateOrganization(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}

	if _, _, err := s.CreateKey(ctx, org.ID, "k", []string{"person:read", "person:delete"}); !errors.Is(err, ErrInvalidScope) {
		t.Fatalf("bad scope: err = %v", err)
	}
	if _, _, err := s.CreateKey(ctx, org.ID, "", []string{"person:read"}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("empty label: err = %v", err)
	}
	if _, _, err := s.CreateKey(ctx, "5d3c1f1e-0000-4000-8000-000000000000", "k", []string{"*"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown org: err = %v", err)
	}

	secret, k, err := s.CreateKey(ctx, org.ID, "ingest", []string{"person:write", "person:write"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Hash != HashSecret(secret) || k.MaskValue != "phx_..."+secret[len(secret)-4:] ||
		!slices.Equal(k.Scopes, []string{"person:write"}) || k.Revoked() || k.OrganizationID != org.ID {
		t.Fatalf("key = %+v", k)
	}
	stored, err := s.GetKey(ctx, k.ID)
	if err != nil || stored.Hash != k.Hash {
		t.Fatalf("GetKey = %+v, %v", stored, err)
	}

	got, err := s.Authenticate(secret)
	if err != nil || got.ID != k.ID || !ScopeAllows(got.Scopes, "person:read") {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "phx_nope", secret + "x", secret[:len(secret)-1]} {
		if _, err := s.Authenticate(bad); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("Authenticate(%q) err = %v", bad, err)
		}
	}

	secret2, k2, err := s.CreateKey(ctx, org.ID, "read only", []string{"person:read"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(secret); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("revoked key authenticated: %v", err)
	}
	if _, err := s.Authenticate(secret2); err != nil {
		t.Fatalf("other key rejected: %v", err)
	}
	first, err := s.GetKey(ctx, k.ID)
	if err != nil || first.RevokedAt == nil {
		t.Fatalf("GetKey after revoke = %+v, %v", first, err)
	}
	// Idempotent: revoking again succeeds and keeps the first timestamp.
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	again, err := s.GetKey(ctx, k.ID)
	if err != nil || !again.RevokedAt.Equal(*first.RevokedAt) {
		t.Fatalf("second revoke changed RevokedAt: %+v, %v", again, err)
	}
	if err := s.RevokeKey(ctx, "7a1c2b3d-0000-4000-8000-000000000000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke unknown: err = %v", err)
	}

	keys, err := s.ListKeys(ctx, org.ID)
	if err != nil || len(keys) != 2 || keys[0].ID != k.ID || keys[1].ID != k2.ID || !keys[0].Revoked() {
		t.Fatalf("ListKeys = %+v, %v", keys, err)
	}
	if none, err := s.ListKeys(ctx, "other"); err != nil || len(none) != 0 {
		t.Fatalf("ListKeys(other) = %+v, %v", none, err)
	}
}

func TestRevocationSeenByOtherInstance(t *testing.T) {
	ctx := testCtx(t)
	srv := startJetStream(t, "")
	a := openStore(t, connectJetStream(t, srv))
	b := openStore(t, connectJetStream(t, srv))

	org, err := a.CreateOrganization(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	secret, k, err := a.CreateKey(ctx, org.ID, "shared", []string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.CreateProject(ctx, org.ID, "Web")
	if err != nil {
		t.Fatal(err)
	}
	// Instance B learns about the new key and project through its watchers.
	eventually(t, 5*time.Second, "key visible on B", func() bool {
		_, err := b.Authenticate(secret)
		return err == nil
	})
	eventually(t, 5*time.Second, "project visible on B", func() bool {
		got, ok := b.ProjectByToken(p.APIToken)
		return ok && got == p
	})

	if err := a.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, 2*time.Second, "revocation visible on B", func() bool {
		_, err := b.Authenticate(secret)
		return errors.Is(err, ErrUnknownKey)
	})
	t.Logf("revocation propagated in %v", time.Since(start))
}

func TestPersistenceAcrossRestart(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	srv := startJetStream(t, dir)
	s := openStore(t, connectJetStream(t, srv))

	org, err := s.CreateOrganization(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreateProject(ctx, org.ID, "Web")
	if err != nil {
		t.Fatal(err)
	}
	secret, k, err := s.CreateKey(ctx, org.ID, "live", []string{"person:read"})
	if err != nil {
		t.Fatal(err)
	}
	revokedSecret, revoked, err := s.CreateKey(ctx, org.ID, "dead", []string{"person:read"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeKey(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}

	// Reopen on the same server first.
	s.Close()
	s = openStore(t, connectJetStream(t, srv))
	if _, err := s.Authenticate(secret); err != nil {
		t.Fatalf("after reopen: %v", err)
	}

	// Then restart the server on the same storage directory.
	s.Close()
	srv.Shutdown()
	srv.WaitForShutdown()
	srv2 := startJetStream(t, dir)
	s2 := openStore(t, connectJetStream(t, srv2))

	if got, err := s2.GetOrganization(ctx, org.ID); err != nil || got != org {
		t.Fatalf("GetOrganization = %+v, %v", got, err)
	}
	if got, err := s2.GetProject(ctx, p.ID); err != nil || got != p {
		t.Fatalf("GetProject = %+v, %v", got, err)
	}
	if got, ok := s2.ProjectByToken(p.APIToken); !ok || got != p {
		t.Fatalf("ProjectByToken = %+v, %v", got, ok)
	}
	if got, err := s2.Authenticate(secret); err != nil || got.ID != k.ID {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}
	if _, err := s2.Authenticate(revokedSecret); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("revoked key after restart: %v", err)
	}
	// Id allocation continues after the existing ones.
	p2, err := s2.CreateProject(ctx, org.ID, "App")
	if err != nil || p2.ID != 2 {
		t.Fatalf("CreateProject after restart = %+v, %v", p2, err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	s := openStore(t, connectJetStream(t, startJetStream(t, "")))
	s.Close()
	s.Close()
	if err := s.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
}
