package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/stream"
)

// genEvent is one generated event, kept structured so the same event can
// be rendered as a stream envelope, an events-table row and a TSV line.
type genEvent struct {
	UUID       uuid.UUID
	Name       string
	DistinctID string
	TS         time.Time
	Props      string // properties object as JSON text
	Set        string // "$set" object, or ""
	SetOnce    string // "$set_once" object, or ""
	Unset      string // "$unset" array, or ""
	Mutating   bool
	Command    bool // published by the API, on the command subject
}

// generator makes a deterministic mix of events: 20% person-mutating
// ($set 8%, $set_once 4%, $unset 2%, $identify 4%, $create_alias 2%),
// ~400 bytes each, over a fixed pool of distinct ids. A quarter of the ids
// are "anon_" ids that $identify merges into "user_" ids; $create_alias
// joins two user ids (refused when both are identified).
type generator struct {
	r      *rand.Rand
	ids    int
	prefix string // of every distinct id: fresh ids for a second ingest
	base   time.Time
	step   time.Duration // between consecutive events' timestamps
	n      int
}

func newGenerator(seed uint64, ids int) *generator {
	return &generator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), ids: ids,
		base: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), step: 2 * time.Second}
}

// freshGenerator makes the same mix over ids no other generator uses, so
// its events never merge or change the persons that reads are measured on.
func freshGenerator(seed uint64, ids int, prefix string) *generator {
	g := newGenerator(seed, ids)
	g.prefix = prefix
	return g
}

var (
	pages    = []string{"home", "pricing", "docs", "blog", "signup", "login", "settings", "billing", "products", "search"}
	browsers = []string{"Chrome", "Firefox", "Safari", "Edge"}
	oses     = []string{"Linux", "Mac OS X", "Windows", "iOS", "Android"}
	plans    = []string{"free", "free", "free", "free", "free", "free", "free", "pro", "pro", "enterprise"}
)

func (g *generator) userID(i int) string { return fmt.Sprintf("%suser_%07d", g.prefix, i) }
func (g *generator) anonID(i int) string { return fmt.Sprintf("%sanon_%07d", g.prefix, i) }

// anyID is any id of the pool; three quarters are user ids.
func (g *generator) anyID() string {
	i := g.r.IntN(g.ids)
	if i < g.ids*3/4 {
		return g.userID(i)
	}
	return g.anonID(i)
}

func (g *generator) someUser() string { return g.userID(g.r.IntN(max(1, g.ids*3/4))) }
func (g *generator) someAnon() string {
	lo := g.ids * 3 / 4
	return g.anonID(lo + g.r.IntN(max(1, g.ids-lo)))
}

func (g *generator) uuid() uuid.UUID {
	var u uuid.UUID
	binary.LittleEndian.PutUint64(u[:8], g.r.Uint64())
	binary.LittleEndian.PutUint64(u[8:], g.r.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// commonProps is the ~300-byte block every captured event carries.
func (g *generator) commonProps(extra string) string {
	page := pages[g.r.IntN(len(pages))]
	var b strings.Builder
	b.Grow(420)
	fmt.Fprintf(&b, `{"$current_url":"https://app.example.com/%s/%d?utm_source=newsletter&utm_campaign=c%d",`, page, g.r.IntN(100000), g.r.IntN(50))
	fmt.Fprintf(&b, `"$referrer":"https://www.search.example.org/?q=term%d","$browser":%q,"$os":%q,`, g.r.IntN(10000), browsers[g.r.IntN(len(browsers))], oses[g.r.IntN(len(oses))])
	fmt.Fprintf(&b, `"$screen_width":%d,"$lib":"web","$lib_version":"1.%d.0","$session_id":"%016x","$pathname":"/%s"`, 1024+g.r.IntN(1024), g.r.IntN(100), g.r.Uint64(), page)
	if extra != "" {
		b.WriteString(",")
		b.WriteString(extra)
	}
	b.WriteString("}")
	return b.String()
}

func (g *generator) next() genEvent {
	g.n++
	e := genEvent{UUID: g.uuid(), TS: g.base.Add(time.Duration(g.n)*g.step + time.Duration(g.r.IntN(1000))*time.Millisecond)}
	switch k := g.r.IntN(100); {
	case k < 8:
		id := g.r.IntN(max(1, g.ids*3/4))
		e.Name, e.DistinctID, e.Mutating = "$set", g.userID(id), true
		e.Props = g.commonProps("")
		e.Set = fmt.Sprintf(`{"email":"user%d@example.com","name":"User %d","plan":%q,"visits":%d}`, id, id, plans[g.r.IntN(len(plans))], g.r.IntN(500))
	case k < 12:
		e.Name, e.DistinctID, e.Mutating = "$pageview", g.anyID(), true
		e.Props = g.commonProps("")
		e.SetOnce = fmt.Sprintf(`{"initial_referrer":"https://www.search.example.org/?q=term%d","signup_page":%q}`, g.r.IntN(10000), pages[g.r.IntN(len(pages))])
	case k < 14:
		e.Name, e.DistinctID, e.Mutating = "$set", g.anyID(), true
		e.Props = g.commonProps("")
		e.Unset = `["visits"]`
	case k < 18:
		e.Name, e.DistinctID, e.Mutating = "$identify", g.someUser(), true
		e.Props = g.commonProps(fmt.Sprintf(`"$anon_distinct_id":%q`, g.someAnon()))
	case k < 20:
		e.Name, e.DistinctID, e.Mutating = "$create_alias", g.someUser(), true
		e.Props = g.commonProps(fmt.Sprintf(`"alias":%q`, g.someUser()))
	case k < 70:
		e.Name, e.DistinctID = "$pageview", g.anyID()
		e.Props = g.commonProps("")
	case k < 85:
		e.Name, e.DistinctID = "$autocapture", g.anyID()
		e.Props = g.commonProps(fmt.Sprintf(`"$event_type":"click","$el_text":"Button %d"`, g.r.IntN(40)))
	default:
		e.Name, e.DistinctID = "checkout_step", g.anyID()
		e.Props = g.commonProps(fmt.Sprintf(`"step":%d,"cart_value":%d.%02d`, g.r.IntN(5), g.r.IntN(500), g.r.IntN(100)))
	}
	return e
}

// fillEvent creates the i-th extra person (a $set for a new id), to bring
// the persons table to its target size.
func fillEvent(g *generator, i int) genEvent {
	g.n++
	e := genEvent{UUID: g.uuid(), TS: g.base.Add(time.Duration(g.n) * time.Second), Name: "$set",
		DistinctID: fmt.Sprintf("fill_%07d", i), Mutating: true}
	e.Props = `{"$lib":"server"}`
	e.Set = fmt.Sprintf(`{"email":"fill%d@example.com","name":"Fill %d","plan":%q,"visits":%d}`, i, i, plans[g.r.IntN(len(plans))], g.r.IntN(500))
	return e
}

// envelope renders the event as published.
func (e genEvent) envelope() []byte {
	var b strings.Builder
	b.Grow(len(e.Props) + len(e.Set) + len(e.SetOnce) + 200)
	fmt.Fprintf(&b, `{"uuid":%q,"event":%q,"distinct_id":%q,"timestamp":%q,"properties":%s`,
		e.UUID.String(), e.Name, e.DistinctID, e.TS.Format("2006-01-02T15:04:05.000Z"), e.Props)
	if e.Set != "" {
		b.WriteString(`,"$set":` + e.Set)
	}
	if e.SetOnce != "" {
		b.WriteString(`,"$set_once":` + e.SetOnce)
	}
	if e.Unset != "" {
		b.WriteString(`,"$unset":` + e.Unset)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// storedProps is the properties column as the ingester stores it: the
// properties with $set/$set_once/$unset moved inside (key order aside).
func (e genEvent) storedProps() string {
	extra := ""
	if e.Set != "" {
		extra += `,"$set":` + e.Set
	}
	if e.SetOnce != "" {
		extra += `,"$set_once":` + e.SetOnce
	}
	if e.Unset != "" {
		extra += `,"$unset":` + e.Unset
	}
	if extra == "" {
		return e.Props
	}
	return e.Props[:len(e.Props)-1] + extra + "}"
}

// row is the events-table row of the event, with a person id derived from
// the distinct id (the same for both sides of the insert comparison).
func (e genEvent) row(project, seq uint64) eventstore.Row {
	pid := person.UUIDFor(project, e.DistinctID)
	return eventstore.Row{ProjectID: project, UUID: e.UUID, Event: e.Name, DistinctID: e.DistinctID,
		PersonID: binary.LittleEndian.Uint64(pid[:8]) >> 12, PersonUUID: pid, Timestamp: e.TS,
		Properties: e.storedProps(), Seq: seq}
}

var tsvEscaper = strings.NewReplacer("\\", "\\\\", "\t", "\\t", "\n", "\\n")

// tsv renders a row in TabSeparated, column order of eventColumns.
func tsv(r eventstore.Row, b *strings.Builder) {
	b.WriteString(strconv.FormatUint(r.ProjectID, 10))
	b.WriteByte('\t')
	b.WriteString(r.UUID.String())
	b.WriteByte('\t')
	b.WriteString(tsvEscaper.Replace(r.Event))
	b.WriteByte('\t')
	b.WriteString(tsvEscaper.Replace(r.DistinctID))
	b.WriteByte('\t')
	b.WriteString(strconv.FormatUint(r.PersonID, 10))
	b.WriteByte('\t')
	b.WriteString(r.PersonUUID.String())
	b.WriteByte('\t')
	b.WriteString(r.Timestamp.UTC().Format("2006-01-02 15:04:05"))
	b.WriteByte('\t')
	b.WriteString(strconv.Itoa(r.Timestamp.Nanosecond() / 1e6))
	b.WriteByte('\t')
	b.WriteString(tsvEscaper.Replace(r.Properties))
	b.WriteByte('\t')
	b.WriteString(strconv.FormatUint(r.Seq, 10))
	b.WriteByte('\n')
}

const eventColumns = "project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq"

// publishResult is what a bulk publish did.
type publishResult struct {
	n       int
	lastSeq uint64
	elapsed time.Duration
	bytes   int64
}

// publishAll publishes envelopes with PublishAsync (at most 4000 pending,
// the client's window), deduplicated by uuid like every producer does, and
// waits for every acknowledgement.
func publishAll(ctx context.Context, js jetstream.JetStream, project uint64, events []genEvent) (publishResult, error) {
	var res publishResult
	var lastSeq atomic.Uint64
	var failed atomic.Int64
	start := time.Now()
	subject, commands := stream.Subject(project), stream.CommandSubject(project)
	futures := make([]jetstream.PubAckFuture, 0, 4096)
	drain := func() error {
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				if ack.Sequence > lastSeq.Load() {
					lastSeq.Store(ack.Sequence)
				}
			case err := <-f.Err():
				failed.Add(1)
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	for _, e := range events {
		msg := nats.NewMsg(subject)
		if e.Command {
			msg.Subject = commands
		}
		msg.Data = e.envelope()
		msg.Header.Set(jetstream.MsgIDHeader, e.UUID.String())
		res.bytes += int64(len(msg.Data))
		f, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(30*time.Second))
		if err != nil {
			return res, err
		}
		futures = append(futures, f)
		if len(futures) >= 4000 {
			if err := drain(); err != nil {
				return res, err
			}
		}
	}
	if err := drain(); err != nil {
		return res, err
	}
	res.n, res.lastSeq, res.elapsed = len(events), lastSeq.Load(), time.Since(start)
	return res, nil
}
