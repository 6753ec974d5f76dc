package capture

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/stream"
)

// Projects finds a project by its public capture token, without I/O.
type Projects interface {
	ProjectByToken(token string) (controlplane.Project, bool)
}

// Publisher validates decoded requests and publishes their events.
type Publisher struct {
	cfg       Config
	pub       *command.Publisher
	projects  Projects
	log       *slog.Logger
	published prometheus.Counter
	rejected  *prometheus.CounterVec
	wait      prometheus.Histogram
	arenas    bufferPool    // envelope buffers (arena.go)
	buffers   decodeBuffers // request bodies (Decode)
}

// NewPublisher publishes on its own JetStream context over js's
// connection, so its asynchronous publishes have their own bound (eight
// requests' windows) and time out by themselves.
func NewPublisher(cfg Config, js jetstream.JetStream, projects Projects, logger *slog.Logger, reg prometheus.Registerer) (*Publisher, error) {
	cfg = cfg.withDefaults()
	own, err := jetstream.New(js.Conn(),
		jetstream.WithPublishAsyncMaxPending(8*cfg.Window),
		jetstream.WithPublishAsyncTimeout(cfg.PublishTimeout))
	if err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, pub: command.NewPublisher(own, cfg.Window, cfg.PublishTimeout), projects: projects, log: logger}
	p.published = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "capture", Name: "events_published_total",
		Help: "Events acknowledged by JetStream."})
	p.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "capture", Name: "requests_rejected_total",
		Help: "Capture requests refused, by reason."}, []string{"reason"})
	p.wait = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "capture", Name: "publish_seconds",
		Help: "Time from the first publish of a request to the last acknowledgement.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)})
	reg.MustRegister(p.published, p.rejected, p.wait)
	return p, nil
}

// Decode is the package's Decode with the publisher's body limit, reading
// into buffers the batch gives back to the publisher once Capture has
// built its envelopes.
func (p *Publisher) Decode(req Request) (*Batch, error) {
	return decode(req, p.cfg.MaxRequestBytes, &p.buffers)
}

// MaxRequestBytes is the body limit to decode requests with.
func (p *Publisher) MaxRequestBytes() int64 { return p.cfg.MaxRequestBytes }

// Project returns the project of a capture token, or an Unauthorized error.
func (p *Publisher) Project(token string) (controlplane.Project, error) {
	if token == "" {
		return controlplane.Project{}, requestError(Unauthorized, "no project token")
	}
	proj, ok := p.projects.ProjectByToken(token)
	if !ok {
		return controlplane.Project{}, requestError(Unauthorized, "the project token is not a known project's")
	}
	return proj, nil
}

// Capture validates every event of a request and only then publishes them
// all, returning after JetStream acknowledged each: a request is accepted
// whole or refused whole (a refused request publishes nothing, except
// after an Unavailable error, where a prefix may have been stored; a
// retry with the same uuids is deduplicated by the stream). now is when
// the request arrived. b has no events after it.
func (p *Publisher) Capture(ctx context.Context, b *Batch, now time.Time) (int, error) {
	n, err := p.capture(ctx, b, now)
	if err != nil {
		reason := "error"
		var capErr *Error
		if errors.As(err, &capErr) {
			reason = [...]string{"error", "malformed", "too_large", "unauthorized", "unavailable"}[capErr.Kind]
		}
		p.rejected.WithLabelValues(reason).Inc()
	}
	return n, err
}

func (p *Publisher) capture(ctx context.Context, b *Batch, now time.Time) (int, error) {
	defer b.release()
	proj, err := p.Project(b.Token)
	if err != nil {
		return 0, err
	}
	envs := make([]Envelope, len(b.Events))
	need := 0
	for i := range b.Events {
		need += len(b.Events[i].JSON) + envelopeExtra
	}
	arena := p.arenas.get(need)
	for i := range b.Events {
		if envs[i], *arena, err = appendEnvelope(&b.Events[i], i, proj, now, b, *arena); err != nil {
			p.arenas.put(arena) // nothing was published
			return 0, err
		}
	}
	b.release() // the envelopes copied what they need of the body
	start := time.Now()
	if err := p.Publish(ctx, proj.ID, envs); err != nil {
		// Not back to the pool: an unacknowledged publish may still be
		// retried by the client library from these bytes.
		return 0, &Error{Kind: Unavailable, Index: -1, Reason: "the event stream did not acknowledge the events; retry", Err: err}
	}
	// Every event is acknowledged: the library holds none of them now.
	p.arenas.put(arena)
	p.wait.Observe(time.Since(start).Seconds())
	p.published.Add(float64(len(envs)))
	return len(envs), nil
}

// Publish sends envelopes to a project's subject asynchronously, at most
// the configured window awaiting acknowledgement (one connection keeps
// their order), and returns once every one is acknowledged, or with the
// first failure, within the configured publish timeout.
func (p *Publisher) Publish(ctx context.Context, projectID uint64, envs []Envelope) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
	defer cancel()
	subject := stream.Subject(projectID)
	b := p.pub.Begin(ctx, len(envs))
	for _, env := range envs {
		if err := b.Add(subject, command.Message(env)); err != nil {
			return err
		}
	}
	return b.Wait()
}
