package deletion

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	pending, lastRun, lastDuration, nextRun               prometheus.Gauge
	verified, failed, eventsDeleted, mutations, runErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var errs []error
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "deleter", Name: name, Help: help})
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
		return c
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "deleter", Name: name, Help: help})
		if err := reg.Register(g); err != nil {
			errs = append(errs, err)
		}
		return g
	}
	m := &metrics{
		pending:       gauge("pending_requests", "Deletion requests not verified yet (pending or running)."),
		lastRun:       gauge("last_run_timestamp_seconds", "Unix time at which the last run ended."),
		lastDuration:  gauge("last_run_duration_seconds", "Duration of the last run."),
		nextRun:       gauge("next_run_timestamp_seconds", "Unix time of the next scheduled run; 0 without a schedule. It moves on when a scheduled run starts, so a time past it means a run is overdue (docs/operations.md, alerts)."),
		verified:      counter("verified_total", "Requests whose events were deleted and verified gone."),
		failed:        counter("failed_total", "Requests that failed in a run; they stay pending for the next run."),
		eventsDeleted: counter("events_deleted_total", "Events of verified requests, counted before their deletion."),
		mutations:     counter("mutations_total", "Deletions of a batch's events issued (one ALTER ... DELETE on each events table)."),
		runErrors:     counter("run_errors_total", "Errors that stopped a run or a batch: ClickHouse errors and mutation timeouts."),
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return m, nil
}
