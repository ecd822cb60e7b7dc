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

	"github.com/arizuko/arizukod/api"
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
	latency         sample // per message: posted -> the result covering it handed out
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
		lastSeen time.Time
	)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			rows, err := d.client.LeaseOutbox(cctx, api.OutboxQuery{Wait: 5 * time.Second, Limit: 500})
			if err != nil || len(rows) == 0 {
				continue
			}
			now := time.Now()
			ids := make([]int64, len(rows))
			mu.Lock()
			for i, r := range rows {
				ids[i] = r.ID
				seen[r.ID]++
				chat, _ := strconv.Atoi(strings.TrimPrefix(r.Target, "tg:"))
				idx, _ := strconv.Atoi(strings.TrimPrefix(r.Content, "m"))
				answers[chat] = append(answers[chat], answer{idx, now})
			}
			lastSeen = now
			mu.Unlock()
			if _, err := d.client.AckOutbox(context.WithoutCancel(cctx), ids...); err != nil {
				b.say("delivery: ack: %v", err)
			}
		}
	}()

	posted := make([]time.Time, res.messages)
	t0 := time.Now()
	for i := 0; i < res.messages; i++ {
		chat := i%res.chats + 1
		msg := api.InboundMessage{Platform: "bench", ChatJID: fmt.Sprintf("tg:%d", chat), Content: fmt.Sprintf("reply m%d", i)}
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
	p("The latency is dominated by the turns themselves (a container per turn, five at a time);")
	p("the stream adds one store transaction per lease and per ack and wakes a waiting consumer")
	p("on the commit that ends a run, without polling.")
	p("")
}
