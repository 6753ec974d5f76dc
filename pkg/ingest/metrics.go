package ingest

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	events, batches, personRows, distinctIDRows, warnings, deadLettered, failures, gaps, eventLookups, eventsWritten, orderRepairs, wholeReads, leaseLosses, laneRecordsRead, laneCuts prometheus.Counter
	batchSize, foldSeconds, flushSeconds, laneVisible                                                                                                                                  prometheus.Histogram
	lag, committed, laneCommands                                                                                                                                                       prometheus.Gauge
	// grownEnds: grown batches committed, by what ended them (grow.go).
	grownEnds *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ingester", Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "ingester", Name: name, Help: help, Buckets: buckets})
		reg.MustRegister(h)
		return h
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "ingester", Name: name, Help: help})
		reg.MustRegister(g)
		return g
	}
	grown := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ingester", Name: "grown_batches_total",
		Help: "Batches grown beyond BatchSize with the backlog and committed, by what ended them (tail, time, dirty, cached, lane, idle, collection ended)."}, []string{"end"})
	reg.MustRegister(grown)
	return &metrics{
		grownEnds:       grown,
		events:          counter("events_total", "Events folded and written to ClickHouse."),
		batches:         counter("batches_total", "Batches committed."),
		personRows:      counter("person_rows_total", "Person rows written."),
		distinctIDRows:  counter("distinct_id_rows_total", "Distinct id rows written."),
		warnings:        counter("warnings_total", "Ingestion warnings recorded."),
		deadLettered:    counter("dead_lettered_total", "Messages sent to the dead-letter stream."),
		failures:        counter("batch_failures_total", "Batches that failed and were handed back for redelivery."),
		leaseLosses:     counter("lease_losses_total", "Leases lost while NATS could not be reached for longer than the lease TTL: the ingester waited for the lease and folded again from the last commit."),
		gaps:            counter("delivery_gaps_total", "Messages lost in delivery (a reconnect, a slow consumer): the consumer was recreated from the last commit."),
		eventLookups:    counter("event_lookups_total", "Batches whose events were looked up before writing, as they may overlap rows of an uncommitted write (after a start or a failed write)."),
		eventsWritten:   counter("events_already_written_total", "Events of such batches found already written and left out."),
		orderRepairs:    counter("order_repairs_total", "person_order repairs run after a start or a failed write found rows above the commit point (stale keys of a crashed attempt tombstoned)."),
		wholeReads:      counter("whole_project_reads_total", "Projects the fold read whole because one step missed many of their distinct ids (a cold cache: a start, a refold, a replay, an eviction); their steps then read nothing by key."),
		laneRecordsRead: counter("lane_records_read_total", "Write lane records read at a start (or a retry), from the start point kept with the commit."),
		laneCuts:        counter("lane_cuts_total", "Batches whose fold stopped early for a write lane command: the part folded was committed with the command, the rest went on with the next batch."),
		batchSize:       hist("batch_messages", "Messages per batch.", prometheus.ExponentialBuckets(1, 4, 10)),
		foldSeconds:     hist("fold_seconds", "Time to fold a batch in memory (with its reads).", prometheus.ExponentialBuckets(0.0005, 2, 16)),
		flushSeconds:    hist("flush_seconds", "Time to write a batch to ClickHouse.", prometheus.ExponentialBuckets(0.001, 2, 16)),
		laneVisible: hist("lane_visible_seconds", "From a command's storing in the stream (the server's clock) to the lane watermark that makes it visible, for commands the write lane took: the ingester's share of an API write's wait (G6).",
			prometheus.ExponentialBuckets(0.005, 2, 12)),
		lag:          gauge("consumer_pending_messages", "Messages in the stream not yet delivered to the ingester."),
		committed:    gauge("committed_sequence", "Last stream sequence committed to ClickHouse."),
		laneCommands: gauge("lane_sequence", "Last command the write lane folded ahead and committed (its stream sequence)."),
	}
}
