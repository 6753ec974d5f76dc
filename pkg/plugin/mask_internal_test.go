package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/testenv"
)

// flakyKV is the real plugins bucket whose Gets fail from the n-th on:
// a KV failure, or the plugin deleted by another request in between.
type flakyKV struct {
	jetstream.KeyValue
	calls, failFrom atomic.Int64
	err             error
}

func (f *flakyKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if n := f.calls.Add(1); f.failFrom.Load() > 0 && n >= f.failFrom.Load() {
		return nil, f.err
	}
	return f.KeyValue.Get(ctx, key)
}

// When the plugin cannot be read after a config write (KV error, or a
// race with the plugin's deletion), the answer and the published event
// mask every value instead of showing them in clear.
func TestConfigMaskFailsClosedOnUnreadablePlugin(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	s, err := open(ctx, n.JS, Options{}, nil, nil, prometheus.NewRegistry()) // no background sweep reading s.st.plugins
	if err != nil {
		t.Fatal(err)
	}
	real := s.st.plugins
	flaky := &flakyKV{KeyValue: real}
	s.st.plugins = flaky
	actor := Actor{OrganizationID: "org", KeyID: "k"}
	in, err := DecodePluginInput([]byte(`{"plugin_type":"source","name":"p","config_schema":[{"key":"token","secret":true},{"key":"url"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Create(ctx, actor, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, cause := range []error{errors.New("nats: timeout"), jetstream.ErrKeyNotFound} {
		cin, _ := DecodeConfigInput(fmt.Appendf(nil, `{"plugin":%d,"config":{"token":"SECRET","url":"CLEAR"}}`, p.ID))
		c, err := s.CreateConfig(ctx, actor, 1, cin)
		if err != nil {
			t.Fatal(err)
		}
		flaky.err = cause
		flaky.calls.Store(0)
		flaky.failFrom.Store(2) // the check of the config's plugin passes; the read for masking fails
		patch, _ := DecodeConfigInput([]byte(`{"config":{"url":"CLEAR2"}}`))
		got, err := s.PatchConfig(ctx, actor, 1, c.ID, patch)
		if err != nil {
			t.Fatal(err)
		}
		flaky.calls.Store(0)
		if err := s.DeleteConfig(ctx, actor, 1, c.ID); err != nil {
			t.Fatal(err)
		}
		flaky.failFrom.Store(0)
		if got.Config["token"] != SecretMask || got.Config["url"] != SecretMask {
			t.Fatalf("%v: answer %v", cause, got.Config)
		}
		for _, kind := range []string{KindConfigUpdated, KindConfigDeleted} {
			if data := lastEvent(t, n.JS, kind); strings.Contains(data, "SECRET") || strings.Contains(data, "CLEAR") {
				t.Fatalf("%v: %s event shows values: %s", cause, kind, data)
			}
		}
	}
}

func lastEvent(t *testing.T, js jetstream.JetStream, kind string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, Subject("org", kind))
	if err != nil {
		t.Fatal(err)
	}
	return string(msg.Data)
}

// On every schema ParseSchema accepts, the lenient reading used for the
// history of secret keys finds exactly the same secret keys.
func FuzzParseSchema(f *testing.F) {
	f.Add(`[{"key":"a","secret":true},{"markdown":"x"},{"key":"b","secret":false}]`)
	f.Add(`{"a":{"secret":true},"b":{"key":"b"}}`)
	f.Add(`[{"key":"a","secret":"no"}]`)
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseSchema([]byte(s))
		if err != nil {
			if _, ok := err.(*SchemaError); !ok {
				t.Fatalf("%q: error %T", s, err)
			}
			return
		}
		ever := secretsEver([]byte(s))
		if len(ever) != len(keys) {
			t.Fatalf("%q: strict %v, lenient %v", s, keys, ever)
		}
		for _, k := range ever {
			if !keys[k] {
				t.Fatalf("%q: strict %v, lenient %v", s, keys, ever)
			}
		}
	})
}
