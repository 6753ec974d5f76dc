package controlplane

import (
	"errors"
	"testing"
	"time"
)

func TestProjectTimezone(t *testing.T) {
	ctx := testCtx(t)
	srv := startJetStream(t, "")
	s := openStore(t, connectJetStream(t, srv))
	other := openStore(t, connectJetStream(t, srv))
	org, err := s.CreateOrganization(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreateProject(ctx, org.ID, "Web")
	if err != nil {
		t.Fatal(err)
	}
	if p.TimezoneName() != "UTC" || p.Location() != time.UTC {
		t.Fatalf("default zone = %q %v", p.TimezoneName(), p.Location())
	}
	for _, bad := range []string{"", "Local", "Mars/Olympus", "../../etc/passwd", "utc "} {
		if _, err := s.SetProjectTimezone(ctx, p.ID, bad); !errors.Is(err, ErrInvalidTimezone) {
			t.Fatalf("SetProjectTimezone(%q) err = %v", bad, err)
		}
	}
	if _, err := s.SetProjectTimezone(ctx, 99, "UTC"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown project: err = %v", err)
	}
	got, err := s.SetProjectTimezone(ctx, p.ID, "America/Los_Angeles")
	if err != nil || got.Timezone != "America/Los_Angeles" || got.Name != "Web" || got.APIToken != p.APIToken {
		t.Fatalf("SetProjectTimezone = %+v, %v", got, err)
	}
	if _, off := time.Date(2020, 1, 1, 0, 0, 0, 0, got.Location()).Zone(); off != -8*3600 {
		t.Fatalf("Location offset = %d", off)
	}
	stored, err := s.GetProject(ctx, p.ID)
	if err != nil || stored.Timezone != "America/Los_Angeles" {
		t.Fatalf("GetProject = %+v, %v", stored, err)
	}
	// Another instance sees the change through its watch.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if q, ok := other.ProjectByID(p.ID); ok && q.Timezone == "America/Los_Angeles" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other instance never saw the time zone")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
