package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is the request budget of each personal API key, as PostHog
// limits personal keys (docs/api.md, "Rate limits"): PerMinute requests at
// once, refilled over a minute (the burst), and PerHour refilled over an
// hour (the sustained rate). Zero leaves that bucket out.
type RateLimit struct {
	PerMinute int
	PerHour   int
}

// Default per-key limits, PostHog's for personal API keys.
const (
	DefaultRatePerMinute = 240
	DefaultRatePerHour   = 1200
)

// keyLimiter holds a token bucket per key, in process. Only authenticated
// keys get one, so the map is bounded by the keys that exist.
type keyLimiter struct {
	cfg  RateLimit
	mu   sync.Mutex
	keys map[string][]*rate.Limiter
}

// newKeyLimiter is nil (no limit) when cfg has no bucket.
func newKeyLimiter(cfg RateLimit) *keyLimiter {
	if cfg.PerMinute <= 0 && cfg.PerHour <= 0 {
		return nil
	}
	return &keyLimiter{cfg: cfg, keys: map[string][]*rate.Limiter{}}
}

func (l *keyLimiter) buckets(keyID string) []*rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.keys[keyID]
	if !ok {
		if n := l.cfg.PerMinute; n > 0 {
			b = append(b, rate.NewLimiter(rate.Limit(float64(n)/60), n))
		}
		if n := l.cfg.PerHour; n > 0 {
			b = append(b, rate.NewLimiter(rate.Limit(float64(n)/3600), n))
		}
		l.keys[keyID] = b
	}
	return b
}

// allow takes one request from each of the key's buckets, or none and
// answers 429 with the wait until all of them have one.
func (l *keyLimiter) allow(keyID string, now time.Time) error {
	if l == nil {
		return nil
	}
	var wait time.Duration
	var taken []*rate.Reservation
	for _, b := range l.buckets(keyID) {
		res := b.ReserveN(now, 1)
		taken = append(taken, res)
		wait = max(wait, res.DelayFrom(now))
	}
	if wait == 0 {
		return nil
	}
	for _, res := range taken {
		res.CancelAt(now)
	}
	return throttled(wait)
}

// throttled is the 429 for a wait.
func throttled(wait time.Duration) *Error {
	secs := int(math.Ceil(wait.Seconds()))
	return &Error{Status: http.StatusTooManyRequests, Type: "throttled_error", Code: "throttled", RetryAfter: secs,
		Detail: "Request was throttled. Expected available in " + strconv.Itoa(secs) + " seconds."}
}
