package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func isBase62(s string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(base62Alphabet, rune(s[i])) {
			return false
		}
	}
	return true
}

func TestNewSecretFormatAndUniqueness(t *testing.T) {
	const n = 2000
	seen := make(map[string]bool, n)
	counts := make(map[byte]int)
	for range n {
		s, err := NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != len(SecretPrefix)+43 || !strings.HasPrefix(s, SecretPrefix) {
			t.Fatalf("bad secret format %q", s)
		}
		body := s[len(SecretPrefix):]
		if !isBase62(body) {
			t.Fatalf("secret %q has non-base62 characters", s)
		}
		if seen[s] {
			t.Fatalf("duplicate secret %q", s)
		}
		seen[s] = true
		for i := 0; i < len(body); i++ {
			counts[body[i]]++
		}
	}
	// Every character must appear, none wildly over- or under-represented
	// (expected ≈ 1387 each; a biased modulo would skew the first 8 by ~25%).
	if len(counts) != 62 {
		t.Fatalf("only %d distinct characters used", len(counts))
	}
	expected := float64(n*43) / 62
	for c, got := range counts {
		if f := float64(got) / expected; f < 0.85 || f > 1.15 {
			t.Errorf("character %q: %d occurrences, expected ≈ %.0f", c, got, expected)
		}
	}
}

func TestProjectTokenFormat(t *testing.T) {
	tok, err := newProjectToken()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, ProjectTokenPrefix) || len(tok) != 47 || !isBase62(tok[4:]) {
		t.Fatalf("bad token %q", tok)
	}
}

func TestHashSecret(t *testing.T) {
	want := sha256.Sum256([]byte("phx_abc"))
	if got := HashSecret("phx_abc"); got != hex.EncodeToString(want[:]) {
		t.Fatalf("HashSecret = %s", got)
	}
	// Known vector: SHA-256 of the empty string.
	if got := HashSecret(""); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("HashSecret(\"\") = %s", got)
	}
	if HashSecret("a") == HashSecret("b") {
		t.Fatal("different inputs hash equal")
	}
	if m := maskSecret("phx_0123456789wxyz"); m != "phx_...wxyz" {
		t.Fatalf("mask = %q", m)
	}
}

func TestScopeAllows(t *testing.T) {
	tests := []struct {
		granted []string
		need    string
		want    bool
	}{
		{[]string{"*"}, "person:read", true},
		{[]string{"*"}, "organization:read", true},
		{[]string{"person:read"}, "person:read", true},
		{[]string{"person:write"}, "person:read", true},
		{[]string{"person:write"}, "person:write", true},
		{[]string{"person:read"}, "person:write", false},
		{[]string{"cohort:write"}, "person:read", false},
		{[]string{"cohort:read", "person:write"}, "person:read", true},
		{nil, "person:read", false},
		{[]string{}, "*", false},
		{[]string{"person:read"}, "*", false},
		{[]string{"*"}, "", false},
		{[]string{":write"}, ":read", false},
		{[]string{"person"}, "person:read", false},
		{[]string{"Person:write"}, "person:read", false},
	}
	for _, tc := range tests {
		if got := ScopeAllows(tc.granted, tc.need); got != tc.want {
			t.Errorf("ScopeAllows(%q, %q) = %v, want %v", tc.granted, tc.need, got, tc.want)
		}
	}
}

func TestValidScope(t *testing.T) {
	for _, s := range []string{"person:read", "person:write", "cohort:read", "cohort:write",
		"activity_log:read", "activity_log:write", "plugin:read", "plugin:write",
		"project:read", "project:write", "organization:read", "*"} {
		if !ValidScope(s) {
			t.Errorf("ValidScope(%q) = false", s)
		}
	}
	for _, s := range []string{"", "organization:write", "person:*", "person", " person:read", "PERSON:READ"} {
		if ValidScope(s) {
			t.Errorf("ValidScope(%q) = true", s)
		}
	}
	got, err := normalizeScopes([]string{"person:read", "person:read", "*"})
	if err != nil || len(got) != 2 {
		t.Fatalf("normalizeScopes = %v, %v", got, err)
	}
	if _, err := normalizeScopes([]string{"person:read", "nope"}); !errors.Is(err, ErrInvalidScope) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("normalizeScopes(bad) err = %v", err)
	}
	if _, err := normalizeScopes(nil); !errors.Is(err, ErrInvalidScope) {
		t.Fatalf("normalizeScopes(nil) err = %v", err)
	}
}

func TestCleanName(t *testing.T) {
	if got, err := cleanName("  Acme  "); err != nil || got != "Acme" {
		t.Fatalf("cleanName = %q, %v", got, err)
	}
	for _, bad := range []string{"", "   ", "a\x00b", "\xff", strings.Repeat("x", maxNameRunes+1)} {
		if _, err := cleanName(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("cleanName(%q) err = %v", bad, err)
		}
	}
}

func FuzzScopeAllows(f *testing.F) {
	f.Add("person:write", "person:read")
	f.Add("*", "")
	f.Add(":write", ":read")
	f.Add("a:write,b:read", "b:read")
	f.Fuzz(func(t *testing.T, grantedCSV, need string) {
		granted := strings.Split(grantedCSV, ",")
		got := ScopeAllows(granted, need)
		// Invariants: exact match and "*" always allow a non-empty need;
		// nothing allows an empty need; granting nothing allows nothing.
		if need != "" && !ScopeAllows([]string{need}, need) {
			t.Fatalf("exact scope %q not allowed", need)
		}
		if need != "" && !ScopeAllows([]string{"*"}, need) {
			t.Fatalf("* does not allow %q", need)
		}
		if need == "" && got {
			t.Fatal("empty need allowed")
		}
		if ScopeAllows(nil, need) {
			t.Fatal("nil grants allowed something")
		}
		// Adding grants never removes permission.
		if got && !ScopeAllows(append(granted, "extra"), need) {
			t.Fatal("adding a grant revoked permission")
		}
		_, _ = normalizeScopes(granted)
		_, _ = cleanName(need)
	})
}
