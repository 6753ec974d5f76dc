package deletion

import (
	"context"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule runs RunOnce on the configured schedule (UTC) and refreshes the
// pending gauge every PendingRefresh, until ctx is cancelled. With an empty
// schedule it only refreshes the gauge. On cancellation it returns after a
// run in progress has stopped (at the end of its current statement).
func (r *Runner) Schedule(ctx context.Context) error {
	sched, err := ParseSchedule(r.cfg.Schedule)
	if err != nil {
		return err
	}
	refreshed := make(chan struct{})
	go func() {
		defer close(refreshed)
		r.watchPending(ctx)
	}()
	defer func() { <-refreshed }()

	if sched == nil {
		r.log.Info("schedule is empty: scheduled deletion runs are disabled; serving metrics only (run `deleter run-now` to run once)")
		<-ctx.Done()
		return nil
	}
	logger := cronLogger{r.log}
	c := cron.New(cron.WithLocation(time.UTC), cron.WithLogger(logger),
		// A run still going at the next tick (long mutations) is not doubled.
		cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)))
	var id cron.EntryID
	id = c.Schedule(sched, cron.FuncJob(func() {
		// The entry's next time has moved on when a run starts; a run
		// skipped because the previous one is still going leaves it behind.
		r.m.nextRun.Set(float64(c.Entry(id).Next.Unix()))
		// RunOnce logs its outcome and counts its errors.
		_, _ = r.RunOnce(ctx)
		if ctx.Err() == nil {
			r.log.Info("next deletion run", "at", c.Entry(id).Next)
		}
	}))
	c.Start()
	r.m.nextRun.Set(float64(c.Entry(id).Next.Unix()))
	r.log.Info("deletion runs scheduled", "schedule", r.cfg.Schedule, "timezone", "UTC", "next", c.Entry(id).Next)
	<-ctx.Done()
	// Stop starting runs, then wait for the one in progress, which sees
	// ctx cancelled and stops after its current statement.
	<-c.Stop().Done()
	return nil
}

// watchPending refreshes the pending gauge every PendingRefresh.
func (r *Runner) watchPending(ctx context.Context) {
	t := time.NewTicker(r.cfg.PendingRefresh)
	defer t.Stop()
	r.refreshPending(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.refreshPending(ctx)
		}
	}
}

// cronLogger passes robfig/cron's logs to slog; its chatter (wake, run,
// schedule) goes to debug.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, keysAndValues ...any) {
	l.log.Debug("cron: "+msg, keysAndValues...)
}

func (l cronLogger) Error(err error, msg string, keysAndValues ...any) {
	l.log.Error("cron: "+msg, append(keysAndValues, "err", err)...)
}
