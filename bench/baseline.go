package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/stream"
)

// Rate is a throughput measurement.
type Rate struct {
	Items     int     `json:"items"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// CPU seconds per item of the processes involved, when measured.
	ServerCPUPerItem float64 `json:"clickhouse_cpu_us_per_item,omitempty"`
	ClientCPUPerItem float64 `json:"client_cpu_us_per_item,omitempty"`
}

func rate(n int, d time.Duration) Rate {
	return Rate{Items: n, Seconds: d.Seconds(), PerSecond: float64(n) / d.Seconds()}
}

// rawConsume drains n messages of the events stream with a bare pull
// consumer (the ingester's pull settings), acknowledging every message
// (ackEvery 1, AckExplicit), every ackEvery-th with AckAll, or none
// (ackEvery 0, AckNone, as the ingester). The time runs from the first
// delivery to the last message received or acknowledgement sent.
func rawConsume(ctx context.Context, js jetstream.JetStream, name string, from uint64, n, ackEvery, batch int) (Rate, error) {
	policy := jetstream.AckExplicitPolicy
	switch {
	case ackEvery == 0:
		policy = jetstream.AckNonePolicy
	case ackEvery > 1:
		policy = jetstream.AckAllPolicy
	}
	cfg := jetstream.ConsumerConfig{
		Durable: name, AckPolicy: policy, AckWait: 2 * time.Minute, MaxAckPending: -1, // as the ingester (pkg/ingest/delivery.go)
		FilterSubject: stream.EventsPrefix + ">", DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	// A consumer on a stream of tens of millions of messages, just
	// written, may take the server longer than the client's default API
	// timeout (5 s) to create (a 10x run's did, with the log compressed).
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	cons, err := js.CreateConsumer(cctx, stream.Events, cfg)
	cancel()
	if err != nil {
		return Rate{}, fmt.Errorf("create the consumer: %w", err)
	}
	defer func() { _ = js.DeleteConsumer(context.WithoutCancel(ctx), stream.Events, name) }()
	iter, err := cons.Messages(jetstream.PullMaxMessages(2 * batch))
	if err != nil {
		return Rate{}, err
	}
	defer iter.Stop()
	var start time.Time
	for i := 0; i < n; i++ {
		msg, err := iter.Next()
		if err != nil {
			return Rate{}, fmt.Errorf("after %d messages: %w", i, err)
		}
		if i == 0 {
			start = time.Now()
		}
		if ackEvery == 1 || (ackEvery > 1 && ((i+1)%ackEvery == 0 || i == n-1)) {
			if err := msg.Ack(); err != nil {
				return Rate{}, err
			}
		}
	}
	return rate(n, time.Since(start)), nil
}

// insertComparison is the events insert target: the same event rows inserted by clickhouse-client
// (TabSeparated from a file) and by the ingester's own write path
// (chstore.Store.WriteRows with only events, in batches of the ingester's
// BatchSize), each into a fresh database, best of two rounds each.
type insertComparison struct {
	Client Rate `json:"clickhouse_client_tsv"`
	Store  Rate `json:"store_write_rows"`
	Batch  int  `json:"batch_rows"`
}

func compareInserts(ctx context.Context, ch *chServer, dir string, rows []eventstore.Row, batch int) (insertComparison, error) {
	res := insertComparison{Batch: batch}
	path := filepath.Join(dir, "events.tsv")
	if err := writeTSV(path, rows); err != nil {
		return res, err
	}
	defer os.Remove(path)
	for round := 0; round < 2; round++ {
		c, err := clientInsert(ctx, ch, fmt.Sprintf("bench_g2_client_%d", round), path, len(rows))
		if err != nil {
			return res, fmt.Errorf("clickhouse-client insert: %w", err)
		}
		if c.PerSecond > res.Client.PerSecond {
			res.Client = c
		}
		s, err := storeInsert(ctx, ch, fmt.Sprintf("bench_g2_store_%d", round), rows, batch)
		if err != nil {
			return res, fmt.Errorf("store insert: %w", err)
		}
		if s.PerSecond > res.Store.PerSecond {
			res.Store = s
		}
	}
	return res, nil
}

func writeTSV(path string, rows []eventstore.Row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b strings.Builder
	for _, r := range rows {
		b.Reset()
		tsv(r, &b)
		if _, err := w.WriteString(b.String()); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func dropDB(ctx context.Context, ch *chServer, name string) {
	st, err := ch.open(ctx, "default")
	if err != nil {
		return
	}
	defer st.Close()
	_ = st.Conn().Exec(ctx, "DROP DATABASE IF EXISTS "+name)
}

func clientInsert(ctx context.Context, ch *chServer, db, path string, n int) (Rate, error) {
	st, err := ch.openDB(ctx, db)
	if err != nil {
		return Rate{}, err
	}
	st.Close()
	defer dropDB(ctx, ch, db)
	in, err := os.Open(path)
	if err != nil {
		return Rate{}, err
	}
	defer in.Close()
	host, port := ch.hostPort()
	cmd := exec.CommandContext(ctx, "clickhouse-client", "--host", host, "--port", port, "--database", db,
		"--query", "INSERT INTO events ("+eventColumns+") FORMAT TabSeparated")
	cmd.Stdin = in
	var stderr strings.Builder
	cmd.Stderr = &stderr
	meter := newCPUMeter(ch.pid)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return Rate{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	r := rate(n, time.Since(start))
	r.ServerCPUPerItem = meter.stop()[0] / float64(n) * 1e6
	if ps := cmd.ProcessState; ps != nil {
		r.ClientCPUPerItem = (ps.UserTime() + ps.SystemTime()).Seconds() / float64(n) * 1e6
	}
	if err := checkCount(ctx, ch, db, n); err != nil {
		return Rate{}, err
	}
	return r, nil
}

func storeInsert(ctx context.Context, ch *chServer, db string, rows []eventstore.Row, batch int) (Rate, error) {
	st, err := ch.openDB(ctx, db)
	if err != nil {
		return Rate{}, err
	}
	defer st.Close()
	defer dropDB(ctx, ch, db)
	meter := newCPUMeter(ch.pid, os.Getpid())
	start := time.Now()
	for i := 0; i < len(rows); i += batch {
		if err := st.WriteRows(ctx, rows[i:min(i+batch, len(rows))], fold.Batch{}); err != nil {
			return Rate{}, err
		}
	}
	r := rate(len(rows), time.Since(start))
	cpu := meter.stop()
	r.ServerCPUPerItem = cpu[0] / float64(len(rows)) * 1e6
	r.ClientCPUPerItem = cpu[1] / float64(len(rows)) * 1e6
	if err := checkCount(ctx, ch, db, len(rows)); err != nil {
		return Rate{}, err
	}
	return r, nil
}

func checkCount(ctx context.Context, ch *chServer, db string, want int) error {
	st, err := ch.open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	var n uint64
	if err := st.Conn().QueryRow(ctx, "SELECT count() FROM events").Scan(&n); err != nil {
		return err
	}
	if int(n) != want {
		return fmt.Errorf("%s.events holds %d rows, want %d", db, n, want)
	}
	return nil
}
