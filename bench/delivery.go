package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
)

// deliveryResult is the outbox stream under load: chat messages routed in through POST
// /v1/messages, one folder per chat, their turns' results read by one consumer of GET
// /v1/outbox that acks each batch.
type deliveryResult struct {
	messages, chats int
	rows            int // result rows handed out, counting repeats
	duplicates      int // rows handed out more than once
	lost            int // messages whose chat never got an answer covering them
	turns           int // distinct result rows: one per turn
	took            time.Duration
	latency         sample          // per message: posted -> the result covering it handed out
	afterTurn       sample          // per result row: its turn ended -> handed out
	stream          []goBenchResult // the store's benchmarks of the stream alone
}

// delivery measures it on a daemon of its own on podman.
func (b *bench) delivery(ctx context.Context) error {
	d, err := b.startDaemon(ctx, "arizukod-delivery", "podman", b.o.podmanSocket, b.o.arizukod)
	if err != nil {
		return err
	}
	res := &deliveryResult{messages: b.o.dlMessages, chats: b.o.dlChats}
	for i := 1; i <= res.chats; i++ {
		folder := fmt.Sprintf("dl%02d", i)
		if err := d.addGroups(ctx, folder); err != nil {
			return err
		}
		route := map[string]any{"seq": i, "match": fmt.Sprintf("chat_jid=tg:%d", i), "target": folder}
		if err := d.client.Do(ctx, http.MethodPost, "/v1/routes", route, nil); err != nil {
			return fmt.Errorf("delivery: route: %w", err)
		}
	}
	b.say("delivery: %d messages over %d chats (a folder each), one consumer of GET /v1/outbox", res.messages, res.chats)

	// answered[chat] is the highest message index of the chat a handed-out result covers,
	// with when; a chat's turn answers its last pending message ("reply m<index>").
	type answer struct {
		index int
		at    time.Time
	}
	var (
		mu       sync.Mutex
		answers  = map[int][]answer{}
		seen     = map[int64]int{}
		handed   = map[int64]time.Time{} // row id -> handed out first
		runOf    = map[int64]string{}    // row id -> its run
		lastSeen time.Time
	)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			lease, err := d.client.LeaseOutbox(cctx, apiwire.OutboxQuery{Wait: 5 * time.Second, Limit: 500})
			rows := lease.Items
			if err != nil || len(rows) == 0 {
				continue
			}
			now := time.Now()
			ids := make([]int64, len(rows))
			mu.Lock()
			for i, r := range rows {
				ids[i] = r.ID
				seen[r.ID]++
				if _, ok := handed[r.ID]; !ok {
					handed[r.ID], runOf[r.ID] = now, r.RunID
				}
				chat, _ := strconv.Atoi(strings.TrimPrefix(r.Target, "tg:"))
				idx, _ := strconv.Atoi(strings.TrimPrefix(r.Content, "m"))
				answers[chat] = append(answers[chat], answer{idx, now})
			}
			lastSeen = now
			mu.Unlock()
			if _, err := d.client.AckOutbox(context.WithoutCancel(cctx), lease.Lease, ids...); err != nil {
				b.say("delivery: ack: %v", err)
			}
		}
	}()

	posted := make([]time.Time, res.messages)
	t0 := time.Now()
	for i := 0; i < res.messages; i++ {
		chat := i%res.chats + 1
		msg := apiwire.InboundMessage{Platform: "bench", ChatJID: fmt.Sprintf("tg:%d", chat), Content: fmt.Sprintf("reply m%d", i)}
		posted[i] = time.Now()
		if err := d.client.Do(ctx, http.MethodPost, "/v1/messages", msg, nil); err != nil {
			return fmt.Errorf("delivery: message %d: %w", i, err)
		}
	}
	last := func(chat int) int { // the last message index of chat
		for i := res.messages - 1; i >= 0; i-- {
			if i%res.chats+1 == chat {
				return i
			}
		}
		return -1
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		mu.Lock()
		all := true
		for chat := 1; chat <= res.chats && all; chat++ {
			a := answers[chat]
			all = len(a) > 0 && a[len(a)-1].index >= last(chat)
		}
		mu.Unlock()
		if all || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	res.took = lastSeen.Sub(t0)
	for _, n := range seen {
		res.rows += n
		res.turns++
		if n > 1 {
			res.duplicates++
		}
	}
	for i := 0; i < res.messages; i++ {
		chat := i%res.chats + 1
		j := slices.IndexFunc(answers[chat], func(a answer) bool { return a.index >= i })
		if j < 0 {
			res.lost++
			continue
		}
		res.latency = append(res.latency, answers[chat][j].at.Sub(posted[i]))
	}
	for id, at := range handed {
		var run apiwire.Run
		if err := d.client.Do(ctx, http.MethodGet, "/v1/runs/"+runOf[id], nil, &run); err != nil {
			return fmt.Errorf("delivery: run of row %d: %w", id, err)
		}
		if ended, err := time.Parse(time.RFC3339Nano, run.EndedAt); err == nil {
			res.afterTurn = append(res.afterTurn, at.Sub(ended))
		}
	}
	res.stream = runGoBenchmark(ctx, b.o.repo, "./store/", "BenchmarkOutbox", "BenchmarkOutboxRoundTrip", b.say)
	b.report.delivery = res
	b.say("delivery: %d turns, %d rows in %s, %d lost, %d duplicated", res.turns, res.rows, res.took.Round(time.Millisecond), res.lost, res.duplicates)
	return nil
}

func (r *report) deliverySection(p printer) {
	d := r.delivery
	p("## Delivery: the outbox stream under load")
	p("")
	p("%d chat messages (`reply m<i>`) routed in through `POST /v1/messages` over %d chats, each routed to", d.messages, d.chats)
	p("a folder of its own, posted one after the other as fast as the API takes them, on arizukod on")
	p("podman (max_running 5). A folder's messages that arrive while its turn runs are answered by its")
	p("next turn together, so there are fewer turns (and result rows) than messages. One consumer")
	p("long-polls `GET /v1/outbox?wait=5s&limit=500` and acks each batch (`POST /v1/outbox/ack`).")
	p("A message counts as delivered when the first result row of its chat that covers it is handed out.")
	p("")
	p("| messages | chats | turns (result rows) | rows handed out | lost | duplicated | total s | rows/s | messages/s | message -> delivered p50 ms | p90 ms | p99 ms | max ms |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	sec := max(d.took.Seconds(), 0.001)
	p("| %d | %d | %d | %d | %d | %d | %.1f | %.1f | %.1f | %s | %s | %s | %s |", d.messages, d.chats, d.turns, d.rows, d.lost, d.duplicates,
		d.took.Seconds(), float64(d.rows)/sec, float64(d.messages)/sec, ms(d.latency.pct(50)), ms(d.latency.pct(90)),
		ms(d.latency.pct(99)), ms(d.latency.pct(100)))
	p("")
	p("The latency from message to delivered is the turns' (a container per turn, five at a time,")
	p("and a message waits for the turn before its own to end). What the stream adds is the time from")
	p("the commit that ends a turn (and writes its result row) to the waiting consumer holding the row:")
	p("p50 %s ms, p90 %s ms, max %s ms over the %d result rows (the run's `endedAt` to the consumer's clock;",
		ms(d.afterTurn.pct(50)), ms(d.afterTurn.pct(90)), ms(d.afterTurn.pct(100)), len(d.afterTurn))
	p("the store wakes the consumer on that commit, without polling).")
	p("")
	if len(d.stream) > 0 {
		p("The stream alone, in the store (`go test -bench BenchmarkOutbox ./store/`): a round trip is one row")
		p("appended, handed to a consumer waiting in `WaitOutbox` and acked; the drain is a backlog leased and")
		p("acked 100 rows at a time.")
		p("")
		p("| benchmark | iterations | figures |")
		p("|---|---:|---|")
		for _, g := range d.stream {
			if g.note != "" {
				p("| %s | | %s |", g.name, g.note)
				continue
			}
			p("| %s | %s | %s |", g.name, g.iters, strings.Join(g.metrics, ", "))
		}
		p("")
	}
}
