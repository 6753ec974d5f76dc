package capture

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// Vectors made with the lz-string npm package's compressToBase64.
var lzVectors = []struct{ text, lz64 string }{
	{"", "Q==="},
	{"a", "IZA="},
	{"hello", "BYUwNmD2Q==="},
	{"hello hello hello hello", "BYUwNmD2AEoTcq3FIA=="},
	{`{"event":"$pageview","properties":{"distinct_id":"abc","token":"phc_x"}}`, "N4IgpgbmB2AuIC4QBIAOBDA5pAlmA7iADQioBOA9qmGbHgM6KgAmO9d0AxrAPo7OIQ6AEadiIWBQDWMQagAWnHgA8QAXzVA="},
	{"日本語テキスト €uro 🎉 emoji", "qemhpzR5UYYwyLUMidDIEwwAJA1BAVwE4HsGB4NwkfsIFMBbDAKwEsg="},
	{"TOBEORNOTTOBEORTOBEORNOT#", "CoeQQgoiBKByLFJGSpwQYiA="},
	{strings.Repeat("a", 66), "IY18ZXTtA==="},
}

func TestDecompressLZ64(t *testing.T) {
	for _, v := range lzVectors {
		got, err := decompressLZ64(v.lz64, 1<<20)
		if err != nil || string(got) != v.text {
			t.Errorf("%q: got %q, %v; want %q", v.lz64, got, err, v.text)
		}
	}
	lz, _ := os.ReadFile("testdata/lz64-batch.txt")
	want, _ := os.ReadFile("testdata/lz64-batch.json")
	got, err := decompressLZ64(string(lz), 1<<20)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("batch: %v (%d bytes, want %d)", err, len(got), len(want))
	}
	if _, err := decompressLZ64(string(lz), 1000); !errors.Is(err, errLZTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	for _, bad := range []string{"", "!!!!", "BYUw", "////"} {
		if out, err := decompressLZ64(bad, 1<<20); err == nil {
			t.Errorf("%q: decoded to %q", bad, out)
		}
	}
}

func FuzzDecompressLZ64(f *testing.F) {
	for _, v := range lzVectors {
		f.Add(v.lz64)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := decompressLZ64(in, 1<<16)
		if err == nil && len(out) > 3*(1<<16) {
			t.Fatalf("%d bytes out of %d in, past the limit", len(out), len(in))
		}
	})
}
